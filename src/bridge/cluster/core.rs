//! The cluster mbox's shared core: the local subscriptions, what each peer wants, the
//! sending path (one encoded copy per interested node) and the receiving endpoint.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::{Mutex, RwLock};

use super::filter::Shipped;
use super::wire::{ClusterInterest, KeyPredicate, TypeInterest, EV_CLUSTER_INTEREST};
use crate::actors::{
    Body, DeadLetterReason, DecodeFn, Delivery, Event, EventFlags, EventHandle, EventType,
    SystemInner, EV_NODE_CONNECTED, EV_NODE_DISCONNECTED, EV_SUBSCRIBE,
};
use crate::drops::DropReason;
use crate::environment::WeakEnv;
use crate::interconnect::{NodeConnected, NodeDisconnected, Subscribe, Unsubscribe};
use crate::mbox::{
    DeliveryFilter, DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind, SendError, Sink, SubscribeError,
};
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::{ActorId, Environment};

/// How long after a session ended the cluster mbox subscribes to the peer's session again
/// (which starts connecting to it); doubled after each session that ended without coming
/// up (an unreachable peer, or this node's interconnect stopped), up to 16 times this.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// Encodes one named type's message on the sender's thread.
pub(crate) type Encode = fn(&Message, &SystemInner) -> Option<(Vec<u8>, DecodeFn)>;
/// Turns an arrived event into the message subscribers get; the handle back if it does
/// not decode.
pub(crate) type Convert = fn(EventHandle) -> Result<Message, EventHandle>;
/// Reads the key of a message for shipped filters.
pub(crate) type KeyOf = fn(&Message) -> Option<u64>;

pub(crate) fn encode_of<E: Event + Sync>(
    m: &Message,
    sys: &SystemInner,
) -> Option<(Vec<u8>, DecodeFn)> {
    let e = m.downcast_ref::<E>()?;
    sys.remote.get()?.encode(E::EVENT_TYPE, e)
}

pub(crate) fn convert_of<E: Event + Sync>(mut h: EventHandle) -> Result<Message, EventHandle> {
    match h.take::<E>() {
        Some(e) => Ok(Message::new(e)),
        None => Err(h),
    }
}

pub(crate) fn key_of<E: Event + Sync + super::ClusterKey>(m: &Message) -> Option<u64> {
    m.downcast_ref::<E>().map(super::ClusterKey::cluster_key)
}

/// One named message type.
pub(crate) struct TypeEntry {
    pub(crate) type_id: TypeId,
    pub(crate) event_type: EventType,
    pub(crate) name: &'static str,
    pub(crate) encode: Encode,
    pub(crate) convert: Convert,
    pub(crate) key: Option<KeyOf>,
}

/// How a message is handed out on a node.
pub(crate) enum Local {
    /// To every subscriber: the wrapped local MPMC mbox fans out (filters, limits,
    /// priorities and tracing are its own).
    Fanout(Mbox),
    /// To one subscriber in the cluster.
    RoundRobin,
}

/// One local sink's entry for one type.
#[derive(Clone)]
struct Sub {
    sink: Sink,
    subscribed: bool,
    filter: Option<DeliveryFilter>,
}

/// What changes under the state lock: the local subscriptions, the connected peers, the
/// interest last announced.
struct State {
    subs: AHashMap<TypeId, Vec<Sub>>,
    connected: BTreeSet<u32>,
    /// Per peer, the sessions that ended in a row without coming up.
    failures: AHashMap<u32, u32>,
    version: u64,
    announced: Vec<TypeInterest>,
    closed: bool,
}

/// One peer's wish for one type.
#[derive(Clone)]
struct PeerWant {
    node: u32,
    subscribers: u32,
    keys: Option<Vec<KeyPredicate>>,
}

