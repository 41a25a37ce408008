//! An in-flight limit in front of another mbox: at most `n` messages of its type on their
//! way at once.
//!
//! 1. For one message type `M` (other types are refused), it stands in front of a
//!    destination mbox and shares its id and kind (agents may subscribe through either).
//! 2. A message is *in flight* from the send until every receiver has handled or dropped it
//!    (the last copy of it is gone). While `n` are in flight, more sends are dropped.
//! 3. The message travels in an envelope that reveals it always; dropping the envelope
//!    with the last copy frees the slot. A message nobody receives frees it at once.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::mchain::MChainParams;
//! use agentbox_extra::inflight_limit;
//!
//! Environment::launch(|env| {
//!     let chain = env.create_mchain(MChainParams::unbounded());
//!     let limited = inflight_limit::create::<u32>(&chain.as_mbox(), 2);
//!     for i in 0..5u32 {
//!         send(&limited, i).unwrap();
//!     }
//!     assert_eq!(chain.len(), 2); // two in flight (queued in the chain), three dropped
//! }).unwrap();
//! ```

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::{Access, DeliveryMode, Envelope, Mbox, Message, RedirectionDepth, SendError};

use crate::proxy::{ProxyHooks, ProxyMbox};

/// What the in-flight limit adds to the mbox it stands in front of.
pub(crate) struct InflightLimit<M> {
    limit: usize,
    in_flight: Arc<AtomicUsize>,
    _type: PhantomData<fn() -> M>,
}

/// An mbox that lets at most `limit` messages of type `M` be in flight to `dest`.
pub fn create<M: 'static>(dest: &Mbox, limit: usize) -> Mbox {
    ProxyMbox::wrap(
        dest.clone(),
        InflightLimit::<M> {
            limit,
            in_flight: Arc::new(AtomicUsize::new(0)),
            _type: PhantomData,
        },
    )
}

/// Holds one in-flight slot; frees it when the last copy of the message is dropped.
struct Slot(Arc<AtomicUsize>);

impl Envelope for Slot {
    fn reveal(&self, _access: Access) -> bool {
        true
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<M: 'static> ProxyHooks for InflightLimit<M> {
    fn deliver(
        &self,
        dest: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.type_id() != std::any::TypeId::of::<M>() {
            return Err(SendError::Refused {
                type_name: ty.name(),
                mbox: self.name(dest),
                reason: format!("takes {} only", std::any::type_name::<M>()),
            });
        }
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_ok();
        if !taken {
            return Ok(()); // rule 2: over the limit, dropped
        }
        let slot = Slot(self.in_flight.clone());
        dest.deliver_with(Message::enveloped(msg, slot), depth, mode)
    }

    fn name(&self, dest: &Mbox) -> String {
        format!("inflight_limit({})", dest.name())
    }
}
