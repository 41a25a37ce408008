//! The pool side of the hook: thread slots, the live and target counts, the per-thread
//! figures, the activation latency histogram, the tick and the lending of a shared thread.
//!
//! One `ThreadCtl` per thread pool; fixed-size pools have one too (for their slots), but
//! their threads never call the measured path ([`ThreadCtl::ask`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::cpu::thread_cpu_ns;
use super::{
    ElasticPool, HarmonizerCounters, LatencyHistogram, PoolSample, ThreadLimits, ThreadSample,
    Tick, LATENCY_BUCKETS,
};
use crate::dispatcher::idle::Spin;
use crate::dispatcher::pool::{Ready, ReadyQueue};

/// How long a shared thread serves one foreign pool before it returns to its own (spec
/// §2.3: YDB's `SoftProcessingDurationTs` of shared threads).
pub(crate) const FOREIGN_SLICE: Duration = Duration::from_millis(100);

/// A shared thread serves a foreign pool in steps this long (it takes no new queue of
/// that pool after it), and looks at its own pool between them.
const FOREIGN_STEP: Duration = Duration::from_millis(1);

/// How long a lending thread parks before it looks at the pools it lends to again (a
/// push into another pool does not wake it: that pool's own threads are woken).
const LEND_POLL: Duration = Duration::from_millis(2);

/// How often a busy thread brings its CPU time up to date.
const CPU_REFRESH: Duration = Duration::from_millis(1);

/// Figures of one thread slot; written by its occupant only (load and store), but for the
/// `shown_*` maxima, which samplers raise.
#[derive(Default)]
struct SlotStats {
    busy_ns: AtomicU64,
    cpu_ns: AtomicU64,
    /// The CPU clock of the slot's current thread when it started (a new thread's clock
    /// starts at 0: the slot's figure goes on from where the last one stopped).
    cpu_base: AtomicU64,
    parked_ns: AtomicU64,
    /// Part of `busy_ns` spent spinning for work.
    spin_ns: AtomicU64,
    /// When `busy_ns` was last brought up to date while the thread is busy (nanoseconds
    /// since the pool's epoch, plus 1); 0 while it is parked or the slot is empty.
    busy_mark: AtomicU64,
    events: AtomicU64,
    /// The highest busy and CPU times [`Threads::sample`] has reported: its estimates of a
    /// running demand's time may run ahead of what the thread records next (the OS
    /// preempted it, or it waited), and a sample never reports less than an earlier one.
    shown_busy_ns: AtomicU64,
    shown_cpu_ns: AtomicU64,
}

fn bump(a: &AtomicU64, by: u64) {
    a.store(
        a.load(Ordering::Relaxed).saturating_add(by),
        Ordering::Relaxed,
    );
}

