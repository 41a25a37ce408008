//! The cluster mbox's two mboxes: the handle agents subscribe to and send to, and the
//! endpoint in the actor table that takes the peers' data, announcements and session
//! notices.

use std::sync::OnceLock;
use std::sync::{Arc, Weak};

use super::core::{Core, Local, Resubscribe, Sub};
use super::wire::{ClusterInterest, EV_CLUSTER_INTEREST};
use crate::actors::{DeadLetterReason, Delivery, EV_NODE_CONNECTED, EV_NODE_DISCONNECTED};
use crate::interconnect::{NodeConnected, NodeDisconnected};
use crate::mbox::{
    DeliveryFilter, DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind, SendError, Sink, SubscribeError,
};
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::Environment;

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
    /// This endpoint as an mbox (the target of the scheduled resubscriptions, a local-only
    /// [`Resubscribe`] message), set once registered.
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
        // A timer's message travels in its envelope (revealed unless cancelled).
        if let Some(r) = msg.handler_payload::<Resubscribe>() {
            // This node's own timer (nothing from the wire is a `Resubscribe`).
            if let Some(core) = self.core.upgrade() {
                core.resubscribe(r.peer);
            }
            return Ok(());
        }
        let Some((mut h, counted)) = Delivery::take_for_endpoint(&msg) else {
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
