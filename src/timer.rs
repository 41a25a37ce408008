//! Timers: delayed and periodic messages.
//!
//! 1. [`send_delayed`] and [`send_periodic`] deliver to any mbox after a delay (zero is
//!    valid: as soon as the timer thread gets to it) and return a [`TimerHandle`].
//! 2. A periodic timer delivers the *same message instance* every period.
//! 3. Dropping the last clone of a handle cancels the timer; [`TimerHandle::cancel`]
//!    cancels it at once whatever other clones exist; [`TimerHandle::detach`] lets it run
//!    without a handle (a detached periodic timer runs until its environment stops).
//! 4. Cancellation also revokes copies already queued: a timer message travels in an
//!    envelope that reveals it only while the timer is not cancelled, so after `cancel`
//!    returns (or the last handle is dropped) no handler receives it. A handler already
//!    running when `cancel` is called finishes normally.
//! 5. Each environment has one timer thread. Deliveries run on it and never block it: a
//!    full bounded mchain drops instead of waiting.
//! 6. Cancelling a timer (or dropping its last handle) lets go of its message at once: the
//!    payload is freed then, or with the last copy still queued; a one-shot timer hands its
//!    message over when it fires.
//! 7. A delay or period too long for [`std::time::Instant`] (such as `Duration::MAX`)
//!    means "never": nothing panics, the timer counts as pending until cancelled. The
//!    same holds for mchain waits and state time limits.
//!
//! # The engine
//!
//! A binary heap ordered by (deadline, schedule order) under one mutex, with a condition
//! variable the timer thread waits on until the earliest deadline. Scheduling is
//! `O(log n)`; cancelling is `O(1)` (an atomic flag; the entry leaves the heap when it
//! comes up, or in a compaction when more than half the heap is cancelled entries), so
//! 100 000 pending timers cost the message path nothing and the timer thread
//! `O(log n)` per expiry. Timing wheels would make scheduling `O(1)` but tick even when
//! idle and round deadlines; at the rates an agent system schedules timers the heap wins.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::{send_delayed, send_periodic, TimerHandle};
//!
//! struct Tick;
//! struct Stop;
//! struct Ticker { ticks: u32, timer: Option<TimerHandle> }
//!
//! impl Agent for Ticker {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self()
//!             .event(|a: &mut Self, _, _: &Tick| a.ticks += 1)?
//!             ;
//!         ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Stop| {
//!             a.timer = None; // the last handle: cancels the periodic timer
//!             ctx.deregister_coop(DeregReason::Normal);
//!         })?;
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         let me = ctx.direct_mbox();
//!         self.timer = Some(send_periodic(&me, Duration::ZERO, Duration::from_millis(5), Tick).unwrap());
//!         send_delayed(&me, Duration::from_millis(50), Stop).unwrap().detach();
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Ticker { ticks: 0, timer: None }); }).unwrap();
//! }).unwrap();
//! ```

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::panic::{catch_unwind, AssertUnwindSafe};

use parking_lot::{Condvar, Mutex};
use thiserror::Error;

use crate::environment::handle::{EnvLayer, EnvSide, WeakEnv};
use crate::mbox::seam::{AgentRef, AgentSide, Agents};
use crate::mbox::{DeliveryMode, Mbox, MboxId, MboxKind};
use crate::message::{Access, Envelope, Message};

/// Why a timer could not be scheduled.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerError {
    /// The mbox's environment is gone or has stopped its timer thread.
    #[error("the environment of mbox {mbox} is not running")]
    NotRunning {
        /// The mbox.
        mbox: String,
    },
    /// A mutable message cannot go to a multi-consumer mbox.
    #[error("mutable message {type_name} cannot be sent to multi-consumer mbox {mbox}")]
    MutableToMultiConsumer {
        /// The message type.
        type_name: &'static str,
        /// The mbox.
        mbox: String,
    },
    /// A mutable message has one receiver, once: it cannot be periodic.
    #[error("mutable message {type_name} cannot be sent periodically")]
    MutablePeriodic {
        /// The message type.
        type_name: &'static str,
    },
}

/// `from + d`, or `None` ("never") when `Instant` cannot hold it.
///
/// Every user `Duration` that becomes a deadline (timers, periods, mchain waits, state time
/// limits) goes through here: `Instant + Duration` panics on overflow, and
/// `Duration::MAX` is a natural way to say "practically never".
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Option<Instant> {
    from.checked_add(d)
}

