//! The unique-subscribers mbox: any agent may subscribe, but only one per message type.

use std::any::TypeId;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{DeliveryMode, MboxId, Sink, SubscribeError};
use crate::drops::{DropCounters, DropReason};
use crate::environment::handle::WeakEnv;
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::small_map::SmallMap;
use crate::trace::{self, Trace, TraceEvent, TraceRecord};

pub(crate) struct UniqueMbox {
    pub(crate) id: MboxId,
    pub(crate) env: WeakEnv,
    trace: Trace,
    pub(crate) drops: Arc<DropCounters>,
    table: RwLock<SmallMap<TypeId, Sink>>,
}

impl UniqueMbox {
    pub(crate) fn new(env: WeakEnv, trace: Trace, drops: Arc<DropCounters>) -> Self {
        UniqueMbox {
            id: MboxId::next(),
            env,
            trace,
            drops,
            table: RwLock::new(SmallMap::default()),
        }
    }

    pub(crate) fn deliver(&self, msg: Message, depth: RedirectionDepth, mode: DeliveryMode) {
        let ty = msg.type_id();
        // The sink is taken out of the table first: a push runs user code (a limit's
        // transform, a redirect, a custom sink, a chain that waits for room) that must
        // not run under the table's lock.
        let sink = self.table.read_recursive().get(&ty).cloned();
        match sink {
            Some(sink) => sink.push_message(self.id, msg, depth, mode),
            None => {
                self.drops.count(DropReason::NoSubscribers);
                trace::emit(&self.trace, || {
                    TraceRecord::new(TraceEvent::NoSubscribers)
                        .mbox(self.id)
                        .msg(msg.message_type())
                });
            }
        }
    }

    /// The subscriber of `ty`, if any.
    pub(crate) fn receiver(&self, ty: TypeId) -> Option<Sink> {
        self.table.read().get(&ty).cloned()
    }

    pub(crate) fn subscribe(&self, ty: MessageType, agent: &Sink) -> Result<(), SubscribeError> {
        let mut table = self.table.write();
        match table.get(&ty.type_id()) {
            Some(owner) if owner != agent => Err(SubscribeError::SubscriberTaken {
                type_name: ty.name(),
                mbox: format!("unique:{}", self.id.0),
            }),
            Some(_) => Ok(()),
            None => {
                table.insert(ty.type_id(), agent.clone());
                Ok(())
            }
        }
    }

    pub(crate) fn unsubscribe(&self, ty: MessageType, agent: &Sink) {
        let mut table = self.table.write();
        if table.get(&ty.type_id()) == Some(agent) {
            table.remove(&ty.type_id());
        }
    }
}
