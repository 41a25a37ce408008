//! How an idle worker thread waits for work: it spins up to a threshold, then parks; a
//! producer wakes it with an unpark syscall only when it is parked.
//!
//! One [`Idle`] belongs to one consumer thread (the worker). Its word packs the worker's
//! state with a count of *pending* notices: work announced to the worker and not yet taken.
//! Because the state and the count live in one atomic word, the park/wake handshake is a
//! single-location protocol: no fence pairing, and loom checks it exactly.
//!
//! # The word
//!
//! | bits | field | meaning |
//! |---|---|---|
//! | 0–1 | state | `RUNNING` 0, `SPINNING` 1, `PARKED` 2 |
//! | 2–63 | pending | notices given ([`notify`](Idle::notify)) and not yet [`taken`](Idle::taken) |
//!
//! | from | to | who | how |
//! |---|---|---|---|
//! | `RUNNING` | `SPINNING` | worker | `fetch_or`, step 1 |
//! | `SPINNING` | `RUNNING` | worker | `fetch_and`, step 2 (work seen while spinning) |
//! | `SPINNING` | `PARKED` | worker | CAS that requires pending = 0, step 3 |
//! | `PARKED` | `RUNNING` | a producer | CAS, step 5; that producer alone unparks |
//!
//! # Protocol
//!
//! Producer (any thread), for each piece of work:
//!
//! 1. `notify`: `fetch_add` one pending notice; the old word tells the worker's state.
//! 2. Publish the work (push it into the queue the worker polls).
//! 3. `published`: if step 1 saw `PARKED`, CAS `PARKED → RUNNING` and, if this producer's
//!    CAS won, unpark the worker. Otherwise nothing: a running or spinning worker sees the
//!    pending count by itself, so the common case costs no syscall.
//!
//! Worker, when its queues are empty ([`wait`](Idle::wait)):
//!
//! 1. `fetch_or(SPINNING)`; if pending ≠ 0, back to `RUNNING` and return.
//! 2. Spin (a pause instruction per poll) until pending ≠ 0 or the spin budget is spent; on
//!    work, back to `RUNNING` and return.
//! 3. CAS `SPINNING` with pending = 0 → `PARKED`. If it fails, pending ≠ 0: back to
//!    `RUNNING`, return.
//! 4. Park until the state is no longer `PARKED` (spurious wake-ups park again).
//! 5. (Done by the producer of step 3 above.) Return: the state is `RUNNING`.
//!
//! The worker, after it takes a piece of work from its queue, calls [`taken`](Idle::taken).
//!
//! # Races
//!
//! *No lost wake-up.* The worker parks only through the CAS of step 3, which requires
//! pending = 0. A producer's `notify` is ordered before or after that CAS on the one word:
//! before, and the CAS fails; after, and the producer sees `PARKED` and wakes the worker
//! after publishing. Several producers may see `PARKED`; their CASes elect one to unpark
//! (the others see `RUNNING`). An unpark that lands before the worker's `park` call is kept
//! by the thread's park token, so `park` returns at once.
//!
//! *Notified but not yet published.* Between a producer's steps 1 and 2 the worker may see
//! pending ≠ 0 and find its queue empty. It does not park in that state (step 3 needs
//! pending = 0); it returns, finds nothing, and waits again, which returns at once. The
//! window is a queue push long; [`wait`](Idle::wait) pauses in it rather than spinning
//! flat out, and yields the processor if it lasts, in case the producer was preempted.
//!
//! *Wake-up cost.* A spinning worker is woken by the count alone; a parked one by one
//! unpark, however many producers saw it parked. A producer never writes the state of a
//! running or spinning worker.
//!
//! The model `idle::loom_tests` checks the handshake with one and two producers and a
//! worker that spins 0 or 1 rounds; `serial::loom_tests` checks the serial queue's use.
//!
//! # Spinning
//!
//! Spinning pays off when work arrives within about the cost of a park and unpark (a few
//! microseconds), as the reply in a conversation between two threads does. It hurts when
//! there are more runnable threads than cores: a spinner that is preempted is woken by the
//! count, not by an unpark, so it waits for the scheduler to give it a core back (a time
//! slice of some other thread, milliseconds) instead of being woken by the kernel at once.
//! [`Spin`] therefore watches its own clock: a gap between two polls far longer than a
//! poll means the thread was preempted while spinning, and it halves its budget (down to
//! nothing); spins that find work grow it back toward the configured threshold.

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

use crate::sync::{AtomicUsize, Mutex, Ordering};

