//! A broadcast mbox: a fixed list of destination mboxes, each of which gets every message.
//!
//! 1. Every message sent to it is delivered to each destination, in list order, one
//!    redirection deeper.
//! 2. Agents do not subscribe to it (they subscribe to the destinations):
//!    [`SubscribeError::NotSubscribable`](agentbox::SubscribeError::NotSubscribable).
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

use agentbox::{DeliveryMode, Environment, Mbox, MboxKind, Message, RedirectionDepth, SendError};

use crate::send_only::{self, Forward};

/// Where a broadcast mbox sends.
struct Destinations(Vec<Mbox>);

/// A broadcast mbox of `env` over `destinations`.
pub fn create(env: &Environment, destinations: Vec<Mbox>) -> Mbox {
    send_only::create(env, "broadcast", Destinations(destinations))
}

impl Forward for Destinations {
    fn kind(&self) -> MboxKind {
        match self.0.as_slice() {
            [one] => one.kind(),
            _ => MboxKind::MultiConsumer,
        }
    }

    fn forward(
        &self,
        _name: &str,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let mut first_error = None;
        for d in &self.0 {
            if let Err(e) = d.deliver_with(msg.clone(), depth + 1, mode) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
