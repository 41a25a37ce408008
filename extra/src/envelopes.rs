//! Messages in envelopes: revocable messages and time-limited delivery.
//!
//! Both are built on the core's [`Envelope`] trait: the envelope is asked each time the
//! runtime wants the payload (a delivery filter inspecting it, a message limit transforming
//! it, a handler about to be called), and when it says no, the message is treated as not
//! there.
//!
//! - [`send_revocable`]: the send returns a [`Revocable`] handle; after
//!   [`Revocable::revoke`] (or dropping the last handle) no receiver handles the message,
//!   even one in whose queue it already waits.
//! - [`send_time_limited`]: the payload is visible only until the deadline; a message still
//!   queued after it is not handled.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams};
//! use agentbox_extra::envelopes::{send_revocable, send_time_limited};
//!
//! Environment::launch(|env| {
//!     let chain = env.create_mchain(MChainParams::unbounded());
//!     let kept = send_revocable(&chain.as_mbox(), 1u32).unwrap();
//!     let revoked = send_revocable(&chain.as_mbox(), 2u32).unwrap();
//!     revoked.revoke();
//!     send_time_limited(&chain.as_mbox(), Duration::ZERO, 3u32).unwrap(); // already stale
//!     let mut got = Vec::new();
//!     let r = receive(&chain, ReceiveParams::new().no_wait(),
//!         &mut Handlers::new().on(|v: &u32| got.push(*v)));
//!     assert_eq!(got, [1]);
//!     assert_eq!(r.extracted, 3);
//!     drop(kept);
//! }).unwrap();
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::{Access, Envelope, Mbox, Message, SendError};

/// The handle of a revocable message; clones share it, dropping the last one revokes.
#[derive(Clone, Debug)]
#[must_use = "dropping the handle revokes the message"]
pub struct Revocable(Arc<RevokeOnDrop>);

#[derive(Debug)]
struct RevokeOnDrop(Arc<AtomicBool>);

impl Drop for RevokeOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Revocable {
    /// Revokes the message for every receiver that has not started handling it.
    pub fn revoke(&self) {
        (self.0).0.store(true, Ordering::Release);
    }

    /// Whether the message has been revoked.
    pub fn is_revoked(&self) -> bool {
        (self.0).0.load(Ordering::Acquire)
    }
}

struct RevocableEnvelope(Arc<AtomicBool>);

impl Envelope for RevocableEnvelope {
    fn reveal(&self, _access: Access) -> bool {
        !self.0.load(Ordering::Acquire)
    }
}

/// Sends immutable `msg` to `to` in a revocable envelope.
///
/// # Errors
///
/// What `to` refuses.
pub fn send_revocable<M: Send + Sync + 'static>(to: &Mbox, msg: M) -> Result<Revocable, SendError> {
    send_revocable_message(to, Message::new(msg))
}

/// Sends an already wrapped message (mutable ones too) in a revocable envelope.
///
/// # Errors
///
/// What `to` refuses.
pub fn send_revocable_message(to: &Mbox, msg: Message) -> Result<Revocable, SendError> {
    let flag = Arc::new(AtomicBool::new(false));
    to.deliver(Message::enveloped(msg, RevocableEnvelope(flag.clone())), 0)?;
    Ok(Revocable(Arc::new(RevokeOnDrop(flag))))
}

/// The deadline; `None` when the ttl is too long for an `Instant` (it never expires).
struct DeadlineEnvelope(Option<Instant>);

impl Envelope for DeadlineEnvelope {
    fn reveal(&self, _access: Access) -> bool {
        self.0.is_none_or(|d| Instant::now() < d)
    }
}

/// Sends immutable `msg` to `to`; its payload is visible only for `ttl` from now. A `ttl`
/// too long for an [`Instant`] (such as `Duration::MAX`) never expires.
///
/// # Errors
///
/// What `to` refuses.
pub fn send_time_limited<M: Send + Sync + 'static>(
    to: &Mbox,
    ttl: Duration,
    msg: M,
) -> Result<(), SendError> {
    send_time_limited_message(to, ttl, Message::new(msg))
}

/// [`send_time_limited`] for an already wrapped message (mutable ones too).
///
/// # Errors
///
/// What `to` refuses.
pub fn send_time_limited_message(to: &Mbox, ttl: Duration, msg: Message) -> Result<(), SendError> {
    to.deliver(
        Message::enveloped(msg, DeadlineEnvelope(Instant::now().checked_add(ttl))),
        0,
    )
}