/// Sends immutable `msg` to `to` after `delay`.
///
/// **Dropping the returned [`TimerHandle`] cancels the timer**: the message is not sent,
/// and a copy already queued is revoked. Keep the handle for as long as the message should
/// still come, or call [`TimerHandle::detach`] to let it run on its own.
///
/// A delay too long for [`Instant`] (such as [`Duration::MAX`]) means the message is
/// never sent; the handle still cancels.
///
/// # Errors
///
/// [`TimerError::NotRunning`] when `to`'s environment does not run.
pub fn send_delayed<M: Send + Sync + 'static>(
    to: &Mbox,
    delay: Duration,
    msg: M,
) -> Result<TimerHandle, TimerError> {
    schedule_to(to, Message::new(msg), delay, None)
}

/// Sends mutable `msg` to single-consumer `to` after `delay`.
///
/// Dropping the returned [`TimerHandle`] cancels the timer, as for [`send_delayed`].
///
/// # Errors
///
/// [`TimerError::MutableToMultiConsumer`], or as [`send_delayed`].
pub fn send_delayed_mutable<M: Send + 'static>(
    to: &Mbox,
    delay: Duration,
    msg: M,
) -> Result<TimerHandle, TimerError> {
    schedule_to(to, Message::new_mutable(msg), delay, None)
}

/// Sends immutable `msg` to `to` after `delay`, then every `period` (a zero period makes it
/// a delayed send), the same instance each time.
///
/// **Dropping the returned [`TimerHandle`] stops the timer** (and revokes a copy already
/// queued); keep it for as long as the ticks should come, or [`detach`](TimerHandle::detach)
/// it to let them come until the environment ends.
///
/// A delay or a next tick too far away for [`Instant`] (such as [`Duration::MAX`]) never
/// comes: the timer then stops, and nothing panics (neither the caller nor the timer
/// thread).
///
/// # Errors
///
/// As [`send_delayed`].
pub fn send_periodic<M: Send + Sync + 'static>(
    to: &Mbox,
    delay: Duration,
    period: Duration,
    msg: M,
) -> Result<TimerHandle, TimerError> {
    let period = (!period.is_zero()).then_some(period);
    schedule_to(to, Message::new(msg), delay, period)
}

/// Schedules an already wrapped message (for custom mboxes and layers that forward
/// messages they did not build). Dropping the returned handle cancels the timer.
///
/// # Errors
///
/// As [`send_delayed`]; [`TimerError::MutablePeriodic`] for a periodic mutable message.
pub fn schedule_message(
    to: &Mbox,
    msg: Message,
    delay: Duration,
    period: Option<Duration>,
) -> Result<TimerHandle, TimerError> {
    schedule_to(to, msg, delay, period.filter(|p| !p.is_zero()))
}

fn schedule_to(
    to: &Mbox,
    msg: Message,
    delay: Duration,
    period: Option<Duration>,
) -> Result<TimerHandle, TimerError> {
    let ty = msg.message_type();
    if ty.is_mutable() {
        if period.is_some() {
            return Err(TimerError::MutablePeriodic {
                type_name: ty.name(),
            });
        }
        if to.kind() == MboxKind::MultiConsumer {
            return Err(TimerError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: to.name(),
            });
        }
    }
    let env = to
        .environment()
        .ok_or_else(|| TimerError::NotRunning { mbox: to.name() })?;
    TimerHome::timers(&*env.0)
        .schedule(Target::Mbox(to.clone()), msg, delay, period)
        .ok_or_else(|| TimerError::NotRunning { mbox: to.name() })
}

/// A handle to a scheduled timer; clones share it, and dropping the last one cancels it.
#[derive(Clone)]
#[must_use = "dropping the handle cancels the timer; call .detach() to let it run"]
pub struct TimerHandle(Arc<HandleInner>);

struct HandleInner {
    entry: Arc<TimerEntry>,
    detached: AtomicBool,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        if !self.detached.load(Ordering::Acquire) {
            self.entry.cancel();
        }
    }
}

impl TimerHandle {
    /// Cancels the timer now, for every clone of the handle: it fires no more, copies of
    /// its message still queued are not handled, and the timer lets go of its message at
    /// once (it is freed when the last queued copy, if any, is dropped).
    pub fn cancel(&self) {
        self.0.entry.cancel();
    }

    /// Whether the timer will still deliver (not cancelled, and not a one-shot timer that
    /// has fired).
    pub fn is_active(&self) -> bool {
        self.0.entry.flag.state.load(Ordering::Acquire) == ACTIVE
    }

