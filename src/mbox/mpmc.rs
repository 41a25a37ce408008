//! The multi-producer, multi-consumer mbox: per message type, a list of subscribers.

use std::any::TypeId;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use super::seam::{AgentRef, AgentSide, Agents};
use super::sink::SinkRepr;
use super::{DeliveryFilter, DeliveryMode, MboxId, SendError, Sink, SubscribeError};
use crate::drops::{DropCounters, DropReason};
use crate::environment::handle::WeakEnv;
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::small_map::SmallMap;
use crate::trace::{self, Trace, TraceEvent, TraceRecord};

/// One sink's entry for one message type. An entry may carry only a filter
/// (`subscribed == false`): such a sink gets nothing until it subscribes.
#[derive(Clone)]
struct Subscriber {
    sink: Sink,
    filter: Option<DeliveryFilter>,
    subscribed: bool,
}

pub(crate) struct MpmcMbox {
    pub(crate) id: MboxId,
    pub(crate) env: WeakEnv,
    trace: Trace,
    pub(crate) drops: Arc<DropCounters>,
    name: Option<(String, Weak<dyn NameRegistry>)>,
    /// Subscribers per type, highest priority first, then in subscription order.
    ///
    /// Copy on write: no user code (a filter, a custom sink, a limit's transformation, a
    /// tracer) runs under the table's lock, so that it may subscribe to this very mbox; a
    /// send that reaches such a subscriber takes a reference to its type's list and
    /// releases the lock (see `deliver`). A change edits the list in place when no send
    /// holds it (`Arc::make_mut`), and copies it otherwise.
    table: RwLock<SmallMap<TypeId, SubscriberList>>,
    /// The names of the message types subscribed to or filtered here (feature `monitor`:
    /// the page lists them). Written at a subscription or a filter, never by a send.
    #[cfg(feature = "monitor")]
    type_names: parking_lot::Mutex<Vec<(TypeId, &'static str)>>,
}

type SubscriberList = Arc<Vec<Subscriber>>;

impl Subscriber {
    /// The agent, when giving it a message runs no user code: no filter, no message
    /// limits, no tracing.
    #[inline]
    fn plain_agent(&self) -> Option<&AgentRef> {
        match &self.sink.0 {
            SinkRepr::Agent(a) if self.filter.is_none() && Agents::is_plain(a) => Some(a),
            _ => None,
        }
    }
}

impl MpmcMbox {
    pub(crate) fn new(
        env: WeakEnv,
        trace: Trace,
        drops: Arc<DropCounters>,
        name: Option<(String, Weak<dyn NameRegistry>)>,
    ) -> Self {
        MpmcMbox {
            id: MboxId::next(),
            env,
            trace,
            drops,
            name,
            table: RwLock::new(SmallMap::default()),
            #[cfg(feature = "monitor")]
            type_names: Default::default(),
        }
    }

    /// Keeps `ty`'s name for [`snapshot`](Self::snapshot) (feature `monitor`).
    fn note_type(&self, ty: MessageType) {
        #[cfg(feature = "monitor")]
        {
            let mut names = self.type_names.lock();
            if !names.iter().any(|(id, _)| *id == ty.type_id()) {
                names.push((ty.type_id(), ty.name()));
            }
        }
        #[cfg(not(feature = "monitor"))]
        let _ = ty;
    }

    /// Who receives what here now: each message type with its subscribers (feature
    /// `monitor`; read under the table's read lock, the sinks described after it).
    #[cfg(feature = "monitor")]
    pub(crate) fn snapshot(&self) -> Vec<super::info::SubscriptionInfo> {
        use super::info::{SinkInfo, SubscriberInfo, SubscriptionInfo};
        let lists: Vec<(TypeId, SubscriberList)> = self
            .table
            .read()
            .iter()
            .map(|(id, list)| (*id, list.clone()))
            .collect();
        let names = self.type_names.lock().clone();
        lists
            .into_iter()
            .map(|(id, list)| SubscriptionInfo {
                message_type: names
                    .iter()
                    .find(|(t, _)| *t == id)
                    .map_or("?", |(_, n)| *n),
                subscribers: list
                    .iter()
                    .map(|s| SubscriberInfo {
                        sink: match &s.sink.0 {
                            SinkRepr::Agent(a) => SinkInfo::Agent(Agents::id(a)),
                            SinkRepr::Mbox(m) => SinkInfo::Mbox(m.name()),
                            SinkRepr::Custom(_) => SinkInfo::Custom,
                        },
                        subscribed: s.subscribed,
                        filtered: s.filter.is_some(),
                    })
                    .collect(),
            })
            .collect()
    }