/// What a send reads: copied on write, replaced whole.
#[derive(Clone, Default)]
struct View {
    /// Per event type, the peers that want it.
    remote: AHashMap<EventType, Vec<PeerWant>>,
    /// Per peer, the (incarnation, version) of its last announcement taken.
    seen: AHashMap<u32, (u64, u64)>,
    /// Per local type, the subscribed sinks (with their filters).
    local: AHashMap<TypeId, LocalSubs>,
}

/// One local type's subscribed sinks, with their filters.
type LocalSubs = Arc<Vec<(Sink, Option<DeliveryFilter>)>>;

/// The shared core of one cluster mbox on one node.
pub(crate) struct Core {
    pub(crate) id: MboxId,
    pub(crate) name: String,
    pub(crate) service_name: [u8; 12],
    pub(crate) sys: Weak<SystemInner>,
    pub(crate) env: WeakEnv,
    pub(crate) local: Local,
    /// Sorted by type id.
    pub(crate) types: Vec<TypeEntry>,
    pub(crate) peers: Vec<u32>,
    pub(crate) flags: EventFlags,
    pub(crate) incarnation: u64,
    /// The endpoint's id (the sender of everything this node sends for the mbox).
    pub(crate) me: OnceLock<ActorId>,
    /// The service id it is reachable by on this node.
    pub(crate) service: OnceLock<ActorId>,
    state: Mutex<State>,
    view: RwLock<Arc<View>>,
    turn: AtomicUsize,
}

