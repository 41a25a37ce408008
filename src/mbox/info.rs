//! What an mbox shows of its subscriptions to
//! [`Environment::introspect`](crate::Environment::introspect) (re-exported by
//! [`crate::environment`]).

use crate::agent::id::AgentId;

/// One message type of an [`MboxInfo`](crate::environment::MboxInfo) with its subscribers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SubscriptionInfo {
    /// The message type's name ([`std::any::type_name`]).
    pub message_type: &'static str,
    /// Who receives it, highest priority first.
    pub subscribers: Vec<SubscriberInfo>,
}

/// One subscriber of a [`SubscriptionInfo`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SubscriberInfo {
    /// Who it is.
    pub sink: SinkInfo,
    /// Subscribed (false: only a delivery filter is set, nothing is delivered yet).
    pub subscribed: bool,
    /// A delivery filter is set.
    pub filtered: bool,
}

/// What a subscriber of an mbox is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkInfo {
    /// An agent.
    Agent(AgentId),
    /// Another mbox, through a binding ([`crate::mbox::SingleSinkBinding`] and the like),
    /// by its name ([`Mbox::name`](crate::Mbox::name)).
    Mbox(String),
    /// A sink of the user's own ([`Sink::custom`](crate::Sink::custom)).
    Custom,
}