    pub(crate) fn name(&self) -> String {
        match &self.name {
            Some((n, _)) => n.clone(),
            None => format!("mpmc:{}", self.id.0),
        }
    }

    pub(crate) fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        self.deliver_counting(msg, depth, mode, true)
    }

    /// [`deliver`](Self::deliver); a message nobody listens to is counted as a
    /// `no_subscribers` drop only if `count_unheard` (a notice whose subject was counted
    /// under its own reason is not counted again: `Mbox::publish_notice`).
    #[inline]
    pub(crate) fn deliver_counting(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
        count_unheard: bool,
    ) -> Result<(), SendError> {
        // Refused before anything else: a state action named for `Mutable<M>`
        // (`just_switch_to::<Mutable<M>>`) can subscribe that type here without its
        // flavour being known, so a list existing proves nothing.
        self.check_immutable(&msg)?;
        // Recursive read: a push may come back into this mbox on this thread (a message
        // limit's redirection); a plain read could wait behind a waiting writer.
        let table = self.table.read_recursive();
        let Some(list) = table.get(&msg.type_id()) else {
            drop(table);
            if count_unheard {
                self.no_subscribers(&msg);
            }
            return Ok(());
        };
        // Plain agents are given the message under the lock: that runs no user code and
        // costs no more than the lock. At the first other subscriber (a filter, a sink
        // that is not an agent, an agent with message limits, tracing on) the rest of the
        // list goes on from a snapshot, with the lock released.
        let mut subscribers = 0usize;
        let mut rest = None;
        for (i, s) in list.iter().enumerate() {
            if !s.subscribed {
                continue;
            }
            match s.plain_agent() {
                Some(agent) => {
                    subscribers += 1;
                    Agents::push_plain(agent, self.id, msg.clone());
                }
                None => {
                    rest = Some((list.clone(), i));
                    break;
                }
            }
        }
        drop(table);
        if let Some((list, from)) = rest {
            for s in list[from..].iter().filter(|s| s.subscribed) {
                subscribers += 1;
                if s.filter.as_ref().is_none_or(|f| f.accepts(&msg)) {
                    s.sink.push_message(self.id, msg.clone(), depth, mode);
                } else {
                    s.sink.trace_filtered(self.id, &msg);
                }
            }
        }
        if subscribers == 0 && count_unheard {
            // Only filters without subscriptions for this type: nobody listens.
            self.no_subscribers(&msg);
        }
        Ok(())
    }

    #[cold]
    fn no_subscribers(&self, msg: &Message) {
        self.drops.count(DropReason::NoSubscribers);
        trace::emit(&self.trace, || {
            TraceRecord::new(TraceEvent::NoSubscribers)
                .mbox(self.id)
                .msg(msg.message_type())
        });
    }

    /// Whether `ty` has subscribers here and every one is `blocked` (see
    /// `Mbox::only_blocked_receivers`).
    pub(crate) fn all_receivers_blocked(
        &self,
        ty: TypeId,
        blocked: impl Fn(&Sink) -> bool,
    ) -> bool {
        let list = self.table.read().get(&ty).cloned();
        let mut receivers = list.iter().flat_map(|l| l.iter()).filter(|s| s.subscribed);
        let mut any = false;
        receivers.all(|s| {
            any = true;
            blocked(&s.sink)
        }) && any
    }

