//! The cluster mbox's shared core: the local subscriptions, what each peer wants, the
//! sending path (one encoded copy per interested node) and the receiving endpoint.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::{Mutex, RwLock};

use super::filter::{ClusterKey, Shipped};
use super::wire::{ClusterInterest, KeyPredicate, TypeInterest};
use crate::actors::{DecodeFn, Event, EventFlags, EventHandle, EventType, SystemInner};
use crate::environment::WeakEnv;
use crate::interconnect::{Subscribe, Unsubscribe};
use crate::mbox::{DeliveryFilter, Mbox, MboxId, Sink};
use crate::message::Message;
use crate::ActorId;

/// How long after a session ended the cluster mbox subscribes to the peer's session again
/// (which starts connecting to it); doubled after each session that ended without coming
/// up (an unreachable peer, or this node's interconnect stopped), up to 16 times this.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// The scheduled resubscription to `peer`'s session, sent by this node's timer to the
/// mbox's endpoint. A private Rust type: nothing from the wire can be one, so no peer can
/// forge it (wire events reach the endpoint as YDB events only).
pub(crate) struct Resubscribe {
    pub(crate) peer: u32,
}

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
    // Through its envelopes (a delayed send's timer envelope): the message leaves for
    // the other node's handlers, so it is revealed as for handling.
    let e = m.handler_payload::<E>()?;
    sys.remote.get()?.encode(E::EVENT_TYPE, e)
}

pub(crate) fn convert_of<E: Event + Sync>(mut h: EventHandle) -> Result<Message, EventHandle> {
    match h.take::<E>() {
        Some(e) => Ok(Message::new(e)),
        None => Err(h),
    }
}

pub(crate) fn key_of<E: Event + Sync + ClusterKey>(m: &Message) -> Option<u64> {
    m.reveal(crate::message::Access::Inspection)?
        .downcast_ref::<E>()
        .map(ClusterKey::cluster_key)
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
pub(super) struct Sub {
    pub(super) sink: Sink,
    pub(super) subscribed: bool,
    pub(super) filter: Option<DeliveryFilter>,
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
pub(super) struct PeerWant {
    pub(super) node: u32,
    pub(super) subscribers: u32,
    pub(super) keys: Option<Vec<KeyPredicate>>,
}

/// What a send reads: copied on write, replaced whole.
#[derive(Clone, Default)]
pub(super) struct View {
    /// Per event type, the peers that want it.
    pub(super) remote: AHashMap<EventType, Vec<PeerWant>>,
    /// Per peer, the (incarnation, version) of its last announcement taken.
    pub(super) seen: AHashMap<u32, (u64, u64)>,
    /// Per local type, the subscribed sinks (with their filters).
    pub(super) local: AHashMap<TypeId, LocalSubs>,
}

/// One local type's subscribed sinks, with their filters.
pub(super) type LocalSubs = Arc<Vec<(Sink, Option<DeliveryFilter>)>>;

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
    pub(super) view: RwLock<Arc<View>>,
    pub(super) turn: AtomicUsize,
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

    pub(super) fn entry_by_type(&self, ty: TypeId) -> Option<&TypeEntry> {
        self.types
            .binary_search_by_key(&ty, |t| t.type_id)
            .ok()
            .map(|i| &self.types[i])
    }

    pub(super) fn entry_by_event(&self, ty: EventType) -> Option<&TypeEntry> {
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
    pub(super) fn change(&self, ty: TypeId, f: impl FnOnce(&mut Vec<Sub>)) {
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

    pub(super) fn on_connected(&self, peer: u32) {
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

    pub(super) fn on_disconnected(&self, peer: u32, mailbox: Option<Mbox>) {
        // Only a member's session counts: a notice naming any other node changes nothing
        // (nor grows the table of failures).
        if !self.peers.contains(&peer) {
            return;
        }
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
        if closed {
            return;
        }
        let (Some(sys), Some(mailbox)) = (self.sys.upgrade(), mailbox) else {
            return;
        };
        if sys.env.is_shutting_down() {
            return;
        }
        // A new session needs a new subscription; a little later, so that a node whose
        // interconnect is stopping (which answers at once) is not asked in a loop. The
        // timer carries a local-only message (no event from the wire can be one), and
        // the endpoint sends the subscription from its timer thread to the proxy.
        if let Ok(t) = crate::send_delayed(
            &mailbox,
            RESUBSCRIBE_DELAY * (1 << failures),
            Resubscribe { peer },
        ) {
            t.detach();
        }
    }

    /// A scheduled resubscription came: subscribes the endpoint to `peer`'s session
    /// again, unless the mbox is gone or `peer` is not one of its peers.
    pub(super) fn resubscribe(&self, peer: u32) {
        if self.is_closed() || !self.peers.contains(&peer) {
            return;
        }
        let (Some(sys), Some(&me)) = (self.sys.upgrade(), self.me.get()) else {
            return;
        };
        // The proxy of another node is an actor of its own: this queues, never recurses.
        sys.send(EventHandle::new(
            ActorId::interconnect_proxy(peer),
            me,
            Subscribe,
        ));
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

    pub(super) fn on_interest(&self, peer: u32, interest: ClusterInterest) {
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
            if inc == interest.incarnation && interest.version <= ver {
                // Sent before one taken already (two threads' announcements may leave in
                // either order), or the same again (an answer to an ask).
                return;
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

    /// Whether the mbox is gone (its last handle dropped).
    pub(super) fn is_closed(&self) -> bool {
        self.state.lock().closed
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
}
