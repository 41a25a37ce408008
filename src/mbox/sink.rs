//! Message sinks: what an mbox delivers to (SObjectizer 5.8's `abstract_message_sink`).
//!
//! An mbox hands each message to the *sinks* subscribed to its type: an agent (the usual
//! case: the message is queued for it), another mbox (the message is redirected one level
//! deeper: mbox → mbox, mbox → mchain, with no agent in between), or a sink of the user's
//! own ([`MessageSink`]). [`SingleSinkBinding`](crate::SingleSinkBinding) and
//! [`MultiSinkBinding`](crate::MultiSinkBinding) subscribe sinks that are not agents.

use std::fmt;
use std::sync::Arc;

use super::seam::{AgentRef, AgentSide, Agents};
use super::{Mbox, MboxId};
use crate::agent::id::Priority;
use crate::message::{Message, RedirectionDepth};

/// Whether a delivery may block the sending thread (SObjectizer 5.8's delivery mode).
///
/// Only a full bounded mchain with a `wait_on_full` timeout ever blocks a sender, and only
/// in [`Ordinary`](Self::Ordinary) mode. Deliveries made by the runtime itself — timers,
/// message-limit redirections and transformations — are
/// [`Nonblocking`](Self::Nonblocking): a full chain then applies its overflow reaction at
/// once. Mboxes pass the mode on to every sink they deliver to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeliveryMode {
    /// A sender's own `send`: may wait for room in a bounded mchain.
    #[default]
    Ordinary,
    /// Must not block: a full chain does not wait.
    Nonblocking,
}

/// A destination of messages that is not an agent or an mbox: implement it to receive
/// what an mbox delivers (through a [`SingleSinkBinding`](crate::SingleSinkBinding) or a
/// [`MultiSinkBinding`](crate::MultiSinkBinding)), on the sender's thread.
///
/// `push` must not block when `mode` is [`DeliveryMode::Nonblocking`]. It runs on the
/// sender's thread; the built-in mboxes hold no lock while they call it, so it may send,
/// and subscribe to (or unsubscribe from) the mbox that calls it (a custom mbox says in
/// its own docs whether it allows that). Its panics are the sender's.
pub trait MessageSink: Send + Sync + 'static {
    /// One message from mbox `from`, redirected `depth` times so far.
    fn push(&self, from: MboxId, msg: Message, depth: RedirectionDepth, mode: DeliveryMode);
}

/// Where an mbox delivers: an agent, another mbox, or a [`MessageSink`]. A cheap handle,
/// compared and hashed by identity (the same agent, the same mbox id, the same sink
/// object).
///
/// Custom mboxes ([`MboxImpl`](crate::MboxImpl)) receive subscribers as sinks and hand
/// them messages with [`push_message`](Self::push_message).
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::{SingleSinkBinding, Sink};
/// use agentbox::mchain::MChainParams;
///
/// Environment::launch(|env| {
///     // Every u32 sent to `feed` lands in the chain, with no agent in between.
///     let feed = env.create_mbox();
///     let chain = env.create_mchain(MChainParams::unbounded());
///     let mut binding = SingleSinkBinding::new();
///     binding.bind::<u32>(&feed, Sink::from(chain.as_mbox())).unwrap();
///     send(&feed, 7u32).unwrap();
///     assert_eq!(chain.len(), 1);
///     drop(binding); // unbinds
///     send(&feed, 8u32).unwrap();
///     assert_eq!(chain.len(), 1);
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Sink(pub(crate) SinkRepr);

#[derive(Clone)]
pub(crate) enum SinkRepr {
    Agent(AgentRef),
    Mbox(Mbox),
    Custom(Arc<dyn MessageSink>),
}

impl Sink {
    /// A sink of the user's own.
    pub fn custom(sink: Arc<dyn MessageSink>) -> Sink {
        Sink(SinkRepr::Custom(sink))
    }

    /// Delivery order among an mbox's sinks: an agent's priority; other sinks `P0`.
    pub fn priority(&self) -> Priority {
        match &self.0 {
            SinkRepr::Agent(a) => Agents::priority(a),
            _ => Priority::P0,
        }
    }

    /// Hands the sink one message from mbox `from` that has been redirected `depth` times.
    ///
    /// An agent queues it (within its message limits); an mbox gets it one redirection
    /// deeper, so that a loop of bindings ends at
    /// [`MAX_REDIRECTION_DEPTH`](crate::MAX_REDIRECTION_DEPTH) (the message is then
    /// dropped and counted, see [`DropCounts`](crate::DropCounts)); a custom sink gets it
    /// as it is. Never blocks in [`DeliveryMode::Nonblocking`].
    #[inline]
    pub fn push_message(
        &self,
        from: MboxId,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) {
        match &self.0 {
            SinkRepr::Agent(a) => Agents::push_message(a, from, msg, depth),
            SinkRepr::Mbox(m) => redirect(m, msg, depth, mode),
            SinkRepr::Custom(c) => c.push(from, msg, depth, mode),
        }
    }

    /// Traces and counts (for an agent or an mbox; a custom sink is not counted) that a
    /// delivery filter refused the message for this sink.
    pub fn trace_filtered(&self, mbox: MboxId, msg: &Message) {
        match &self.0 {
            SinkRepr::Agent(a) => Agents::trace_filtered(a, mbox, msg),
            SinkRepr::Mbox(m) => {
                if let Some(drops) = m.drop_counters() {
                    drops.count(crate::drops::DropReason::Filtered);
                }
            }
            SinkRepr::Custom(_) => {}
        }
    }
}

#[cold]
fn redirect(to: &Mbox, msg: Message, depth: RedirectionDepth, mode: DeliveryMode) {
    if let Err(e) = to.deliver_with(msg, depth + 1, mode) {
        if let Some(drops) = to.drop_counters() {
            drops.count(e.drop_reason());
        }
    }
}

impl From<Mbox> for Sink {
    /// The mbox as a sink: what it is given is delivered to it one redirection deeper.
    fn from(m: Mbox) -> Self {
        Sink(SinkRepr::Mbox(m))
    }
}

impl PartialEq for Sink {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (SinkRepr::Agent(a), SinkRepr::Agent(b)) => a == b,
            (SinkRepr::Mbox(a), SinkRepr::Mbox(b)) => a == b,
            (SinkRepr::Custom(a), SinkRepr::Custom(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            _ => false,
        }
    }
}
impl Eq for Sink {}

impl std::hash::Hash for Sink {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match &self.0 {
            SinkRepr::Agent(a) => (0u8, Agents::id(a).as_u64()).hash(state),
            SinkRepr::Mbox(m) => (1u8, m.id().as_u64()).hash(state),
            SinkRepr::Custom(c) => (2u8, Arc::as_ptr(c) as *const () as usize).hash(state),
        }
    }
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            SinkRepr::Agent(a) => write!(f, "Sink({a:?})"),
            SinkRepr::Mbox(m) => write!(f, "Sink({m:?})"),
            SinkRepr::Custom(_) => f.write_str("Sink(custom)"),
        }
    }
}