    /// Mutable messages cannot enter a multi-consumer mbox.
    fn check_immutable(&self, msg: &Message) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.is_mutable() {
            return Err(SendError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: self.name(),
            });
        }
        Ok(())
    }

    fn entry<'t>(
        table: &'t mut SmallMap<TypeId, SubscriberList>,
        ty: MessageType,
        sink: &Sink,
    ) -> &'t mut Subscriber {
        let list = Arc::make_mut(table.entry_or_insert_with(ty.type_id(), Default::default));
        let pos = match list.iter().position(|s| s.sink == *sink) {
            Some(pos) => pos,
            None => {
                // Stable priority order: after every subscriber of equal or higher priority.
                let prio = sink.priority();
                let at = list
                    .iter()
                    .position(|s| s.sink.priority() < prio)
                    .unwrap_or(list.len());
                list.insert(
                    at,
                    Subscriber {
                        sink: sink.clone(),
                        filter: None,
                        subscribed: false,
                    },
                );
                at
            }
        };
        &mut list[pos]
    }

    /// Removes the entries with neither a subscription nor a filter; gives them back, to
    /// be dropped after the lock (a filter's captures are user code).
    fn cleanup(table: &mut SmallMap<TypeId, SubscriberList>, ty: MessageType) -> Garbage {
        let mut gone = Garbage::default();
        if let Some(list) = table.get_mut(&ty.type_id()) {
            if list.iter().all(|s| s.subscribed || s.filter.is_some()) {
                return gone;
            }
            let all = std::mem::take(Arc::make_mut(list));
            let (keep, removed): (Vec<_>, Vec<_>) = all
                .into_iter()
                .partition(|s| s.subscribed || s.filter.is_some());
            *Arc::make_mut(list) = keep;
            gone.entries = removed;
            if list.is_empty() {
                gone.list = table.remove(&ty.type_id());
            }
        }
        gone
    }

    pub(crate) fn subscribe(&self, ty: MessageType, sink: &Sink) -> Result<(), SubscribeError> {
        if ty.is_mutable() {
            return Err(SubscribeError::MutableFromMultiConsumer {
                type_name: ty.name(),
                mbox: self.name(),
            });
        }
        self.note_type(ty);
        Self::entry(&mut self.table.write(), ty, sink).subscribed = true;
        Ok(())
    }

    pub(crate) fn unsubscribe(&self, ty: MessageType, sink: &Sink) {
        let mut table = self.table.write();
        if let Some(list) = table.get_mut(&ty.type_id()) {
            if let Some(i) = list.iter().position(|s| s.sink == *sink) {
                Arc::make_mut(list)[i].subscribed = false;
            }
        }
        let gone = Self::cleanup(&mut table, ty);
        drop(table);
        drop(gone);
    }

    pub(crate) fn set_filter(&self, ty: MessageType, filter: Option<DeliveryFilter>, sink: &Sink) {
        if filter.is_some() {
            self.note_type(ty);
        }
        let mut table = self.table.write();
        let (old, gone) = match filter {
            Some(f) => (
                Self::entry(&mut table, ty, sink).filter.replace(f),
                Garbage::default(),
            ),
            None => {
                let mut old = None;
                if let Some(list) = table.get_mut(&ty.type_id()) {
                    if let Some(i) = list.iter().position(|s| s.sink == *sink) {
                        old = Arc::make_mut(list)[i].filter.take();
                    }
                }
                (old, Self::cleanup(&mut table, ty))
            }
        };
        // A replaced filter (and what it captured) goes after the lock.
        drop(table);
        drop((old, gone));
    }
}

/// What a change took out of the table, dropped once its lock is released.
#[derive(Default)]
struct Garbage {
    entries: Vec<Subscriber>,
    list: Option<SubscriberList>,
}

/// Where a named MPMC mbox's name is registered (the environment's named mboxes,
/// `named.rs`): told when the mbox dies.
pub(crate) trait NameRegistry: Send + Sync {
    /// The mbox named `name` is gone.
    fn forget(&self, name: &str);
}

impl Drop for MpmcMbox {
    fn drop(&mut self) {
        if let Some((name, registry)) = &self.name {
            if let Some(registry) = registry.upgrade() {
                registry.forget(name);
            }
        }
    }
}

pub(crate) fn create(env: WeakEnv, trace: Trace, drops: Arc<DropCounters>) -> Arc<MpmcMbox> {
    Arc::new(MpmcMbox::new(env, trace, drops, None))
}
