//! What an mbox needs of an agent, as a trait this layer defines and the agent layer
//! implements once, for the marker [`Agents`] (`agent/in_mbox.rs`).
//!
//! An mbox names an agent only as an associated type here ([`AgentArc`], [`AgentRef`]) and reaches it only through [`AgentSide`]. There is one implementation,
//! so the compiler resolves every call statically. A send to a direct mbox is inlined where
//! it is made, as it was when this layer named the agent's core itself (the direct send's
//! own frame cost ~15 instructions per message, callgrind, ping-pong), and a delivery
//! makes no virtual call.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use super::filter::DeliveryFilter;
use super::id::MboxId;
use crate::agent::id::{AgentId, Priority};
use crate::drops::DropCounters;
use crate::environment::handle::WeakEnv;
use crate::message::{Message, MessageType, RedirectionDepth};

/// The marker the agent layer implements [`AgentSide`] for.
pub(crate) struct Agents;

/// An agent, as mboxes and sinks use it.
pub(crate) trait AgentSide {
    /// An agent's block, strong: what its direct mbox holds.
    type Arc: Clone + Send + Sync + 'static;
    /// The public agent handle: what a sink that is an agent holds.
    type Ref: Clone + Send + Sync + PartialEq + fmt::Debug + 'static;

    // The direct mbox: its agent's block.

    /// The direct mbox's id (the agent's id).
    fn mbox_id(a: &Self::Arc) -> MboxId;
    /// The agent's id.
    fn agent_id(a: &Self::Arc) -> AgentId;
    /// The agent's environment.
    fn environment(a: &Self::Arc) -> &WeakEnv;
    /// The environment's drop counters, as the agent holds them.
    fn drops(a: &Self::Arc) -> &Arc<DropCounters>;
    /// Delivers to the direct mbox (checks its subscriptions, filters and limits).
    fn deliver(a: &Self::Arc, msg: Message, depth: RedirectionDepth);
    /// Whether the agent subscribes `ty` on its direct mbox.
    fn subscribes_directly(a: &Self::Arc, ty: TypeId) -> bool;
    /// Whether the agent's demands could run only after the current thread returns from
    /// the demand it is running.
    fn surely_blocked_by_current_thread(a: &Self::Arc) -> bool;
    /// Whether the agent handles no more messages (its coop is going or gone).
    fn takes_no_messages(a: &Self::Arc) -> bool;
    /// Subscribes or unsubscribes `ty` on the direct mbox.
    fn set_subscribed(a: &Self::Arc, ty: TypeId, on: bool);
    /// Sets or drops the direct mbox's filter for `ty`.
    fn set_filter(a: &Self::Arc, ty: MessageType, filter: Option<DeliveryFilter>);
    /// Whether `r` is the agent `a`.
    fn is(a: &Self::Arc, r: &Self::Ref) -> bool;

    // A sink that is an agent.

    /// The agent's id.
    fn id(r: &Self::Ref) -> AgentId;
    /// The agent's priority.
    fn priority(r: &Self::Ref) -> Priority;
    /// Queues a message from mbox `from` (within the agent's message limits).
    fn push_message(r: &Self::Ref, from: MboxId, msg: Message, depth: RedirectionDepth);
    /// Whether giving the agent a message runs no user code (no limits, no tracing).
    fn is_plain(r: &Self::Ref) -> bool;
    /// [`push_message`](Self::push_message) for an agent [`is_plain`](Self::is_plain) said
    /// yes to.
    fn push_plain(r: &Self::Ref, from: MboxId, msg: Message);
    /// Queues a message from the pseudo-mbox `from` straight into the agent's queue: no
    /// subscription check, no limits (a state's time limit, from the timer thread).
    fn push_straight(r: &Self::Ref, from: MboxId, msg: Message);
    /// Counts and traces a message a delivery filter refused for the agent.
    fn trace_filtered(r: &Self::Ref, mbox: MboxId, msg: &Message);
    /// Whether the agent's demands could run only after the current thread returns.
    fn ref_blocked_by_current_thread(r: &Self::Ref) -> bool;
}

/// An agent's block, strong, as mboxes name it.
pub(crate) type AgentArc = <Agents as AgentSide>::Arc;
/// The public agent handle, as mboxes name it.
pub(crate) type AgentRef = <Agents as AgentSide>::Ref;