    /// Lets the timer run with no handle: it is no longer cancelled by drops.
    pub fn detach(self) {
        self.0.detached.store(true, Ordering::Release);
    }
}

impl std::fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerHandle")
            .field("active", &self.is_active())
            .finish()
    }
}

const ACTIVE: u8 = 0;
const CANCELLED: u8 = 1;
const DONE: u8 = 2;

/// The part of a timer its message's envelope shares.
struct TimerFlag {
    state: AtomicU8,
}

/// Reveals the timer's message only while the timer is not cancelled.
struct TimerEnvelope(Arc<TimerFlag>);

impl Envelope for TimerEnvelope {
    fn reveal(&self, _access: Access) -> bool {
        self.0.state.load(Ordering::Acquire) != CANCELLED
    }
}

/// What a timer needs of the environment it runs in (implemented by the environment).
pub(crate) trait TimerHome {
    /// The environment's timer thread.
    fn timers(&self) -> &TimerThread;
}

/// Where a timer delivers.
pub(crate) enum Target {
    Mbox(Mbox),
    /// Straight into an agent's queue, from the pseudo-mbox `MboxId` (state time limits).
    Agent(AgentRef, MboxId),
}

struct TimerEntry {
    flag: Arc<TimerFlag>,
    target: Target,
    /// Taken out when the timer is cancelled, so that its payload is freed at once, not
    /// when the entry's deadline comes and the heap lets go of it.
    msg: Mutex<Option<Message>>,
    period: Option<Duration>,
    engine: Weak<Engine>,
}

impl TimerEntry {
    /// Cancels a timer still in the heap, revokes the copies a fired one left queued, and
    /// frees its message (the copies still queued hold their own reference).
    fn cancel(&self) {
        let was = self.flag.state.swap(CANCELLED, Ordering::AcqRel);
        if was == ACTIVE {
            if let Some(engine) = self.engine.upgrade() {
                engine.pending.fetch_sub(1, Ordering::AcqRel);
                engine.cancelled.fetch_add(1, Ordering::AcqRel);
            }
        }
        let msg = self.msg.lock().take();
        // Dropped outside the lock: a payload's `Drop` may schedule timers.
        drop(msg);
    }

    /// Delivers the message; the last delivery (of a one-shot timer) hands it over.
    fn fire(&self, last: bool) {
        let msg = if last {
            self.msg.lock().take()
        } else {
            self.msg.lock().clone()
        };
        let Some(msg) = msg else {
            return; // cancelled meanwhile
        };
        match &self.target {
            // The timer thread never waits for room in a full chain.
            Target::Mbox(m) => {
                let _ = m.deliver_with(msg, 0, DeliveryMode::Nonblocking);
            }
            Target::Agent(a, mbox) => Agents::push_straight(a, *mbox, msg),
        }
    }
}

struct Item {
    at: Instant,
    seq: u64,
    entry: Arc<TimerEntry>,
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Item {
    // Reversed: the max-heap pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Heap {
    items: BinaryHeap<Item>,
    running: bool,
    stopped: bool,
}

#[derive(Default)]
struct Engine {
    heap: Mutex<Heap>,
    wake: Condvar,
    seq: AtomicU64,
    pending: AtomicUsize,
    /// Cancelled entries still in the heap (approximately: compaction recounts).
    cancelled: AtomicUsize,
}

/// An environment's timer thread.
pub(crate) struct TimerThread {
    engine: Arc<Engine>,
    thread: Mutex<Option<JoinHandle<()>>>,
    env: WeakEnv,
}

impl TimerThread {
    pub(crate) fn new(env: WeakEnv) -> Self {
        TimerThread {
            engine: Arc::new(Engine::default()),
            thread: Mutex::new(None),
            env,
        }
    }

