//! Dead letters (beyond YDB, after hollywood's): every event that is dropped is published
//! on the system's dead-letters mbox and counted.

use std::sync::atomic::{AtomicU64, Ordering};

use super::event::EventType;
use super::id::ActorId;
use super::system_events::UndeliveredReason;

/// Why an event was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// No actor or service has the recipient id (never had, or has passed away since).
    ActorUnknown,
    /// The event was queued for its recipient when the recipient passed away.
    PassedAway,
    /// The recipient is on another node that could not be reached: no interconnect serves
    /// that node, or the session to it ended before the event was delivered.
    Disconnected,
    /// The recipient is on another node and the event's type has no codec registered with
    /// the interconnect, so it cannot leave this node.
    NotSerializable,
    /// The recipient is on another node and the session to it already held as many
    /// events or bytes as it may queue (the peer is slow or does not confirm): the event
    /// was not queued. An `Undelivered` for it says `Disconnected`, as YDB's for a session
    /// ended by an overloaded queue.
    Overloaded,
    /// The recipient's state function gave the event back ([`Handled::No`](super::Handled)).
    Unhandled,
    /// The event was queued when the system or its environment stopped.
    Shutdown,
}

impl DeadLetterReason {
    /// The reason an [`Undelivered`](super::Undelivered) for this loss carries: `Disconnected`
    /// for a remote loss, `Unknown` for an event that cannot be serialized, `ActorUnknown` for
    /// every local one (as YDB reports them).
    pub const fn undelivered_reason(self) -> UndeliveredReason {
        match self {
            DeadLetterReason::Disconnected | DeadLetterReason::Overloaded => {
                UndeliveredReason::Disconnected
            }
            DeadLetterReason::NotSerializable => UndeliveredReason::Unknown,
            _ => UndeliveredReason::ActorUnknown,
        }
    }
}

/// One dropped event, as published on
/// [`ActorSystem::dead_letters`](super::ActorSystem::dead_letters).
///
/// The event itself is gone (events are `Send` but not `Sync`, so they cannot be shared
/// with every subscriber); its envelope is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeadLetter {
    /// The recipient as addressed (a service id stays a service id).
    pub recipient: ActorId,
    /// The sender.
    pub sender: ActorId,
    /// The event's type.
    pub event_type: EventType,
    /// The event's cookie.
    pub cookie: u64,
    /// Why it was dropped.
    pub reason: DeadLetterReason,
}

/// Counters of what non-delivery did, per system.
#[derive(Default)]
pub(crate) struct DeliveryCounters {
    pub(crate) dead_letters: AtomicU64,
    pub(crate) undelivered: AtomicU64,
    pub(crate) forwarded: AtomicU64,
}

impl DeliveryCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
