//! Counts of messages dropped after `send` accepted them, kept whether or not a tracer is
//! installed: the run-time stats report them, so that a `send` returning `Ok` while a
//! filter, a limit or a redirect loop drops everything is visible in monitoring.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why an accepted message reached no handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    NoSubscribers,
    Filtered,
    OverLimit,
    NoHandler,
    AtDeregistration,
    RedirectionDepth,
    Refused,
    ReceiverFinished,
}

impl DropReason {
    /// The reason for a redirected message the target mbox refused.
    pub(crate) fn for_redirect(e: &crate::mbox::SendError) -> DropReason {
        match e {
            crate::mbox::SendError::RedirectionDepthExceeded { .. } => DropReason::RedirectionDepth,
            _ => DropReason::Refused,
        }
    }
}

/// One relaxed counter per reason, shared by an environment's mboxes and agents. Only
/// drop paths touch it.
#[derive(Default)]
pub(crate) struct DropCounters([AtomicU64; 8]);

impl DropCounters {
    #[cold]
    pub(crate) fn count(&self, reason: DropReason) {
        self.0[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> DropCounts {
        let get = |r: DropReason| self.0[r as usize].load(Ordering::Relaxed);
        DropCounts {
            no_subscribers: get(DropReason::NoSubscribers),
            filtered: get(DropReason::Filtered),
            over_limit: get(DropReason::OverLimit),
            no_handler: get(DropReason::NoHandler),
            at_deregistration: get(DropReason::AtDeregistration),
            redirection_depth: get(DropReason::RedirectionDepth),
            refused: get(DropReason::Refused),
            receiver_finished: get(DropReason::ReceiverFinished),
        }
    }
}

/// How many accepted messages an environment dropped so far, by reason
/// ([`Environment::drop_counts`](crate::Environment::drop_counts); also sent by the stats
/// controller as `drops/<reason>.count` quantities).
///
/// A message sent to an MPMC mbox counts once per subscriber that drops it.
///
/// Every message an mbox accepts for an agent is either handled or counted here under
/// exactly one reason, whatever the agent's coop does meanwhile (deregistration included):
/// for messages sent to agents' direct mboxes, the number of `send`s that returned `Ok` is
/// the number of messages handled plus [`total`](Self::total) (once the receivers' workers
/// have run or dropped what was queued for them).
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// Environment::launch(|env| {
///     send(&env.create_mbox(), 1u8).unwrap(); // nobody listens
///     assert_eq!(env.drop_counts().no_subscribers, 1);
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropCounts {
    /// Sent to an mbox with no subscriber for the type (or to a direct mbox not subscribed
    /// to it).
    pub no_subscribers: u64,
    /// Refused by a delivery filter (one that panicked included).
    pub filtered: u64,
    /// Over a message limit whose reaction is to drop.
    pub over_limit: u64,
    /// Queued, but the agent had no handler for it in its state when it came up.
    pub no_handler: u64,
    /// Queued for an agent whose coop was deregistered before it came up.
    pub at_deregistration: u64,
    /// Redirected (by a message limit's redirect or transform, or by a binding to another
    /// mbox) past [`MAX_REDIRECTION_DEPTH`](crate::MAX_REDIRECTION_DEPTH): a redirect loop.
    pub redirection_depth: u64,
    /// Redirected (as above) to an mbox that refused it: a full chain whose overflow
    /// reaction is an error, a closed chain, a mutable message for a multi-consumer mbox.
    pub refused: u64,
    /// Accepted for an agent that had finished (its `on_finish` ran) by the time the
    /// message reached it: found so by the send itself, by the agent's worker (the message
    /// was queued behind the agent's last demand), or by a worker that stopped with the
    /// message still queued; or queued for an agent whose registration then failed. (One
    /// its worker reaches before the agent's `on_finish`, while the coop deregisters,
    /// counts as [`at_deregistration`](Self::at_deregistration).)
    pub receiver_finished: u64,
}

impl DropCounts {
    /// The sum over every reason.
    pub fn total(&self) -> u64 {
        self.no_subscribers
            + self.filtered
            + self.over_limit
            + self.no_handler
            + self.at_deregistration
            + self.redirection_depth
            + self.refused
            + self.receiver_finished
    }
}