#[cfg(loom)]
use loom::thread::{current, park, Thread};
#[cfg(not(loom))]
use std::thread::{current, park, Thread};

/// The spin threshold of the serial-worker dispatchers unless their builder sets one.
///
/// 20 µs is about four times what a futex park and unpark cost on Linux (5 µs with the
/// context switch), so a worker whose work comes back within that spends at most twice what
/// parking would (the classic spin-then-block bound), and a worker that falls idle burns at
/// most 20 µs of CPU before it parks. YDB's pools default to 100 µs, but YDB adapts it
/// down to at most 12.8 µs when it measures wake-ups (see `HARMONIZER.md` §5).
pub(crate) const DEFAULT_SPIN_THRESHOLD: Duration = Duration::from_micros(20);

/// The `spin_threshold` setter of a serial-worker builder with a `spin: Option<Duration>`
/// field (read it with [`spin_threshold_or_default`]).
macro_rules! spin_threshold_method {
    () => {
        /// How long an idle worker thread spins, watching for work, before it parks
        /// (default: 20 µs).
        ///
        /// Spinning saves the wake-up of a parked thread (an unpark syscall for the sender,
        /// a few microseconds for the worker) when work comes back soon, as in a
        /// conversation between threads; `Duration::ZERO` parks at once, for a thread that
        /// must not burn CPU while idle. A worker that finds itself preempted while it
        /// spins (more runnable threads than cores) spins less until its spins pay off
        /// again, so a long threshold costs little on a loaded machine.
        pub fn spin_threshold(mut self, spin: std::time::Duration) -> Self {
            self.spin = Some(spin);
            self
        }
    };
}
pub(crate) use spin_threshold_method;

/// A builder's spin threshold, or [`DEFAULT_SPIN_THRESHOLD`].
pub(crate) fn spin_threshold_or_default(spin: Option<Duration>) -> Duration {
    spin.unwrap_or(DEFAULT_SPIN_THRESHOLD)
}

const STATE: usize = 0b11;
const RUNNING: usize = 0;
const SPINNING: usize = 1;
const PARKED: usize = 2;
const ONE: usize = 0b100;

/// The idle state of one worker thread and the count of work announced to it. See the
/// module docs for the protocol.
pub(crate) struct Idle {
    /// `pending << 2 | state` (the table in the module docs).
    word: AtomicUsize,
    /// The worker's thread, set by [`register_current`](Self::register_current) before it
    /// first parks; read only by the producer that unparks it.
    thread: Mutex<Option<Thread>>,
}

/// What [`Idle::notify`] saw; hand it to [`Idle::published`].
#[must_use = "pass it to `published` after publishing the work"]
#[derive(Clone, Copy)]
pub(crate) struct Notice(usize);

impl Notice {
    /// The worker was spinning when the work was announced (it will see it with no unpark).
    #[allow(dead_code)] // for the pools' wakers, which prefer a spinning thread
    pub(crate) fn was_spinning(self) -> bool {
        self.0 & STATE == SPINNING
    }
}

/// How [`Idle::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// Work was pending before the worker started to spin.
    AtOnce,
    /// Work arrived while it spun.
    Spinning,
    /// It parked and a producer unparked it.
    Parked,
}

impl Default for Idle {
    fn default() -> Self {
        Idle {
            word: AtomicUsize::new(RUNNING),
            thread: Mutex::new(None),
        }
    }
}

impl Idle {
    /// Makes the calling thread the one [`wait`](Self::wait) parks and producers unpark.
    /// Call it on the worker thread before its first `wait`.
    pub(crate) fn register_current(&self) {
        *self.thread.lock() = Some(current());
    }

    /// Producer step 1: announces one piece of work, before it is published.
    #[inline]
    pub(crate) fn notify(&self) -> Notice {
        Notice(self.word.fetch_add(ONE, Ordering::AcqRel))
    }

    /// Producer step 3: after the work is published, wakes the worker if step 1 saw it
    /// parked.
    #[inline]
    pub(crate) fn published(&self, notice: Notice) {
        if notice.0 & STATE == PARKED {
            self.wake_parked();
        }
    }

