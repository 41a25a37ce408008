//! The synchronisation primitives of agentbox's hand-written concurrent protocols, in one
//! place so that the protocols can be model-checked with [loom] (as tokio does).
//!
//! Normal builds get `std`'s atomics and `parking_lot`'s mutex. A build with
//! `RUSTFLAGS="--cfg loom"` gets loom's models instead, and the `loom` unit tests explore
//! every interleaving of the protocols built on them (see `.ci/run`):
//!
//! | protocol | where | loom model |
//! |---|---|---|
//! | the direct mbox's lock-free subscription table | `agent/fast_types.rs` | `fast_types::loom_tests` |
//! | `adv_thread_pool`'s bind / thread-safe / exclusive start protocol | `dispatcher/adv_queue.rs` | `adv_queue::loom_tests` |
//! | message-limit counters | `limits.rs` | `limits::loom_tests` |
//! | the serial worker's channel count (local pushes skipping the channel) | `dispatcher/serial.rs` | `serial::loom_tests` |
//! | an idle worker's spin-then-park / wake handshake (no lost wake-up) | `dispatcher/idle.rs` | `idle::loom_tests` |
//! | a message node's reference count (the last reference frees it once, by decrement or by a load) | `message/node.rs` | `node::loom_tests` |
//! | an agent's set-once cells (its binding, its coop) | `agent/cell.rs` (`SetOnce`, its own loom imports) | `cell::loom_tests` |
//!
//! Only those modules use this shim; the rest of the crate keeps `std` and `parking_lot`
//! (a loom build runs only the loom tests).
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use parking_lot::Mutex;

#[cfg(loom)]
pub(crate) use self::loom_mutex::Mutex;

#[cfg(loom)]
mod loom_mutex {
    /// loom's mutex with `parking_lot`'s signature (no poisoning).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}
