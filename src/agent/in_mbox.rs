//! An agent as mboxes see it: the mbox layer's seam ([`AgentSide`]) implemented, and an
//! agent as a [`Sink`].
//!
//! Every function here forwards to the agent's core and is inlined. A direct mbox's send
//! compiles to the same code as when the mbox layer called the core itself.

use std::any::TypeId;
use std::sync::Arc;

use super::core::{direct_deliver, AgentArc, AgentRef};
use super::id::{AgentId, Priority};
use crate::drops::DropCounters;
use crate::environment::handle::WeakEnv;
use crate::mbox::seam::{AgentSide, Agents};
use crate::mbox::{DeliveryFilter, MboxId, Sink, SinkRepr};
use crate::message::{Message, MessageType, RedirectionDepth};

impl AgentSide for Agents {
    type Arc = AgentArc;
    type Ref = AgentRef;

    #[inline(always)]
    fn mbox_id(a: &AgentArc) -> MboxId {
        a.mbox_id()
    }
    #[inline(always)]
    fn agent_id(a: &AgentArc) -> AgentId {
        a.id
    }
    #[inline(always)]
    fn environment(a: &AgentArc) -> &WeakEnv {
        &a.env
    }
    #[inline(always)]
    fn drops(a: &AgentArc) -> &Arc<DropCounters> {
        &a.drops
    }
    #[inline(always)]
    fn deliver(a: &AgentArc, msg: Message, depth: RedirectionDepth) {
        direct_deliver(a, msg, depth)
    }
    #[inline(always)]
    fn subscribes_directly(a: &AgentArc, ty: TypeId) -> bool {
        a.subscribes_directly(ty)
    }
    #[inline(always)]
    fn surely_blocked_by_current_thread(a: &AgentArc) -> bool {
        a.surely_blocked_by_current_thread()
    }
    #[inline(always)]
    fn takes_no_messages(a: &AgentArc) -> bool {
        a.takes_no_messages()
    }
    #[inline(always)]
    fn set_subscribed(a: &AgentArc, ty: TypeId, on: bool) {
        a.direct_set_subscribed(ty, on)
    }
    #[inline(always)]
    fn set_filter(a: &AgentArc, ty: MessageType, filter: Option<DeliveryFilter>) {
        a.direct_set_filter(ty, filter)
    }
    #[inline(always)]
    fn is(a: &AgentArc, r: &AgentRef) -> bool {
        AgentArc::ptr_eq(a, &r.0)
    }

    #[inline(always)]
    fn id(r: &AgentRef) -> AgentId {
        r.id()
    }
    #[inline(always)]
    fn priority(r: &AgentRef) -> Priority {
        r.priority()
    }
    #[inline(always)]
    fn push_message(r: &AgentRef, from: MboxId, msg: Message, depth: RedirectionDepth) {
        r.push_message(from, msg, depth)
    }
    #[inline(always)]
    fn is_plain(r: &AgentRef) -> bool {
        r.is_plain()
    }
    #[inline(always)]
    fn push_plain(r: &AgentRef, from: MboxId, msg: Message) {
        r.push_plain(from, msg)
    }
    #[inline]
    fn push_straight(r: &AgentRef, from: MboxId, msg: Message) {
        r.push_straight(from, msg)
    }
    #[inline(always)]
    fn trace_filtered(r: &AgentRef, mbox: MboxId, msg: &Message) {
        r.trace_filtered(mbox, msg)
    }
    #[inline(always)]
    fn ref_blocked_by_current_thread(r: &AgentRef) -> bool {
        r.0.surely_blocked_by_current_thread()
    }
}

impl Sink {
    /// The agent, if this sink is one.
    pub fn as_agent(&self) -> Option<&AgentRef> {
        match &self.0 {
            SinkRepr::Agent(a) => Some(a),
            _ => None,
        }
    }
}

impl From<AgentRef> for Sink {
    fn from(a: AgentRef) -> Self {
        Sink(SinkRepr::Agent(a))
    }
}
