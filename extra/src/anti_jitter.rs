//! An anti-jitter mbox: protects an agent from messages that come too often.
//!
//! The mbox worked out in the SObjectizer article on custom mboxes: it wraps the direct
//! mbox of one agent and
//!
//! 1. passes on a message of a type the agent subscribed to (through this mbox) only if at
//!    least `threshold` has passed since the previous *delivered* message of that type;
//!    a message that comes sooner is dropped;
//! 2. ignores messages of types the agent did not subscribe to;
//! 3. has the direct mbox's id and kind (single-consumer: mutable messages allowed), and
//!    only that agent may subscribe;
//! 4. refuses delivery filters with [`SubscribeError::FiltersUnsupported`].
//!
//! `examples/anti_jitter.rs` runs the article's scenario.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox_extra::anti_jitter;
//!
//! struct Signal;
//! struct Calm { input: Option<Mbox>, seen: u32 }
//! impl Agent for Calm {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         let input = anti_jitter::create(ctx.direct_mbox(), Duration::from_secs(60));
//!         ctx.subscribe(&input).event(|a: &mut Self, _, _: &Signal| a.seen += 1)?;
//!         self.input = Some(input);
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         let input = self.input.clone().unwrap();
//!         for _ in 0..5 {
//!             send(&input, Signal).unwrap(); // only the first gets through
//!         }
//!         ctx.deregister_coop(DeregReason::Normal);
//!     }
//!     fn on_finish(&mut self, _: &mut Context<Self>) {
//!         assert!(self.seen <= 1);
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Calm { input: None, seen: 0 }); }).unwrap();
//! }).unwrap();
//! ```

use std::any::TypeId;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use agentbox::{
    DeliveryFilter, DeliveryMode, Mbox, Message, MessageType, RedirectionDepth, SendError, Sink,
    SubscribeError,
};

use crate::proxy::{ProxyHooks, ProxyMbox};

/// What the anti-jitter mbox adds to the direct mbox it wraps.
pub(crate) struct AntiJitter {
    threshold: Duration,
    /// Subscribed types, with the time of the last delivered message.
    types: Mutex<HashMap<TypeId, Option<Instant>>>,
}

/// An anti-jitter mbox in front of an agent's `direct` mbox.
pub fn create(direct: Mbox, threshold: Duration) -> Mbox {
    ProxyMbox::wrap(
        direct,
        AntiJitter {
            threshold,
            types: Mutex::new(HashMap::new()),
        },
    )
}

impl ProxyHooks for AntiJitter {
    fn subscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        inner.raw().subscribe(ty, who)?;
        self.types.lock().entry(ty.type_id()).or_insert(None);
        Ok(())
    }

    fn unsubscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        inner.raw().unsubscribe(ty, who);
        self.types.lock().remove(&ty.type_id());
    }

    fn deliver(
        &self,
        inner: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        {
            let mut types = self.types.lock();
            let Some(last) = types.get_mut(&msg.type_id()) else {
                return Ok(()); // rule 2
            };
            let now = Instant::now();
            if last.is_some_and(|t| now.duration_since(t) < self.threshold) {
                return Ok(()); // rule 1: too soon
            }
            *last = Some(now);
        }
        inner.deliver_with(msg, depth, mode)
    }

    fn set_delivery_filter(
        &self,
        inner: &Mbox,
        _ty: MessageType,
        _filter: DeliveryFilter,
        _who: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported {
            mbox: self.name(inner),
        })
    }

    fn drop_delivery_filter(&self, _inner: &Mbox, _ty: MessageType, _who: &Sink) {}

    fn name(&self, inner: &Mbox) -> String {
        format!("anti_jitter({})", inner.name())
    }
}