impl Core {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: MboxId,
        name: String,
        service_name: [u8; 12],
        sys: Weak<SystemInner>,
        env: WeakEnv,
        local: Local,
        types: Vec<TypeEntry>,
        peers: Vec<u32>,
        flags: EventFlags,
        incarnation: u64,
    ) -> Core {
        Core {
            id,
            name,
            service_name,
            sys,
            env,
            local,
            types,
            peers,
            flags,
            incarnation,
            me: OnceLock::new(),
            service: OnceLock::new(),
            state: Mutex::new(State {
                subs: AHashMap::new(),
                connected: BTreeSet::new(),
                failures: AHashMap::new(),
                version: 0,
                announced: Vec::new(),
                closed: false,
            }),
            view: RwLock::new(Arc::new(View::default())),
            turn: AtomicUsize::new(0),
        }
    }

    fn entry_by_type(&self, ty: TypeId) -> Option<&TypeEntry> {
        self.types
            .binary_search_by_key(&ty, |t| t.type_id)
            .ok()
            .map(|i| &self.types[i])
    }

    fn entry_by_event(&self, ty: EventType) -> Option<&TypeEntry> {
        self.types.iter().find(|t| t.event_type == ty)
    }

    pub(crate) fn service_of(&self, node: u32) -> Option<ActorId> {
        ActorId::service(node, &self.service_name).ok()
    }

    /// The peers known to want `event_type` now.
    pub(crate) fn nodes_wanting(&self, event_type: EventType) -> Vec<u32> {
        let view = self.view.read().clone();
        view.remote
            .get(&event_type)
            .map(|w| w.iter().map(|p| p.node).collect())
            .unwrap_or_default()
    }

    /// What `node` announced for `event_type`: its subscriber count.
    pub(crate) fn subscribers_on(&self, event_type: EventType, node: u32) -> u32 {
        let view = self.view.read().clone();
        view.remote
            .get(&event_type)
            .and_then(|w| w.iter().find(|p| p.node == node))
            .map_or(0, |p| p.subscribers)
    }

    /// The peers a send of `msg` would go to now (shipped filters applied).
    pub(crate) fn nodes_for(&self, msg: &Message) -> Vec<u32> {
        let Some(entry) = self.entry_by_type(msg.type_id()) else {
            return Vec::new();
        };
        let view = self.view.read().clone();
        view.remote
            .get(&entry.event_type)
            .map(|w| {
                w.iter()
                    .filter(|p| Self::passes(p, entry, msg))
                    .map(|p| p.node)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The peers whose session is up, as this mbox last heard.
    pub(crate) fn connected_peers(&self) -> Vec<u32> {
        self.state.lock().connected.iter().copied().collect()
    }

    // ---- local subscriptions and announcements ----

    /// Records a change of `ty`'s local entries, refreshes the view's local part, and
    /// announces the new interest to the connected peers if it changed.
    fn change(&self, ty: TypeId, f: impl FnOnce(&mut Vec<Sub>)) {
        // What the change replaces (a filter, a sink, the view's old list) is dropped
        // after the locks are released: its last reference may run a user's `Drop`.
        let graveyard: (Vec<Sub>, Option<LocalSubs>);
        let announce = {
            let mut st = self.state.lock();
            let list = st.subs.entry(ty).or_default();
            let before = list.clone();
            f(list);
            list.retain(|s| s.subscribed || s.filter.is_some());
            let subscribed: Vec<(Sink, Option<DeliveryFilter>)> = list
                .iter()
                .filter(|s| s.subscribed)
                .map(|s| (s.sink.clone(), s.filter.clone()))
                .collect();
            if list.is_empty() {
                st.subs.remove(&ty);
            }
            let old_local = {
                let mut view = self.view.write();
                let v = Arc::make_mut(&mut view);
                if subscribed.is_empty() {
                    v.local.remove(&ty)
                } else {
                    v.local.insert(ty, Arc::new(subscribed))
                }
            };
            graveyard = (before, old_local);
            let interest = self.interest(&st);
            if interest == st.announced || st.closed {
                None
            } else {
                st.version += 1;
                st.announced = interest.clone();
                let to: Vec<u32> = st.connected.iter().copied().collect();
                Some((self.announcement(st.version, interest), to))
            }
        };
        drop(graveyard);
        if let Some((send, to)) = announce {
            for peer in to {
                self.announce(peer, send.clone());
            }
        }
    }

    /// This node's interest as the state says.
    fn interest(&self, st: &State) -> Vec<TypeInterest> {
        let mut out: Vec<TypeInterest> = Vec::new();
        for (ty, list) in &st.subs {
            let Some(entry) = self.entry_by_type(*ty) else {
                continue;
            };
            let subscribed: Vec<&Sub> = list.iter().filter(|s| s.subscribed).collect();
            if subscribed.is_empty() {
                continue;
            }
            let mut keys = Some(Vec::new());
            for s in &subscribed {
                let shipped = s.filter.as_ref().and_then(|f| f.shipped()).and_then(|a| {
                    a.downcast_ref::<Shipped>()
                        .filter(|sh| sh.event_type == entry.event_type)
                });
                match (shipped, keys.as_mut()) {
                    (Some(sh), Some(k)) => k.push(sh.predicate.clone()),
                    _ => keys = None,
                }
            }
            let subscribers = match self.local {
                // The fan-out only needs to know that some subscriber exists.
                Local::Fanout(_) => 1,
                Local::RoundRobin => u32::try_from(subscribed.len()).unwrap_or(u32::MAX),
            };
            out.push(TypeInterest {
                event_type: entry.event_type,
                subscribers,
                keys,
            });
        }
        out.sort_by_key(|t| t.event_type);
        out
    }

    fn announcement(&self, version: u64, types: Vec<TypeInterest>) -> ClusterInterest {
        ClusterInterest {
            mbox: self.name.clone(),
            incarnation: self.incarnation,
            version,
            types,
            ask: false,
        }
    }

    fn announce(&self, peer: u32, interest: ClusterInterest) {
        let (Some(sys), Some(&me), Some(to)) =
            (self.sys.upgrade(), self.me.get(), self.service_of(peer))
        else {
            return;
        };
        sys.send(EventHandle::new(to, me, interest).with_flags(self.flags));
    }

    /// Subscribes the endpoint to every peer's session (the interconnect then connects).
    pub(crate) fn subscribe_sessions(&self) {
        let (Some(sys), Some(&me)) = (self.sys.upgrade(), self.me.get()) else {
            return;
        };
        for &peer in &self.peers {
            sys.send(EventHandle::new(
                ActorId::interconnect_proxy(peer),
                me,
                Subscribe,
            ));
        }
    }

    fn on_connected(&self, peer: u32) {
        let send = {
            let mut st = self.state.lock();
            if st.closed || !self.peers.contains(&peer) {
                return;
            }
            st.connected.insert(peer);
            st.failures.remove(&peer);
            ClusterInterest {
                ask: true,
                ..self.announcement(st.version, st.announced.clone())
            }
        };
        self.announce(peer, send);
    }

    fn on_disconnected(&self, peer: u32, mailbox: Option<Mbox>) {
        let (closed, failures) = {
            let mut st = self.state.lock();
            let was_up = st.connected.remove(&peer);
            let failures = st.failures.entry(peer).or_insert(0);
            if !was_up {
                *failures = (*failures + 1).min(4);
            }
            let failures = *failures;
            (st.closed, failures)
        };
        self.forget_peer(peer);
        if closed || !self.peers.contains(&peer) {
            return;
        }
        let (Some(sys), Some(&me), Some(mailbox)) = (self.sys.upgrade(), self.me.get(), mailbox)
        else {
            return;
        };
        if sys.env.is_shutting_down() {
            return;
        }
        // A new session needs a new subscription; a little later, so that a node whose
        // interconnect is stopping (which answers at once) is not asked in a loop.
        let again = EventHandle::new(ActorId::interconnect_proxy(peer), me, Subscribe);
        let _ = sys.schedule(&mailbox, RESUBSCRIBE_DELAY * (1 << failures), again);
    }

    /// Everything `peer` wanted vanishes.
    fn forget_peer(&self, peer: u32) {
        let mut view = self.view.write();
        if !view.seen.contains_key(&peer) && !view.remote.values().flatten().any(|w| w.node == peer)
        {
            return;
        }
        let v = Arc::make_mut(&mut view);
        v.seen.remove(&peer);
        for wants in v.remote.values_mut() {
            wants.retain(|w| w.node != peer);
        }
        v.remote.retain(|_, w| !w.is_empty());
    }

    fn on_interest(&self, peer: u32, interest: ClusterInterest) {
        if interest.mbox != self.name || !self.peers.contains(&peer) {
            return;
        }
        if interest.ask {
            let answer = {
                let mut st = self.state.lock();
                // The session is up (it brought this): changes go to the peer from now on,
                // even if this mbox's own subscription to the session is not renewed yet.
                if !st.closed {
                    st.connected.insert(peer);
                }
                (!st.closed).then(|| self.announcement(st.version, st.announced.clone()))
            };
            if let Some(answer) = answer {
                self.announce(peer, answer);
            }
        }
        let mut view = self.view.write();
        if let Some(&(inc, ver)) = view.seen.get(&peer) {
            if inc == interest.incarnation && interest.version <= ver && interest.version != 0 {
                return; // an older announcement overtaken by a newer one
            }
        }
        let v = Arc::make_mut(&mut view);
        v.seen
            .insert(peer, (interest.incarnation, interest.version));
        for wants in v.remote.values_mut() {
            wants.retain(|w| w.node != peer);
        }
        for t in interest.types {
            if t.subscribers == 0 || self.entry_by_event(t.event_type).is_none() {
                continue;
            }
            v.remote.entry(t.event_type).or_default().push(PeerWant {
                node: peer,
                subscribers: t.subscribers,
                keys: t.keys,
            });
        }
        v.remote.retain(|_, w| !w.is_empty());
    }

    /// The mbox is going: peers are told it wants nothing, sessions are left.
    pub(crate) fn close(&self) {
        let (send, to) = {
            let mut st = self.state.lock();
            if st.closed {
                return;
            }
            st.closed = true;
            st.version += 1;
            st.announced.clear();
            let to: Vec<u32> = st.connected.iter().copied().collect();
            (self.announcement(st.version, Vec::new()), to)
        };
        for peer in to {
            self.announce(peer, send.clone());
        }
        let (Some(sys), Some(&me)) = (self.sys.upgrade(), self.me.get()) else {
            return;
        };
        for &peer in &self.peers {
            sys.send(EventHandle::new(
                ActorId::interconnect_proxy(peer),
                me,
                Unsubscribe,
            ));
        }
        if let Some(&service) = self.service.get() {
            sys.services.clear_if(service, me);
        }
        sys.forget(me);
    }

    // ---- sending ----

    fn refused(&self, msg: &Message, reason: &'static str) -> SendError {
        SendError::NotSerializable {
            type_name: msg.message_type().name(),
            mbox: format!("cluster:{}", self.name),
            reason,
        }
    }

    fn count(&self, reason: DropReason) {
        if let Some(env) = self.env.upgrade() {
            env.0.drops.count(reason);
        }
    }

    fn no_subscribers(&self, msg: &Message) {
        if let Some(env) = self.env.upgrade() {
            env.trace_no_subscribers(self.id, msg);
        }
    }

    /// Sends one encoded copy of `msg` to each of `nodes`.
    fn ship(
        &self,
        entry: &TypeEntry,
        msg: &Message,
        nodes: impl Iterator<Item = u32>,
    ) -> Result<(), SendError> {
        let mut nodes = nodes.peekable();
        if nodes.peek().is_none() {
            return Ok(());
        }
        let sys = self.sys.upgrade().ok_or_else(|| SendError::Refused {
            type_name: msg.message_type().name(),
            mbox: format!("cluster:{}", self.name),
            reason: "the actor system is gone".to_owned(),
        })?;
        let me = self.me.get().copied().unwrap_or_default();
        let (bytes, decode) = (entry.encode)(msg, &sys)
            .ok_or_else(|| self.refused(msg, "its codec failed, or its envelope hides it"))?;
        let mut bytes = Some(bytes);
        while let Some(node) = nodes.next() {
            let Some(to) = self.service_of(node) else {
                continue;
            };
            // The last node takes the bytes, the others a copy.
            let body = if nodes.peek().is_some() {
                Body::from_slice(bytes.as_deref().unwrap_or_default())
            } else {
                Body::from_vec(bytes.take().unwrap_or_default())
            };
            let h = EventHandle::serialized_with(entry.event_type, to, me, body, Some(decode))
                .with_flags(self.flags);
            sys.send(h);
        }
        Ok(())
    }

    fn passes(want: &PeerWant, entry: &TypeEntry, msg: &Message) -> bool {
        match (&want.keys, entry.key) {
            (Some(keys), Some(key_of)) => match key_of(msg) {
                Some(k) => keys.iter().any(|p| p.matches(k)),
                None => true,
            },
            _ => true,
        }
    }

    fn send(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.is_mutable() {
            return Err(SendError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: format!("cluster:{}", self.name),
            });
        }
        let Some(entry) = self.entry_by_type(msg.type_id()) else {
            return Err(self.refused(&msg, "its type is not named for this cluster mbox"));
        };
        let view = self.view.read().clone();
        let wants: &[PeerWant] = view
            .remote
            .get(&entry.event_type)
            .map_or(&[], Vec::as_slice);
        let local = view.local.get(&msg.type_id());
        match &self.local {
            Local::Fanout(inner) => {
                let mut shipped_out = 0;
                let to = wants.iter().filter(|w| {
                    let pass = Self::passes(w, entry, &msg);
                    if !pass {
                        shipped_out += 1;
                    }
                    pass
                });
                let to: Vec<u32> = to.map(|w| w.node).collect();
                let any_remote = !to.is_empty();
                self.ship(entry, &msg, to.into_iter())?;
                for _ in 0..shipped_out {
                    self.count(DropReason::Filtered);
                }
                match local {
                    Some(_) => inner.deliver_with(msg, depth, mode)?,
                    None if !any_remote && shipped_out == 0 => self.no_subscribers(&msg),
                    None => {}
                }
            }
            Local::RoundRobin => {
                let remote: Vec<&PeerWant> = wants
                    .iter()
                    .filter(|w| Self::passes(w, entry, &msg))
                    .collect();
                let here = local.map_or(0, |l| l.len());
                let total = here + remote.iter().map(|w| w.subscribers as usize).sum::<usize>();
                if total == 0 {
                    if wants.is_empty() {
                        self.no_subscribers(&msg);
                    } else {
                        self.count(DropReason::Filtered);
                    }
                    return Ok(());
                }
                let mut k = self.turn.fetch_add(1, Ordering::Relaxed) % total;
                if k < here {
                    drop(view);
                    self.deliver_one(&msg, depth, mode, k);
                    return Ok(());
                }
                k -= here;
                for w in remote {
                    if k < w.subscribers as usize {
                        return self.ship(entry, &msg, std::iter::once(w.node));
                    }
                    k -= w.subscribers as usize;
                }
            }
        }
        Ok(())
    }

    /// Round-robin on this node: the subscriber at `start` (in turn), or the next one
    /// whose filter accepts.
    fn deliver_one(
        &self,
        msg: &Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
        start: usize,
    ) {
        let list = self.view.read().local.get(&msg.type_id()).cloned();
        let Some(list) = list else {
            self.no_subscribers(msg);
            return;
        };
        let n = list.len();
        for i in 0..n {
            let (sink, filter) = &list[(start + i) % n];
            if filter.as_ref().is_none_or(|f| f.accepts(msg)) {
                sink.push_message(self.id, msg.clone(), depth, mode);
                return;
            }
        }
        self.count(DropReason::Filtered);
    }

    /// A message from another node: to the subscribers here only.
    fn deliver_arrived(&self, msg: Message) {
        match &self.local {
            Local::Fanout(inner) => {
                let _ = inner.deliver_with(msg, 0, DeliveryMode::Ordinary);
            }
            Local::RoundRobin => {
                let start = self.turn.fetch_add(1, Ordering::Relaxed);
                self.deliver_one(&msg, 0, DeliveryMode::Ordinary, start);
            }
        }
    }
}

/// The handle agents hold: the cluster mbox of this node.
pub(crate) struct ClusterMboxImpl(pub(crate) Arc<Core>);

impl Drop for ClusterMboxImpl {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl MboxImpl for ClusterMboxImpl {
    fn id(&self) -> MboxId {
        self.0.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::MultiConsumer
    }

    fn subscribe(&self, ty: MessageType, subscriber: &Sink) -> Result<(), SubscribeError> {
        let core = &self.0;
        if ty.is_mutable() {
            return Err(SubscribeError::MutableFromMultiConsumer {
                type_name: ty.name(),
                mbox: self.name(),
            });
        }
        if core.entry_by_type(ty.type_id()).is_none() {
            return Err(SubscribeError::Refused {
                mbox: self.name(),
                reason: format!("{} is not named for this cluster mbox", ty.name()),
            });
        }
        if let Local::Fanout(inner) = &core.local {
            inner.raw().subscribe(ty, subscriber)?;
        }
        core.change(ty.type_id(), |list| {
            match list.iter_mut().find(|s| s.sink == *subscriber) {
                Some(s) => s.subscribed = true,
                None => list.push(Sub {
                    sink: subscriber.clone(),
                    subscribed: true,
                    filter: None,
                }),
            }
        });
        Ok(())
    }

    fn unsubscribe(&self, ty: MessageType, subscriber: &Sink) {
        let core = &self.0;
        if let Local::Fanout(inner) = &core.local {
            inner.raw().unsubscribe(ty, subscriber);
        }
        core.change(ty.type_id(), |list| {
            if let Some(s) = list.iter_mut().find(|s| s.sink == *subscriber) {
                s.subscribed = false;
            }
        });
    }

    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        self.0.send(msg, depth, mode)
    }

    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        subscriber: &Sink,
    ) -> Result<(), SubscribeError> {
        let core = &self.0;
        if let Local::Fanout(inner) = &core.local {
            inner
                .raw()
                .set_delivery_filter(ty, filter.clone(), subscriber)?;
        }
        core.change(ty.type_id(), |list| {
            match list.iter_mut().find(|s| s.sink == *subscriber) {
                Some(s) => s.filter = Some(filter),
                None => list.push(Sub {
                    sink: subscriber.clone(),
                    subscribed: false,
                    filter: Some(filter),
                }),
            }
        });
        Ok(())
    }

    fn drop_delivery_filter(&self, ty: MessageType, subscriber: &Sink) {
        let core = &self.0;
        if let Local::Fanout(inner) = &core.local {
            inner.raw().drop_delivery_filter(ty, subscriber);
        }
        core.change(ty.type_id(), |list| {
            if let Some(s) = list.iter_mut().find(|s| s.sink == *subscriber) {
                s.filter = None;
            }
        });
    }

    fn name(&self) -> String {
        format!("cluster:{}", self.0.name)
    }

    fn environment(&self) -> Option<Environment> {
        self.0.env.upgrade()
    }
}

