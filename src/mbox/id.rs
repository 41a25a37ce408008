//! An mbox's process-wide id and its kind.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The process-wide unique id of an mbox (an agent's direct mbox has its agent's id).
// Ids count up from 1 ([`MboxId::next`]; 0 is the time-limit mbox) and no public API makes
// one from a number: a queued demand relies on every id being below 2^62, keeping the
// words above it for inline messages and control demands (`dispatcher::demand`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct MboxId(pub(crate) u64);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl MboxId {
    /// A fresh id, never returned before in this process. Custom mboxes call this once.
    pub fn next() -> MboxId {
        MboxId(NEXT_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// The raw number.
    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

impl fmt::Display for MboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mbox:{}", self.0)
    }
}

/// Whether many agents or only one may receive from an mbox.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MboxKind {
    /// Multi-producer, multi-consumer: any agent may subscribe; no mutable messages.
    MultiConsumer,
    /// Multi-producer, single-consumer: mutable messages allowed.
    SingleConsumer,
}
