//! A collecting mbox: gathers `n` messages of one type and sends them as one bundle.
//!
//! 1. The mbox takes immutable messages of its type `M` only; any other type is refused
//!    with [`SendError::Refused`].
//! 2. Every `n` messages it sends one [`Collected<M>`] with them, in arrival order, to the
//!    target mbox (one redirection deeper). Fewer than `n` wait for more.
//! 3. A message whose envelope hides its payload from inspection is not collected.
//! 4. Agents subscribe to the target, not to this mbox: [`SubscribeError::NotSubscribable`](agentbox::SubscribeError::NotSubscribable).
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams};
//! use agentbox_extra::collecting::{self, Collected};
//!
//! Environment::launch(|env| {
//!     let out = env.create_mchain(MChainParams::unbounded());
//!     let batches = collecting::create::<u32>(env, &out.as_mbox(), 3);
//!     for i in 0..7u32 {
//!         send(&batches, i).unwrap();
//!     }
//!     let mut got = Vec::new();
//!     receive(&out, ReceiveParams::new().no_wait(),
//!         &mut Handlers::new().on(|b: &Collected<u32>| got.push(b.iter().copied().collect::<Vec<_>>())));
//!     assert_eq!(got, [vec![0, 1, 2], vec![3, 4, 5]]);
//! }).unwrap();
//! ```

use std::marker::PhantomData;

use parking_lot::Mutex;

use agentbox::{
    Access, DeliveryMode, Environment, Mbox, MboxKind, Message, MessageType, RedirectionDepth,
    SendError,
};

use crate::send_only::{self, Forward};

/// A bundle of `n` messages of type `M`.
pub struct Collected<M> {
    messages: Vec<Message>,
    _type: PhantomData<fn() -> M>,
}

impl<M> std::fmt::Debug for Collected<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collected")
            .field("type", &std::any::type_name::<M>())
            .field("len", &self.messages.len())
            .finish()
    }
}

impl<M: 'static> Collected<M> {
    /// The messages, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.messages.iter().filter_map(|m| m.downcast_ref::<M>())
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the bundle is empty (never, as sent by the mbox).
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// What a collecting mbox keeps: the messages waiting for their bundle.
struct Collector<M> {
    target: Mbox,
    n: usize,
    pending: Mutex<Vec<Message>>,
    _type: PhantomData<fn() -> M>,
}

/// A mbox of `env` that sends every `n` messages of type `M` (at least 1) to `target` as
/// one [`Collected<M>`].
pub fn create<M: Send + Sync + 'static>(env: &Environment, target: &Mbox, n: usize) -> Mbox {
    send_only::create(
        env,
        "collecting",
        Collector::<M> {
            target: target.clone(),
            n: n.max(1),
            pending: Mutex::new(Vec::new()),
            _type: PhantomData,
        },
    )
}

impl<M: Send + Sync + 'static> Forward for Collector<M> {
    fn kind(&self) -> MboxKind {
        MboxKind::MultiConsumer
    }

    fn forward(
        &self,
        name: &str,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        if msg.message_type() != MessageType::of::<M>() {
            return Err(SendError::Refused {
                type_name: msg.message_type().name(),
                mbox: name.to_owned(),
                reason: format!("collects {} only", std::any::type_name::<M>()),
            });
        }
        let Some(payload) = msg.reveal(Access::Inspection) else {
            return Ok(()); // rule 3
        };
        let full = {
            let mut pending = self.pending.lock();
            pending.push(payload.clone());
            if pending.len() >= self.n {
                Some(std::mem::take(&mut *pending))
            } else {
                None
            }
        };
        match full {
            Some(messages) => self.target.deliver_with(
                Message::new(Collected::<M> {
                    messages,
                    _type: PhantomData,
                }),
                depth + 1,
                mode,
            ),
            None => Ok(()),
        }
    }
}
