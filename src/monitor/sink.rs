//! The dead letters of an attached system, as the page shows them: counts by reason and
//! the last few, kept by a sink bound to the system's dead-letters mbox.

use std::collections::{BTreeMap, VecDeque};

use parking_lot::Mutex;
use serde::Serialize;

use crate::actors::DeadLetter;
use crate::mbox::{DeliveryMode, MessageSink};
use crate::message::{Message, RedirectionDepth};
use crate::MboxId;

/// How many dead letters the page keeps per system.
pub(crate) const RECENT: usize = 10;

/// One dead letter as the page shows it (`recent_dead_letters` of `GET /api/systems`).
#[derive(Serialize)]
pub(crate) struct DeadLetterView {
    pub(crate) recipient: String,
    pub(crate) sender: String,
    pub(crate) event_type: u32,
    pub(crate) cookie: u64,
    pub(crate) reason: String,
}

#[derive(Default)]
struct Log {
    by_reason: BTreeMap<String, u64>,
    recent: VecDeque<DeadLetter>,
}

/// Counts and keeps what the system's dead-letters mbox publishes (on the sender's thread:
/// a short lock, no allocation past the first letters of each reason).
#[derive(Default)]
pub(crate) struct DeadLetterLog(Mutex<Log>);

impl DeadLetterLog {
    /// The counts by reason and the recent letters, oldest first.
    pub(crate) fn snapshot(&self) -> (BTreeMap<String, u64>, Vec<DeadLetterView>) {
        let log = self.0.lock();
        let recent = log
            .recent
            .iter()
            .map(|d| DeadLetterView {
                recipient: d.recipient.to_string(),
                sender: d.sender.to_string(),
                event_type: d.event_type,
                cookie: d.cookie,
                reason: format!("{:?}", d.reason),
            })
            .collect();
        (log.by_reason.clone(), recent)
    }
}

impl MessageSink for DeadLetterLog {
    fn push(&self, _from: MboxId, msg: Message, _depth: RedirectionDepth, _mode: DeliveryMode) {
        let Some(letter) = msg.downcast_ref::<DeadLetter>() else {
            return;
        };
        let reason = format!("{:?}", letter.reason);
        let mut log = self.0.lock();
        *log.by_reason.entry(reason).or_default() += 1;
        if log.recent.len() == RECENT {
            log.recent.pop_front();
        }
        log.recent.push_back(*letter);
    }
}
