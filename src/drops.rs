//! Counts of messages dropped after `send` accepted them, kept whether or not a tracer is
//! installed: the run-time stats report them, so that a `send` returning `Ok` while a
//! filter, a limit or a redirect loop drops everything is visible in monitoring.

use std::sync::atomic::{AtomicU64, Ordering};

use ahash::AHashSet;
use parking_lot::Mutex;

/// Why an accepted message reached no handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DropReason {
    NoSubscribers,
    Filtered,
    OverLimit,
    NoHandler,
    AtDeregistration,
    RedirectionDepth,
    Refused,
    ReceiverFinished,
    Unreachable,
}

/// One relaxed counter per reason, shared by an environment's mboxes and agents. Only
/// drop paths touch it.
#[derive(Default)]
pub(crate) struct DropCounters {
    counts: [AtomicU64; 9],
    /// With [`EnvParams::log_drops`](crate::EnvParams::log_drops): the (reason, agent type,
    /// message type) keys logged already.
    logged: Option<Mutex<AHashSet<DropKey>>>,
}

/// What a drop is logged once per: the reason, the agent's type, the message's type.
type DropKey = (DropReason, &'static str, &'static str);

impl DropCounters {
    /// Counters that also log the first drop of each key when `log` is true.
    pub(crate) fn new(log: bool) -> DropCounters {
        DropCounters {
            counts: Default::default(),
            logged: log.then(Default::default),
        }
    }

    #[cold]
    pub(crate) fn count(&self, reason: DropReason) {
        self.counts[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Logs a drop through `log` (the environment's error logger) if drop logging is on
    /// and this is the first drop of (`reason`, `agent_type`, `msg_type`); `line` says
    /// what happened. Called on drop paths only, after [`count`](Self::count).
    #[cold]
    #[inline(never)]
    pub(crate) fn note(
        &self,
        log: impl FnOnce(&str),
        (reason, agent_type, msg_type): DropKey,
        line: impl FnOnce() -> String,
    ) {
        let Some(logged) = &self.logged else { return };
        if !logged.lock().insert((reason, agent_type, msg_type)) {
            return;
        }
        log(&format!(
            "{} (logged once per agent type and message type for this reason; \
             `EnvParams::log_drops(false)` turns it off)",
            line()
        ));
    }

    pub(crate) fn snapshot(&self) -> DropCounts {
        let get = |r: DropReason| self.counts[r as usize].load(Ordering::Relaxed);
        DropCounts {
            no_subscribers: get(DropReason::NoSubscribers),
            filtered: get(DropReason::Filtered),
            over_limit: get(DropReason::OverLimit),
            no_handler: get(DropReason::NoHandler),
            at_deregistration: get(DropReason::AtDeregistration),
            redirection_depth: get(DropReason::RedirectionDepth),
            refused: get(DropReason::Refused),
            receiver_finished: get(DropReason::ReceiverFinished),
            unreachable: get(DropReason::Unreachable),
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
    /// Events of an actor system for another node that the node could not be reached to
    /// deliver ([`DeadLetterReason::Disconnected`](crate::actors::DeadLetterReason::Disconnected)):
    /// queued or sent (and never confirmed) in an interconnect session that ended (the peer
    /// stayed unreachable for the lost-connection timeout, was found dead, refused us, or
    /// our interconnect stopped), or sent when no session could take them. Each session
    /// that ends so also logs, once, how many of its events it did not deliver (a `tracing`
    /// warning), and the interconnect's `SessionStats::events_not_delivered` says which
    /// peer's.
    ///
    /// Counted whether or not anyone listens on the system's dead-letters mbox (their dead
    /// letters are not counted again as [`no_subscribers`](Self::no_subscribers)); an event
    /// forwarded on non-delivery (`FORWARD_ON_NONDELIVERY`) is not dropped and not counted.
    pub unreachable: u64,
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
            + self.unreachable
    }

    /// Every reason with its count, as `(name, count)` pairs: the names are the fields'
    /// (`"no_subscribers"`, `"filtered"`, …), in the fields' order. A reason added later
    /// shows up here, so a report written over these pairs needs no change for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    /// Environment::launch(|env| {
    ///     send(&env.create_mbox(), 1u8).unwrap(); // nobody listens
    ///     let counts = env.drop_counts();
    ///     assert!(counts.by_reason().any(|(reason, n)| reason == "no_subscribers" && n == 1));
    ///     assert_eq!(counts.by_reason().map(|(_, n)| n).sum::<u64>(), counts.total());
    /// }).unwrap();
    /// ```
    pub fn by_reason(&self) -> impl Iterator<Item = (&'static str, u64)> {
        // Destructured without `..`: a new field does not compile until it is listed here.
        let DropCounts {
            no_subscribers,
            filtered,
            over_limit,
            no_handler,
            at_deregistration,
            redirection_depth,
            refused,
            receiver_finished,
            unreachable,
        } = *self;
        [
            ("no_subscribers", no_subscribers),
            ("filtered", filtered),
            ("over_limit", over_limit),
            ("no_handler", no_handler),
            ("at_deregistration", at_deregistration),
            ("redirection_depth", redirection_depth),
            ("refused", refused),
            ("receiver_finished", receiver_finished),
            ("unreachable", unreachable),
        ]
        .into_iter()
    }
}
