//! The lock-free copy of the message types an agent's direct mbox is subscribed to, read
//! by every sender to that mbox.
//!
//! The authoritative table sits under the agent's `direct` lock; taking that lock (even
//! shared) cost two atomic read-modify-writes per message in the ping-pong profile, so
//! senders first read this copy: up to [`SLOTS`] type keys and a version word, published as
//! a sequence lock (Boehm, "Can seqlocks get along with programming language memory
//! models?", 2012) whose data are atomics too.
//!
//! # Protocol
//!
//! `version` (a table on the field):
//!
//! | bits | meaning |
//! |---|---|
//! | 0 | a writer is rewriting the slots now |
//! | 1 | the copy is not exact (too many types, or a type has a filter): use the lock |
//! | 2..63 | generation, +1 per publication |
//!
//! Writer (one at a time: under the `direct` write lock):
//! 1. store `version | WRITING` (relaxed), then a release fence;
//! 2. store the slots (relaxed);
//! 3. store the next generation with the new `LOCKED` bit (release).
//!
//! Reader:
//! 1. load `version` (acquire); if `WRITING` or `LOCKED`: answer "ask the lock";
//! 2. load the slots (relaxed) and look for the key;
//! 3. an acquire fence, then load `version` again (relaxed); if it changed: "ask the lock".
//!
//! # Races
//!
//! A reader that answers from the slots saw the same even version before and after reading
//! them, so no publication overlapped its reads (the fence pairs with the writer's release
//! fence: had a step-2 store of a later writer been read, the reader's second load would
//! see at least that writer's step-1 version). It therefore saw one whole table, the old or
//! the new one, exactly as if it had sent a moment earlier or later. A reader that overlaps
//! a publication asks the locked table, which is authoritative. The earlier version checked
//! a mode flag once and scanned slots that the writer shifted in place, so a type subscribed
//! throughout could be missed while another type was unsubscribed (2 in 13 M checks).
//! Checked by the loom model below and by `tests/core_stress.rs` (other types toggled while
//! a subscribed type is sent from other threads: exact count).
//!
//! # Keys
//!
//! A key is a 32-bit hash of the `TypeId` (std guarantees only that equal ids hash equally):
//! 32 bytes of slots where 64-bit keys took 64, in every agent (a many-agent workload runs
//! faster the fewer bytes an agent takes). Two types may share a key, with probability
//! about 2⁻³² per pair: the copy may then say "subscribed" for a type that is not, and the
//! message is queued and dropped at the agent's handler lookup, which compares whole
//! `TypeId`s (traced `NoHandler` instead of `NoSubscribers`). It never says "not
//! subscribed" for a subscribed type, and no handler ever sees a message of another type.

use std::any::TypeId;
use std::hash::{Hash, Hasher};

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// Types the lock-free copy can hold.
pub(crate) const SLOTS: usize = 8;

const WRITING: u64 = 1;
const LOCKED: u64 = 2;
const GENERATION: u64 = 4;

pub(crate) struct FastTypes {
    version: AtomicU64,
    slots: [AtomicU32; SLOTS],
}

impl FastTypes {
    pub(crate) fn new() -> Self {
        FastTypes {
            version: AtomicU64::new(0),
            slots: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Publishes a new table: the given keys (`None`: the copy cannot be exact). The caller
    /// holds the lock that serialises writers.
    pub(crate) fn publish(&self, keys: Option<&[u32]>) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v | WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
        let exact = keys.filter(|k| k.len() <= SLOTS);
        if let Some(keys) = exact {
            for (i, slot) in self.slots.iter().enumerate() {
                slot.store(keys.get(i).copied().unwrap_or(0), Ordering::Relaxed);
            }
        }
        let next = (v & !(WRITING | LOCKED)) + GENERATION;
        let mode = if exact.is_some() { 0 } else { LOCKED };
        self.version.store(next | mode, Ordering::Release);
    }

    /// `Some(subscribed)` from the copy, or `None`: ask the locked table.
    #[inline]
    pub(crate) fn lookup(&self, key: u32) -> Option<bool> {
        let v = self.version.load(Ordering::Acquire);
        if v & (WRITING | LOCKED) != 0 {
            return None;
        }
        let found = self.slots.iter().any(|s| s.load(Ordering::Relaxed) == key);
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == v).then_some(found)
    }
}

/// The key of a type in the copy: the low 32 bits of a 64-bit mix of everything its `Hash`
/// writes (never 0, the empty slot). The words written are themselves a hash, so the low
/// bits of the last multiply are as good a key as a fold, and one instruction cheaper on
/// every send.
#[inline]
pub(crate) fn type_key(ty: &TypeId) -> u32 {
    /// A multiply-rotate mix (as FxHash) over every word written.
    struct Mix(u64);
    impl Mix {
        #[inline]
        fn add(&mut self, word: u64) {
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    impl Hasher for Mix {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for chunk in bytes.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                self.add(u64::from_le_bytes(word));
            }
        }
        fn write_u64(&mut self, v: u64) {
            self.add(v);
        }
        fn write_u128(&mut self, v: u128) {
            self.add(v as u64);
            self.add((v >> 64) as u64);
        }
    }
    let mut h = Mix(0);
    ty.hash(&mut h);
    (h.0 as u32).max(1)
}

#[cfg(all(test, not(loom)))]
#[path = "fast_types_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "fast_types_loom_tests.rs"]
mod loom_tests;
