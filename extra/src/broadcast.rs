//! A broadcast mbox: a fixed list of destination mboxes, each of which gets every message.
//!
//! 1. Every message sent to it is delivered to each destination, in list order, one
//!    redirection deeper.
//! 2. Agents do not subscribe to it (they subscribe to the destinations):
//!    [`SubscribeError::NotSubscribable`].
//! 3. It is multi-consumer unless it has exactly one destination and that one is
//!    single-consumer (a mutable message cannot be shared).
//! 4. A destination that refuses a message does not stop the others; the first refusal is
//!    returned.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::mchain::MChainParams;
//! use agentbox_extra::broadcast;
//!
//! Environment::launch(|env| {
//!     let a = env.create_mchain(MChainParams::unbounded());
//!     let b = env.create_mchain(MChainParams::unbounded());
//!     let both = broadcast::create(env, vec![a.as_mbox(), b.as_mbox()]);
//!     send(&both, 7u32).unwrap();
//!     assert_eq!((a.len(), b.len()), (1, 1));
//! }).unwrap();
//! ```

use std::sync::Arc;

use agentbox::{
    AgentRef, DeliveryFilter, Environment, Mbox, MboxId, MboxImpl, MboxKind, Message, MessageType,
    RedirectionDepth, SendError, SubscribeError, WeakEnv,
};

/// The broadcast mbox.
pub struct BroadcastMbox {
    id: MboxId,
    env: WeakEnv,
    destinations: Vec<Mbox>,
}

/// A broadcast mbox of `env` over `destinations`.
pub fn create(env: &Environment, destinations: Vec<Mbox>) -> Mbox {
    Mbox::custom(Arc::new(BroadcastMbox {
        id: MboxId::next(),
        env: env.downgrade(),
        destinations,
    }))
}

impl MboxImpl for BroadcastMbox {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        match self.destinations.as_slice() {
            [one] => one.kind(),
            _ => MboxKind::MultiConsumer,
        }
    }

    fn subscribe(&self, _ty: MessageType, _who: &AgentRef) -> Result<(), SubscribeError> {
        Err(SubscribeError::NotSubscribable { mbox: self.name() })
    }

    fn unsubscribe(&self, _ty: MessageType, _who: &AgentRef) {}

    fn deliver(&self, msg: Message, depth: RedirectionDepth) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.is_mutable() && self.kind() == MboxKind::MultiConsumer {
            return Err(SendError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: self.name(),
            });
        }
        let mut first_error = None;
        for d in &self.destinations {
            if let Err(e) = d.deliver(msg.clone(), depth + 1) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn set_delivery_filter(
        &self,
        _ty: MessageType,
        _filter: DeliveryFilter,
        _who: &AgentRef,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::NotSubscribable { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _ty: MessageType, _who: &AgentRef) {}

    fn name(&self) -> String {
        format!("broadcast:{}", self.id.as_u64())
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}