/// Adds to a slot's busy time, published after its busy mark: a reader that sees the new
/// time sees the new mark.
fn add_busy(s: &SlotStats, by: u64) {
    s.busy_ns.store(
        s.busy_ns.load(Ordering::Relaxed).saturating_add(by),
        Ordering::Release,
    );
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What a pool does for its [`ElasticPool`] handle (implemented by each pool's core).
pub(crate) trait PoolOps: Send + Sync {
    /// Asks for `n` threads (already clamped).
    fn set_count(&self, n: usize);
    /// Runs ready queues on the calling thread until `deadline` or none is ready.
    fn foreign_slice(&self, deadline: Instant) -> usize;
    /// Ready queues waiting.
    fn ready_len(&self) -> usize;
    /// Wakes one parked thread (it looks at the pool's state again).
    fn nudge(&self);
}

/// One pool's thread control and figures.
pub(crate) struct ThreadCtl {
    name: Arc<str>,
    limits: ThreadLimits,
    /// Threads measure themselves and obey the count (built with limits).
    measured: bool,
    target: AtomicUsize,
    /// Threads running: a copy of `slots.1`, read without the lock.
    live: AtomicUsize,
    /// Occupied slots and their number; also orders a retirement against a start.
    slots: Mutex<(Vec<bool>, usize)>,
    /// Workers blocked in a request that another worker of this pool must answer
    /// ([`enter_blocked`](Self::enter_blocked)). Changed under `slots`' lock: a thread
    /// retires only while the others still outnumber them.
    blocked: AtomicUsize,
    stats: Box<[SlotStats]>,
    latency: [AtomicU64; LATENCY_BUCKETS],
    epoch: Instant,
    has_tick: AtomicBool,
    tick: RwLock<Option<Tick>>,
    counters: Arc<HarmonizerCounters>,
    foreign_events: AtomicU64,
    foreign_busy_ns: AtomicU64,
    lent_busy_ns: AtomicU64,
    has_lend: AtomicBool,
    lend: Mutex<Vec<Arc<dyn ElasticPool>>>,
    /// One thread of the pool at a time lends itself.
    lender: AtomicBool,
    ops: RwLock<Option<Weak<dyn PoolOps>>>,
}

/// A measured worker's own state between two asks.
pub(crate) struct WorkerClock {
    slot: usize,
    busy_since: Instant,
    cpu_at: Instant,
    /// Demands run since the last ask.
    pub(crate) events: u64,
    lending: bool,
    /// The thread's spin budget before it parks.
    spin: Spin,
}

impl ThreadCtl {
    /// A pool of `n` threads, fixed: nothing measured.
    pub(crate) fn fixed(name: &str, n: usize) -> Arc<ThreadCtl> {
        Self::build(name, ThreadLimits::new(n, n, n), false)
    }

    /// Whether the pool runs one thread now (then a demand blocked on it has no other
    /// worker).
    pub(crate) fn runs_one(&self) -> bool {
        self.live() <= 1
    }

    /// A worker of this pool is about to block until another of its workers answers: true,
    /// and counted until [`leave_blocked`](Self::leave_blocked), if a thread besides it and
    /// every other worker so blocked runs now; false otherwise (nobody could answer). While
    /// it is counted, no thread retires below that number, whatever the count asked for
    /// (a harmonizer's included).
    pub(crate) fn enter_blocked(&self) -> bool {
        let slots = self.slots.lock();
        let blocked = self.blocked.load(Ordering::Relaxed);
        if slots.1 < blocked + 2 {
            return false;
        }
        self.blocked.store(blocked + 1, Ordering::Relaxed);
        true
    }

    /// The end of a wait [`enter_blocked`](Self::enter_blocked) counted.
    pub(crate) fn leave_blocked(&self) {
        let _slots = self.slots.lock();
        self.blocked.fetch_sub(1, Ordering::Relaxed);
    }

    /// A pool with limits: measured, elastic.
    pub(crate) fn elastic(name: &str, limits: ThreadLimits) -> Arc<ThreadCtl> {
        Self::build(name, limits, true)
    }

    fn build(name: &str, limits: ThreadLimits, measured: bool) -> Arc<ThreadCtl> {
        Arc::new(ThreadCtl {
            name: name.into(),
            target: AtomicUsize::new(limits.default),
            live: AtomicUsize::new(0),
            slots: Mutex::new((vec![false; limits.max], 0)),
            blocked: AtomicUsize::new(0),
            stats: (0..limits.max).map(|_| SlotStats::default()).collect(),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            epoch: Instant::now(),
            has_tick: AtomicBool::new(false),
            tick: RwLock::new(None),
            counters: Arc::default(),
            foreign_events: AtomicU64::new(0),
            foreign_busy_ns: AtomicU64::new(0),
            lent_busy_ns: AtomicU64::new(0),
            has_lend: AtomicBool::new(false),
            lend: Mutex::new(Vec::new()),
            lender: AtomicBool::new(false),
            ops: RwLock::new(None),
            limits,
            measured,
        })
    }

    /// Connects the pool's core (held weakly: the handle does not keep the pool alive).
    pub(crate) fn attach(&self, ops: Weak<dyn PoolOps>) {
        *self.ops.write() = Some(ops);
    }

    /// The pool stops: drops the tick and the lend targets (they may hold handles of
    /// this pool: a cycle otherwise).
    pub(crate) fn detach(&self) {
        self.has_tick.store(false, Ordering::Relaxed);
        let tick = self.tick.write().take();
        self.has_lend.store(false, Ordering::Relaxed);
        let lend = std::mem::take(&mut *self.lend.lock());
        *self.ops.write() = None;
        drop((tick, lend));
    }

    fn ops(&self) -> Option<Arc<dyn PoolOps>> {
        self.ops.read().as_ref().and_then(Weak::upgrade)
    }

    pub(crate) fn is_measured(&self) -> bool {
        self.measured
    }

    pub(crate) fn limits(&self) -> &ThreadLimits {
        &self.limits
    }

    pub(crate) fn target(&self) -> usize {
        self.target.load(Ordering::Relaxed)
    }

    pub(crate) fn set_target(&self, n: usize) {
        self.target.store(n, Ordering::Relaxed);
    }

    /// Sets the count and reads the threads running, atomically with respect to a
    /// thread's retirement (which decides and decrements under the same lock: read
    /// apart, a retirement decided on the old count could follow the read and leave the
    /// pool a thread short).
    pub(crate) fn retarget(&self, n: usize) -> usize {
        let slots = self.slots.lock();
        self.target.store(n, Ordering::Relaxed);
        slots.1
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Takes the lowest free slot for a thread about to start.
    pub(crate) fn occupy_free_slot(&self) -> Option<usize> {
        let mut slots = self.slots.lock();
        let i = slots.0.iter().position(|o| !o)?;
        slots.0[i] = true;
        slots.1 += 1;
        self.live.store(slots.1, Ordering::Relaxed);
        Some(i)
    }

    /// Gives back a slot (a thread that could not start, or one that stopped).
    pub(crate) fn free_slot(&self, i: usize) {
        let mut slots = self.slots.lock();
        if std::mem::replace(&mut slots.0[i], false) {
            slots.1 -= 1;
            self.live.store(slots.1, Ordering::Relaxed);
        }
    }

    /// Stops the calling thread's occupancy of `slot` if the pool runs more threads than
    /// its count; true if it did (the thread must then return).
    fn retire(&self, slot: usize) -> bool {
        if self.live() <= self.target() {
            return false;
        }
        let mut slots = self.slots.lock();
        // Workers blocked in requests need one more thread than themselves running.
        if slots.1 <= self.target() || slots.1 < self.blocked.load(Ordering::Relaxed) + 2 {
            return false;
        }
        slots.0[slot] = false;
        slots.1 -= 1;
        self.live.store(slots.1, Ordering::Relaxed);
        true
    }

    /// The state of a measured worker starting in `slot`.
    pub(crate) fn clock(&self, slot: usize) -> WorkerClock {
        let now = Instant::now();
        let s = &self.stats[slot];
        s.cpu_base.store(
            s.cpu_ns
                .load(Ordering::Relaxed)
                .saturating_sub(thread_cpu_ns()),
            Ordering::Relaxed,
        );
        s.busy_mark.store(self.mark(now), Ordering::Relaxed);
        WorkerClock {
            slot,
            busy_since: now,
            cpu_at: now,
            events: 0,
            lending: false,
            spin: Spin::new(self.limits().spin_threshold),
        }
    }

    /// `at` as a busy mark: nanoseconds since the epoch, plus 1 (0 means "not busy").
    fn mark(&self, at: Instant) -> u64 {
        nanos(at.saturating_duration_since(self.epoch)).saturating_add(1)
    }

    fn read_cpu(&self, s: &SlotStats) {
        s.cpu_ns.store(
            s.cpu_base
                .load(Ordering::Relaxed)
                .wrapping_add(thread_cpu_ns()),
            Ordering::Relaxed,
        );
    }

    /// A timestamp for [`activated`](Self::activated): nanoseconds since the pool
    /// started.
    pub(crate) fn stamp(&self) -> u64 {
        nanos(self.epoch.elapsed())
    }

    /// A queue stamped at `stamp` starts being served now.
    pub(crate) fn activated(&self, stamp: u64) {
        let ns = self.stamp().saturating_sub(stamp);
        let b = LatencyHistogram::bucket_of(Duration::from_nanos(ns));
        self.latency[b].fetch_add(1, Ordering::Relaxed);
    }

    fn run_tick(&self) {
        if self.has_tick.load(Ordering::Relaxed) {
            let tick = self.tick.read().clone();
            if let Some(t) = tick {
                t();
            }
        }
    }

    /// A measured worker asks for work: brings its figures up to date, stops if the pool
    /// is above its count, runs the tick, lends itself if it is the pool's shared thread
    /// and the pool has nothing, and waits. `None`: the thread must return.
    pub(crate) fn ask<Q>(&self, w: &mut WorkerClock, ready: &ReadyQueue<Q>) -> Option<Q> {
        let s = &self.stats[w.slot];
        loop {
            let now = Instant::now();
            // The mark first, then the busy time (see `sample`).
            s.busy_mark.store(self.mark(now), Ordering::Relaxed);
            add_busy(s, nanos(now - w.busy_since));
            w.busy_since = now;
            if w.events > 0 {
                bump(&s.events, w.events);
                w.events = 0;
            }
            if now - w.cpu_at >= CPU_REFRESH {
                self.read_cpu(s);
                w.cpu_at = now;
            }
            if self.retire(w.slot) {
                self.stop_lending(w);
                return None;
            }
            self.run_tick();
            match ready.try_next() {
                Some(Ready::Queue(q)) => {
                    self.stop_lending(w);
                    return Some(q);
                }
                Some(Ready::Stop) => {
                    self.stop_lending(w);
                    return None;
                }
                Some(Ready::Wake) => continue,
                None => {}
            }
            let timeout = if self.may_lend(w) {
                let t = Instant::now();
                let ran = self.lend_once(|| ready.has_waiting());
                bump(&self.lent_busy_ns, nanos(t.elapsed()));
                if ran > 0 {
                    bump(&s.events, ran as u64);
                    continue;
                }
                Some(LEND_POLL)
            } else {
                // Spin before parking (as busy time, as YDB counts it); a queue made ready
                // meanwhile is taken by the next round of the loop.
                if !ready.has_waiting() {
                    let t = Instant::now();
                    let got = w.spin.spin_until(|| ready.has_waiting());
                    bump(&s.spin_ns, nanos(t.elapsed()));
                    if got {
                        continue;
                    }
                }
                None
            };
            // Park.
            self.read_cpu(s);
            let parked = Instant::now();
            s.busy_mark.store(0, Ordering::Relaxed);
            add_busy(s, nanos(parked - w.busy_since));
            let got = ready.next_within(timeout);
            let woke = Instant::now();
            bump(&s.parked_ns, nanos(woke - parked));
            s.busy_mark.store(self.mark(woke), Ordering::Relaxed);
            w.busy_since = woke;
            w.cpu_at = woke;
            match got {
                Ready::Queue(q) => {
                    self.stop_lending(w);
                    return Some(q);
                }
                Ready::Stop => {
                    self.stop_lending(w);
                    return None;
                }
                Ready::Wake => {}
            }
        }
    }

    /// Whether this worker is (or becomes) the pool's lending thread.
    fn may_lend(&self, w: &mut WorkerClock) -> bool {
        if !self.limits.has_shared_thread || !self.has_lend.load(Ordering::Relaxed) {
            // Lending switched off: a worker that held the flag lets it go, so that when
            // lending comes back any worker may take it (this one may park for long).
            self.stop_lending(w);
            return false;
        }
        if !w.lending {
            w.lending = self
                .lender
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        }
        w.lending
    }

    fn stop_lending(&self, w: &mut WorkerClock) {
        if std::mem::take(&mut w.lending) {
            self.lender.store(false, Ordering::Release);
        }
    }

    /// Serves the lend targets in order, a slice each; the demands run.
    /// Serves the lend targets, each for up to [`FOREIGN_SLICE`], in steps of
    /// [`FOREIGN_STEP`]: between two steps the thread goes home as soon as its own pool has
    /// work (`home_waits`), so its pool waits at most one foreign step (the queue in hand),
    /// not the whole slice.
    fn lend_once(&self, home_waits: impl Fn() -> bool) -> usize {
        let targets = self.lend.lock().clone();
        let mut ran = 0;
        for t in targets {
            let end = Instant::now() + FOREIGN_SLICE;
            loop {
                if home_waits() {
                    return ran;
                }
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let step = t.run_foreign_slice((now + FOREIGN_STEP).min(end));
                if step == 0 {
                    break;
                }
                ran += step;
            }
        }
        ran
    }

    /// Counts a foreign thread's slice on this pool.
    pub(crate) fn served_foreign(&self, events: usize, since: Instant) {
        self.foreign_events
            .fetch_add(events as u64, Ordering::Relaxed);
        self.foreign_busy_ns
            .fetch_add(nanos(since.elapsed()), Ordering::Relaxed);
    }

    pub(crate) fn counters(&self) -> &HarmonizerCounters {
        &self.counters
    }

    /// The handle a harmonizer gets.
    pub(crate) fn handle(self: &Arc<Self>) -> Arc<dyn ElasticPool> {
        Arc::new(Handle(self.clone()))
    }

    /// The pool's figures now. A thread in the middle of a demand brings its own figures
    /// up to date only when it next asks for work (a thread that keeps a queue of 2 ms
    /// events for seconds would look idle): the time since its last update is added to
    /// its busy and CPU time, as if it ran all of it. Where that estimate ran ahead (the
    /// thread was preempted or waited meanwhile), later samples hold the figure until the
    /// thread's own records pass it: a slot's figures never go down from one sample to the
    /// next.
    pub(crate) fn sample(&self) -> PoolSample {
        let occupied = self.slots.lock().0.clone();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let now = self.mark(Instant::now());
        let threads = self
            .stats
            .iter()
            .zip(occupied)
            .map(|(s, running)| {
                // The busy time first, then its mark (the thread writes them the other
                // way round): an update between the two reads makes this read short (made
                // up at the next), never long.
                let busy = s.busy_ns.load(Ordering::Acquire);
                let cpu = l(&s.cpu_ns);
                let mark = s.busy_mark.load(Ordering::Relaxed);
                let ongoing = if running && mark != 0 {
                    now.saturating_sub(mark)
                } else {
                    0
                };
                let busy = busy.saturating_add(ongoing);
                let cpu = if cpu == 0 {
                    0
                } else {
                    cpu.saturating_add(ongoing)
                };
                ThreadSample {
                    busy_ns: s.shown_busy_ns.fetch_max(busy, Ordering::Relaxed).max(busy),
                    cpu_ns: s.shown_cpu_ns.fetch_max(cpu, Ordering::Relaxed).max(cpu),
                    parked_ns: l(&s.parked_ns),
                    spin_ns: l(&s.spin_ns),
                    events: l(&s.events),
                    running,
                }
            })
            .collect();
        let mut latency = LatencyHistogram::default();
        for (o, a) in latency.buckets.iter_mut().zip(self.latency.iter()) {
            *o = l(a);
        }
        PoolSample {
            at: Some(Instant::now()),
            threads,
            target_threads: self.target(),
            running_threads: self.live(),
            ready_queues: self.ops().map_or(0, |o| o.ready_len()),
            latency,
            foreign_events: l(&self.foreign_events),
            foreign_busy_ns: l(&self.foreign_busy_ns),
            lent_busy_ns: l(&self.lent_busy_ns),
        }
    }
}

/// The [`ElasticPool`] of a thread pool: holds its figures, and its core weakly (a
/// harmonizer holding it does not keep the pool's threads alive).
struct Handle(Arc<ThreadCtl>);

impl ElasticPool for Handle {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn limits(&self) -> ThreadLimits {
        self.0.limits.clone()
    }

    fn thread_count(&self) -> usize {
        self.0.target()
    }

    fn set_thread_count(&self, n: usize) {
        let n = self.0.limits.clamp(n);
        match self.0.ops() {
            Some(ops) => ops.set_count(n),
            None => self.0.set_target(n),
        }
    }

    fn sample(&self) -> PoolSample {
        self.0.sample()
    }

    fn counters(&self) -> &HarmonizerCounters {
        &self.0.counters
    }

    fn set_tick(&self, tick: Option<Tick>) {
        if self.0.ops().is_none() {
            return; // stopped: a tick would never be dropped
        }
        let on = tick.is_some();
        let old = std::mem::replace(&mut *self.0.tick.write(), tick);
        self.0.has_tick.store(on, Ordering::Relaxed);
        drop(old);
    }

    fn run_foreign_slice(&self, deadline: Instant) -> usize {
        self.0.ops().map_or(0, |o| o.foreign_slice(deadline))
    }

    fn set_lend_targets(&self, targets: Vec<Arc<dyn ElasticPool>>) {
        if self.0.ops().is_none() {
            return;
        }
        let on = !targets.is_empty();
        let old = std::mem::replace(&mut *self.0.lend.lock(), targets);
        drop(old);
        self.0.has_lend.store(on, Ordering::Relaxed);
        // A thread parked before there was anything to lend to looks again.
        if let Some(ops) = self.0.ops() {
            ops.nudge();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A worker blocked in a request keeps a thread besides itself (and every other worker
    /// so blocked) running: no thread retires below that, whatever the count asks; once the
    /// wait ends, the count is obeyed again. With no thread to spare, the wait is refused.
    #[test]
    fn workers_blocked_in_requests_keep_a_thread_to_answer_them() {
        let ctl = ThreadCtl::elastic("p", ThreadLimits::new(1, 3, 3));
        let slots: Vec<usize> = (0..3).map(|_| ctl.occupy_free_slot().unwrap()).collect();
        assert!(ctl.enter_blocked(), "3 threads: one blocked, two free");
        assert!(ctl.enter_blocked(), "two blocked, one free");
        assert!(!ctl.enter_blocked(), "a third would leave nobody to answer");
        ctl.set_target(1);
        assert!(!ctl.retire(slots[2]), "the one free thread stays");
        assert_eq!(ctl.live(), 3);
        ctl.leave_blocked();
        assert!(
            ctl.retire(slots[2]),
            "one blocked needs two threads, not three"
        );
        assert!(!ctl.retire(slots[1]));
        assert_eq!(ctl.live(), 2);
        ctl.leave_blocked();
        assert!(ctl.retire(slots[1]), "nobody waits: the count rules");
        assert_eq!(ctl.live(), 1);
        assert!(ctl.runs_one());
        assert!(!ctl.enter_blocked(), "one thread: nobody else to answer");
    }

    /// Lending switched off and on again (the harmonizer gates it by the free cores): the
    /// worker that was the lending thread lets the flag go when it is switched off, so
    /// that another worker can become the lending thread when it comes back.
    #[test]
    fn the_lending_flag_is_let_go_when_lending_is_switched_off() {
        let mut limits = ThreadLimits::new(1, 2, 2);
        limits.has_shared_thread = true;
        let ctl = ThreadCtl::elastic("p", limits);
        let (a, b) = (
            ctl.occupy_free_slot().unwrap(),
            ctl.occupy_free_slot().unwrap(),
        );
        let (mut wa, mut wb) = (ctl.clock(a), ctl.clock(b));
        ctl.has_lend.store(true, Ordering::Relaxed);
        assert!(ctl.may_lend(&mut wa), "the first asker lends");
        assert!(!ctl.may_lend(&mut wb), "one lending thread at a time");
        ctl.has_lend.store(false, Ordering::Relaxed);
        assert!(!ctl.may_lend(&mut wa));
        ctl.has_lend.store(true, Ordering::Relaxed);
        // Worker `a` parks for long now; `b` asks first.
        assert!(
            ctl.may_lend(&mut wb),
            "the flag was let go: another worker lends"
        );
    }
}