/// The endpoint in the actor table (the node's service for this mbox): takes the peers'
/// data and announcements and the session notices.
pub(crate) struct ServiceMbox {
    pub(crate) id: MboxId,
    pub(crate) core: Weak<Core>,
    /// This endpoint as an mbox (for the scheduled resubscriptions), set once registered.
    pub(crate) me: OnceLock<Weak<dyn MboxImpl>>,
}

impl MboxImpl for ServiceMbox {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, _: MessageType, _: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::Refused {
            mbox: self.name(),
            reason: "subscribe to the cluster mbox itself".into(),
        })
    }

    fn unsubscribe(&self, _: MessageType, _: &Sink) {}

    fn deliver(&self, msg: Message, _: RedirectionDepth, _: DeliveryMode) -> Result<(), SendError> {
        let Some(mut delivery) = msg.take_mutable::<Delivery>() else {
            return Ok(());
        };
        let Some((mut h, counted)) = delivery.take_for_endpoint() else {
            return Ok(());
        };
        let Some(core) = self.core.upgrade() else {
            return Ok(());
        };
        let Some(sys) = core.sys.upgrade() else {
            return Ok(());
        };
        if counted {
            sys.dequeued(h.recipient_rewrite());
        }
        match h.event_type() {
            EV_CLUSTER_INTEREST => {
                let from = h.sender().node_id();
                match h.take::<ClusterInterest>() {
                    Some(i) => core.on_interest(from, i),
                    None => sys.dead_letter(&h, DeadLetterReason::Unhandled),
                }
            }
            EV_NODE_CONNECTED => {
                if let Some(c) = h.get::<NodeConnected>() {
                    core.on_connected(c.node_id);
                }
            }
            EV_NODE_DISCONNECTED => {
                if let Some(d) = h.get::<NodeDisconnected>() {
                    let mailbox = self.me.get().and_then(Weak::upgrade).map(Mbox::custom);
                    core.on_disconnected(d.node_id, mailbox);
                }
            }
            // A scheduled resubscription: on to the proxy it names.
            EV_SUBSCRIBE if h.sender() == core.me.get().copied().unwrap_or_default() => {
                sys.send(EventHandle::new(h.recipient(), h.sender(), Subscribe));
            }
            ty => match core.entry_by_event(ty) {
                Some(entry) => match (entry.convert)(h) {
                    Ok(m) => core.deliver_arrived(m),
                    Err(h) => sys.dead_letter(&h, DeadLetterReason::Unhandled),
                },
                None => sys.dead_letter(&h, DeadLetterReason::Unhandled),
            },
        }
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        _: MessageType,
        _: DeliveryFilter,
        _: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _: MessageType, _: &Sink) {}

    fn name(&self) -> String {
        match self.core.upgrade() {
            Some(c) => format!("cluster-endpoint:{}", c.name),
            None => "cluster-endpoint".to_owned(),
        }
    }

    fn environment(&self) -> Option<Environment> {
        self.core.upgrade().and_then(|c| c.env.upgrade())
    }
}