    /// CAS `PARKED → RUNNING`; the producer whose CAS wins unparks the worker.
    #[cold]
    fn wake_parked(&self) {
        let won = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w & STATE == PARKED).then_some(w & !STATE)
            })
            .is_ok();
        if won {
            if let Some(t) = self.thread.lock().as_ref() {
                t.unpark();
            }
        }
    }

    /// The worker took one piece of work announced by [`notify`](Self::notify).
    #[inline]
    pub(crate) fn taken(&self) {
        self.word.fetch_sub(ONE, Ordering::AcqRel);
    }

    /// Work was announced and not yet taken. A `false` means every `notify` that happened
    /// before this call has been matched by a `taken`.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.word.load(Ordering::Acquire) >= ONE
    }

    /// Notices not yet taken, roughly (for stats).
    pub(crate) fn pending(&self) -> usize {
        self.word.load(Ordering::Relaxed) / ONE
    }

    /// Worker steps 1–5: returns once work is pending, after spinning with `spin`'s budget
    /// and then parking.
    pub(crate) fn wait(&self, spin: &mut Spin) -> Woken {
        // Step 1.
        if self.word.fetch_or(SPINNING, Ordering::AcqRel) >= ONE {
            self.stop_spinning();
            // Notified but maybe not yet published (see "Races"): let the producer finish.
            spin.pending_not_found();
            return Woken::AtOnce;
        }
        // Step 2.
        if spin.spin_until(|| self.has_pending()) {
            self.stop_spinning();
            return Woken::Spinning;
        }
        // Step 3.
        if self
            .word
            .compare_exchange(SPINNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            self.stop_spinning();
            return Woken::Spinning;
        }
        // Step 4: the producer that CASes PARKED → RUNNING unparks us.
        while self.word.load(Ordering::Acquire) & STATE == PARKED {
            park();
        }
        Woken::Parked
    }

    /// `SPINNING → RUNNING`, by the worker (producers never write a spinning state).
    fn stop_spinning(&self) {
        self.word.fetch_and(!STATE, Ordering::AcqRel);
    }
}

/// A worker's spin budget: the configured threshold, lowered while the thread is seen to be
/// preempted as it spins (see the module docs). Owned by the worker thread.
pub(crate) struct Spin {
    limit: Duration,
    budget: Duration,
    /// Consecutive waits that found work pending but not yet published.
    unpublished: u32,
}

/// A gap this long between two polls means the spinning thread was preempted.
#[cfg(not(loom))]
const PREEMPTED: Duration = Duration::from_micros(50);

/// Polls between two clock reads while spinning.
#[cfg(not(loom))]
const POLLS_PER_CLOCK: u32 = 32;

impl Spin {
    /// A budget of `limit`; zero never spins.
    pub(crate) fn new(limit: Duration) -> Self {
        Spin {
            limit,
            budget: limit,
            unpublished: 0,
        }
    }

    /// The current budget (for tests and stats).
    #[allow(dead_code)]
    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }

    /// Polls `ready` until it holds (true) or the budget is spent (false).
    #[cfg(not(loom))]
    pub(crate) fn spin_until(&mut self, ready: impl Fn() -> bool) -> bool {
        self.unpublished = 0;
        if self.budget.is_zero() {
            // Preempted spins may have lowered it to nothing: try it again now and then.
            self.budget = self.limit / 64;
            return ready();
        }
        let start = Instant::now();
        let mut last = start;
        loop {
            for _ in 0..POLLS_PER_CLOCK {
                if ready() {
                    self.budget = self.budget.saturating_add(self.limit / 16).min(self.limit);
                    return true;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now - last >= PREEMPTED {
                // Preempted while spinning: spinning only keeps this thread from being
                // woken by the kernel. Park now, and spin less next time.
                self.budget /= 2;
                if self.budget < self.limit / 64 {
                    self.budget = Duration::ZERO;
                }
                return ready();
            }
            if now - start >= self.budget {
                return ready();
            }
            last = now;
        }
    }

    /// loom: one poll, then a yield so that the model explores the producer's steps.
    #[cfg(loom)]
    pub(crate) fn spin_until(&mut self, ready: impl Fn() -> bool) -> bool {
        if self.limit.is_zero() {
            return ready();
        }
        if ready() {
            return true;
        }
        loom::thread::yield_now();
        ready()
    }

    /// Step 1 found work pending: if it was not there to take (notified, not yet
    /// published), pause, and yield once it lasts (the producer may have been preempted).
    fn pending_not_found(&mut self) {
        self.unpublished += 1;
        if self.unpublished > 64 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    /// The worker found work after a wait: the next `AtOnce` is not a stall.
    pub(crate) fn found(&mut self) {
        self.unpublished = 0;
    }
}

#[cfg(all(test, not(loom)))]
#[path = "idle_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "idle_loom_tests.rs"]
mod loom_tests;