    pub(crate) fn start(&self) -> std::io::Result<()> {
        self.engine.heap.lock().running = true;
        let engine = self.engine.clone();
        let env = self.env.clone();
        let t = std::thread::Builder::new()
            .name("agentbox-timer".into())
            .spawn(move || run(&engine, &env))?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Stops the thread; timers not yet fired are dropped.
    pub(crate) fn stop(&self) {
        let items = {
            let mut heap = self.engine.heap.lock();
            heap.stopped = true;
            self.engine.wake.notify_all();
            std::mem::take(&mut heap.items)
        };
        drop(items);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.engine.pending.load(Ordering::Acquire)
    }

    /// Schedules a delivery; `None` when the thread is not running.
    pub(crate) fn schedule(
        &self,
        target: Target,
        msg: Message,
        delay: Duration,
        period: Option<Duration>,
    ) -> Option<TimerHandle> {
        let flag = Arc::new(TimerFlag {
            state: AtomicU8::new(ACTIVE),
        });
        let entry = Arc::new(TimerEntry {
            msg: Mutex::new(Some(Message::enveloped(msg, TimerEnvelope(flag.clone())))),
            flag,
            target,
            period,
            engine: Arc::downgrade(&self.engine),
        });
        let at = deadline_after(Instant::now(), delay);
        let seq = self.engine.seq.fetch_add(1, Ordering::Relaxed);
        {
            let mut heap = self.engine.heap.lock();
            if !heap.running || heap.stopped {
                return None;
            }
            // A delay past what `Instant` can hold means "never": the handle exists (and
            // cancels) but nothing is queued to fire.
            let Some(at) = at else {
                self.engine.pending.fetch_add(1, Ordering::AcqRel);
                drop(heap);
                return Some(TimerHandle(Arc::new(HandleInner {
                    entry,
                    detached: AtomicBool::new(false),
                })));
            };
            self.engine.compact(&mut heap);
            let earliest = heap.items.peek().is_none_or(|top| at < top.at);
            heap.items.push(Item {
                at,
                seq,
                entry: entry.clone(),
            });
            self.engine.pending.fetch_add(1, Ordering::AcqRel);
            if earliest {
                self.engine.wake.notify_one();
            }
        }
        Some(TimerHandle(Arc::new(HandleInner {
            entry,
            detached: AtomicBool::new(false),
        })))
    }
}

impl Engine {
    /// A cancelled entry left the heap (the count may have been reset by a compaction).
    fn popped_cancelled(&self) {
        let _ = self
            .cancelled
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Drops cancelled entries once they are more than half of a large heap.
    fn compact(&self, heap: &mut Heap) {
        let len = heap.items.len();
        if len >= 1024 && self.cancelled.load(Ordering::Acquire) > len / 2 {
            heap.items
                .retain(|i| i.entry.flag.state.load(Ordering::Acquire) == ACTIVE);
            self.cancelled.store(0, Ordering::Release);
        }
    }
}

fn run(engine: &Engine, env: &WeakEnv) {
    let mut heap = engine.heap.lock();
    loop {
        if heap.stopped {
            return;
        }
        let now = Instant::now();
        match heap.items.peek() {
            None => engine.wake.wait(&mut heap),
            Some(top) if top.at > now => {
                let at = top.at;
                engine.wake.wait_until(&mut heap, at);
            }
            Some(_) => {
                let item = heap.items.pop().expect("peeked");
                let entry = item.entry;
                let state = entry.flag.state.load(Ordering::Acquire);
                if state != ACTIVE {
                    engine.popped_cancelled();
                    continue;
                }
                match entry.period {
                    Some(period) => {
                        // Far behind: skip the missed ticks. A next tick past what
                        // `Instant` can hold never comes.
                        let next = deadline_after(item.at, period).map(|at| {
                            match deadline_after(at, period) {
                                Some(after) if after < now => deadline_after(now, period),
                                _ => Some(at),
                            }
                        });
                        if let Some(Some(at)) = next {
                            let seq = engine.seq.fetch_add(1, Ordering::Relaxed);
                            heap.items.push(Item {
                                at,
                                seq,
                                entry: entry.clone(),
                            });
                        }
                    }
                    None => {
                        if entry
                            .flag
                            .state
                            .compare_exchange(ACTIVE, DONE, Ordering::AcqRel, Ordering::Acquire)
                            .is_err()
                        {
                            engine.popped_cancelled();
                            continue;
                        }
                        engine.pending.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                drop(heap);
                // A delivery filter or a custom mbox runs here: its panic must not end the
                // timer thread (and every timer with it).
                let last = entry.period.is_none();
                let fired = catch_unwind(AssertUnwindSafe(|| entry.fire(last)));
                if let Err(payload) = fired {
                    let line = format!(
                        "a timer delivery panicked (in a delivery filter or a custom mbox): {}",
                        crate::exception::panic_message(&payload)
                    );
                    match env.upgrade() {
                        Some(env) => EnvLayer::log_error(&env.0, &line),
                        None => eprintln!("agentbox: {line}"),
                    }
                }
                drop(entry);
                heap = engine.heap.lock();
            }
        }
    }
}
