//! What every thread of a node reads, sessions included: its id, actor system, codecs,
//! settings, clock, stop flag and session ids ([`NodeBase`]). The node
//! (`node::NodeShared`) holds it and derefs to it; the sessions take
//! the node through `session::Host`, whose target this is, so that they name nothing
//! above them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::codec::Codecs;
use super::setup::Config;
use crate::actors::{ActorId, ActorSystem, EventType};

/// How many event types without a codec a node logs (the first event of each); events of
/// later types are only counted (`SessionStats::events_without_codec`), so that a peer
/// sending ever new types cannot grow the set, or the log, for the life of the process.
pub(crate) const MISSING_CODECS_LOGGED: usize = 256;

/// What every thread of a node reads (see the module docs).
pub(crate) struct NodeBase {
    pub(crate) node_id: u32,
    pub(crate) system: ActorSystem,
    pub(crate) codecs: Codecs,
    pub(crate) cfg: Config,
    pub(crate) epoch: Instant,
    pub(crate) stopping: AtomicBool,
    pub(crate) next_session: AtomicU64,
    /// The event types received without a codec and logged once already (at most
    /// [`MISSING_CODECS_LOGGED`]).
    pub(crate) missing_codecs: Mutex<ahash::AHashSet<EventType>>,
}

impl NodeBase {
    /// An event of `event_type` arrived and this node has no codec for it: whether it is
    /// the first of its type (then the caller reports it with
    /// [`log_missing_codec`](Self::log_missing_codec), outside its locks; the count is the
    /// session's). Only the first [`MISSING_CODECS_LOGGED`] types are kept and logged, the
    /// last of them with a note that no more will be.
    #[cold]
    #[inline(never)]
    pub(crate) fn first_missing_codec(&self, event_type: EventType) -> bool {
        let mut seen = self.missing_codecs.lock();
        if seen.len() >= MISSING_CODECS_LOGGED {
            return false;
        }
        seen.insert(event_type)
    }

    /// Logs an event type with no codec, through the environment's error logger (user
    /// code: called with no session lock held).
    pub(crate) fn log_missing_codec(&self, event_type: EventType, sender: ActorId) {
        let last = self.missing_codecs.lock().len() >= MISSING_CODECS_LOGGED;
        let more = if last {
            " (this is the last type logged: events of types not seen yet are only counted)"
        } else {
            ""
        };
        self.system.environment().log_error(&format!(
            "interconnect node {}: an event of type {event_type:#x} ({event_type}) from {sender} \
             has no codec registered on this node: its handler gets the bytes, and \
             `EventHandle::is`/`get` see no event of the type (register it with \
             `InterconnectSetup::event`, or with `agentbox::register_remote_event!` and \
             `InterconnectSetup::linked_events`); further events of this type are only counted \
             (`SessionStats::events_without_codec`){more}",
            self.node_id
        ));
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Nanoseconds since the node started (ping stamps, silence).
    pub(crate) fn now_nanos(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub(crate) fn random_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        if getrandom::fill(&mut b).is_err() {
            // No OS randomness: a time-derived value (proofs then rest on the secret alone).
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            b[..16].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    pub(crate) fn random_u64(&self) -> u64 {
        let b = self.random_bytes();
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// A fresh session virtual id: own node, pool 0, the next local id, hint 0. Local ids
    /// increase within a process (YDB's peer refuses a handshake `Serial` lower than the
    /// last one it saw from the same process); they start at the start time's seconds
    /// `<< 32` plus 31 random bits, so that a restarted node's ids differ from its last.
    pub(crate) fn new_session_id(&self) -> ActorId {
        ActorId::new(
            self.node_id,
            self.next_session.fetch_add(1, Ordering::Relaxed),
            0,
        )
    }
}
