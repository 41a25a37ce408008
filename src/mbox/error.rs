//! Errors raised by sending to and subscribing through mboxes.

use thiserror::Error;

/// Why an mbox did not accept a message.
///
/// An mbox that accepted a message never reports a later drop (by a filter, a state, a
/// deregistration) through this type: those are observable through tracing and stats.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SendError {
    /// A [`Mutable`](crate::Mutable) message was sent to a multi-consumer mbox.
    #[error("mutable message {type_name} cannot be sent to multi-consumer mbox {mbox}")]
    MutableToMultiConsumer {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
    },
    /// The message went through [`MAX_REDIRECTION_DEPTH`](crate::MAX_REDIRECTION_DEPTH)
    /// redirections (a forwarding loop, most likely) and was dropped.
    #[error("message {type_name} dropped: redirection depth {depth} reached the limit")]
    RedirectionDepthExceeded {
        /// The message type.
        type_name: &'static str,
        /// The depth it arrived with.
        depth: u32,
    },
    /// A bounded mchain is full and its overflow reaction is to refuse.
    #[error("mchain {mbox} is full: message {type_name} refused")]
    ChainFull {
        /// The message type.
        type_name: &'static str,
        /// The chain's name.
        mbox: String,
    },
    /// The mchain is closed.
    #[error("mchain {mbox} is closed: message {type_name} refused")]
    ChainClosed {
        /// The message type.
        type_name: &'static str,
        /// The chain's name.
        mbox: String,
    },
    /// A custom mbox refused the message, for the reason it gives.
    #[error("mbox {mbox} refused message {type_name}: {reason}")]
    Refused {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
        /// The custom mbox's reason.
        reason: String,
    },
    /// The mbox is on another node (a `bridge::RemoteMbox`) and the
    /// message's type is not one it can carry there: not named for it, or without a codec
    /// registered with the interconnect. Nothing was sent.
    #[error("message {type_name} cannot cross to {mbox}: {reason}")]
    NotSerializable {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
        /// What is missing.
        reason: &'static str,
    },
}

/// Why a subscription or a delivery filter could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SubscribeError {
    /// The agent already has a handler for this message type from this mbox in this state.
    #[error("duplicate subscription to {type_name} from mbox {mbox} in state {state}")]
    Duplicate {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
        /// The state's name.
        state: String,
    },
    /// Mutable messages cannot be received from a multi-consumer mbox.
    #[error("mutable message {type_name} cannot be received from multi-consumer mbox {mbox}")]
    MutableFromMultiConsumer {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
    },
    /// Only the owner may subscribe to (or filter) an agent's direct mbox.
    #[error("only its owner may subscribe to direct mbox {mbox}")]
    NotOwner {
        /// The mbox's name.
        mbox: String,
    },
    /// A unique-subscribers mbox already has a subscriber for this type.
    #[error("mbox {mbox} already has a subscriber for {type_name}")]
    SubscriberTaken {
        /// The message type.
        type_name: &'static str,
        /// The mbox's name.
        mbox: String,
    },
    /// This kind of mbox does not support delivery filters.
    #[error("mbox {mbox} does not support delivery filters")]
    FiltersUnsupported {
        /// The mbox's name.
        mbox: String,
    },
    /// A thread-safe handler needs the `Ignore` or `Abort` exception reaction.
    #[error("a thread-safe handler needs the Ignore or Abort exception reaction, not {reaction}")]
    ReactionNotAllowed {
        /// The agent's effective reaction.
        reaction: String,
    },
    /// Subscriptions cannot change from a thread-safe handler.
    #[error("subscriptions cannot change from a thread-safe handler")]
    InThreadSafeHandler,
    /// The agent declared message limits, and none covers this type.
    #[error("the agent declared message limits but none for {type_name}")]
    NoLimit {
        /// The message type.
        type_name: &'static str,
    },
    /// Agents cannot subscribe to this mbox (an mchain, read with `receive`; or an mbox
    /// that only forwards, like a broadcast or composite mbox).
    #[error("agents cannot subscribe to {mbox}")]
    NotSubscribable {
        /// The mbox's name.
        mbox: String,
    },
    /// The agent has finished; it can subscribe to nothing any more.
    #[error("the agent has finished and can no longer subscribe")]
    AgentFinished,
    /// The agent was deactivated ([`Context::deactivate_agent`](crate::Context::deactivate_agent));
    /// it can subscribe to nothing any more.
    #[error("the agent is deactivated and can no longer subscribe")]
    AgentDeactivated,
    /// A custom mbox refused the subscription, for the reason it gives.
    #[error("mbox {mbox} refused the subscription: {reason}")]
    Refused {
        /// The mbox's name.
        mbox: String,
        /// The custom mbox's reason.
        reason: String,
    },
}

impl SendError {
    /// The drop reason for a redirected message the target mbox refused with this error.
    pub(crate) fn drop_reason(&self) -> crate::drops::DropReason {
        match self {
            SendError::RedirectionDepthExceeded { .. } => {
                crate::drops::DropReason::RedirectionDepth
            }
            _ => crate::drops::DropReason::Refused,
        }
    }
}
