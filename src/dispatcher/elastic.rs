//! Elastic pools: the hook a harmonizer drives to move threads between thread pools.
//!
//! A `thread_pool` or `adv_thread_pool` dispatcher built with a range of threads (its
//! builder's `thread_limits`) implements [`ElasticPool`]: its live thread count can change
//! while it runs, it measures its threads (busy, parked and OS CPU time, events) and the
//! activation latency of its queues, and it runs a tick (the harmonizer's step) on the
//! first worker that asks for work. The core does not decide anything: a harmonizer (YDB's
//! algorithm lives in `agentbox::harmonizer`, on top of the core) reads
//! [`sample`](ElasticPool::sample)s and calls
//! [`set_thread_count`](ElasticPool::set_thread_count).
//!
//! # Rules a user relies on
//!
//! - A change of the thread count is cooperative: a thread told to stop finishes the
//!   demand in hand (and the rest of its queue's slice) and stops when it next asks for
//!   work; new threads are started at once, up to the pool's maximum. No demand is lost,
//!   duplicated or reordered by a change (per the dispatcher's own ordering rules).
//! - The count is always clamped to `[min, max]` of the pool's [`ThreadLimits`].
//! - Stopping the dispatcher joins every thread, whatever the count was.
//!

mod cpu;
mod threads;

pub(crate) use threads::{PoolOps, ThreadCtl};

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Number of buckets of a [`LatencyHistogram`].
pub const LATENCY_BUCKETS: usize = 24;

/// The thread bounds and scheduling parameters of an elastic pool (YDB's
/// `TBasicExecutorPoolConfig` fields that a harmonizer reads).
///
/// `min ≤ default ≤ max` always holds for the limits a pool reports: see
/// [`new`](Self::new) for the clamping.
///
/// # Examples
///
/// ```
/// use agentbox::dispatcher::elastic::ThreadLimits;
///
/// // YDB's rules: 0 for min or max means "default".
/// let l = ThreadLimits::new(0, 3, 0);
/// assert_eq!((l.min, l.default, l.max), (3, 3, 3));
/// let l = ThreadLimits::new(5, 2, 1); // min and max are clamped around the default
/// assert_eq!((l.min, l.default, l.max), (2, 2, 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadLimits {
    /// Fewest threads the harmonizer may leave the pool (at least 1).
    pub min: usize,
    /// The pool's start size, and what it returns to when idle.
    pub default: usize,
    /// Most threads the harmonizer may give the pool.
    pub max: usize,
    /// Importance: larger is more important (YDB's `Priority`).
    pub priority: i32,
    /// Whether one of the pool's threads is a shared thread, lent to other pools when the
    /// pool has no work (see [`ElasticPool::set_lend_targets`]).
    pub has_shared_thread: bool,
    /// How long an idle thread spins before it parks (YDB's `SpinThreshold`, 100 µs),
    /// watching the pool's ready queues; with the serial workers' adaptive budget (a
    /// thread preempted while it spins spins less). Spinning counts as busy time (not
    /// parked), as in YDB's measurement.
    pub spin_threshold: Duration,
}

impl ThreadLimits {
    /// Limits from the three counts with YDB's rules: a `default` of 0 is 1; a `min` or
    /// `max` of 0 is the default; then `min` is clamped to `[1, default]` and `max` to at
    /// least `default`. Priority 0, no shared thread, 100 µs spin threshold.
    pub fn new(min: usize, default: usize, max: usize) -> ThreadLimits {
        let default = default.max(1);
        let min = if min == 0 { default } else { min.min(default) };
        let max = if max == 0 { default } else { max.max(default) };
        ThreadLimits {
            min,
            default,
            max,
            priority: 0,
            has_shared_thread: false,
            spin_threshold: Duration::from_micros(100),
        }
    }

    /// The same limits with [`new`](Self::new)'s clamping applied to the three counts.
    pub fn normalized(self) -> ThreadLimits {
        ThreadLimits {
            priority: self.priority,
            has_shared_thread: self.has_shared_thread,
            spin_threshold: self.spin_threshold,
            ..ThreadLimits::new(self.min, self.default, self.max)
        }
    }

    /// `n` clamped to `[min, max]`.
    pub fn clamp(&self, n: usize) -> usize {
        n.clamp(self.min, self.max)
    }
}

impl Default for ThreadLimits {
    /// One thread, fixed.
    fn default() -> Self {
        ThreadLimits::new(1, 1, 1)
    }
}

/// Cumulative figures of one thread slot of a pool since the pool started (a slot is
/// reused when a stopped thread's place is taken by a new one, and its figures go on).
///
/// `busy_ns − cpu_ns` is the time the thread was runnable but did not run: the OS
/// preempted it (spec §3.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadSample {
    /// Wall time not parked: running demands, looking for work, spinning (YDB's `Elapsed`).
    /// The thread records it when it asks for work; for a demand still running, a sample
    /// adds the time since (never reporting less than an earlier sample of the slot).
    pub busy_ns: u64,
    /// The OS's CPU time of the thread, read by the thread itself
    /// (`CLOCK_THREAD_CPUTIME_ID`; 0 where the platform has no such clock). Brought up to
    /// date when the thread parks and at least every millisecond while it looks for work;
    /// for a demand still running, a sample adds the wall time since, as if the thread ran
    /// all of it (never reporting less than an earlier sample of the slot: where that ran
    /// ahead, the figure holds until the thread's own reading passes it).
    pub cpu_ns: u64,
    /// Wall time parked waiting for work.
    pub parked_ns: u64,
    /// The part of `busy_ns` spent spinning, looking for work before parking.
    pub spin_ns: u64,
    /// Demands run (added when the thread next asks for work, like the busy time).
    pub events: u64,
    /// Whether a thread occupies this slot now. The harmonizer counts only the slots where
    /// this is `true`: a pool of your own ([`ElasticPool`]) must set it for its running
    /// threads.
    pub running: bool,
}

/// Activation latency: time from a queue's becoming ready (the push of a demand into an
/// idle queue, or its going back to the ready list after its slice) to the start of its
/// first demand on a thread (YDB's `ActivationTimeUs`). Cumulative since the pool started.
///
/// Bucket 0 counts activations under 1 µs; bucket `i > 0` those in `[2^(i−1), 2^i)` µs;
/// the last bucket everything from `2^(LATENCY_BUCKETS−2)` µs up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Counts per bucket.
    pub buckets: [u64; LATENCY_BUCKETS],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: [0; LATENCY_BUCKETS],
        }
    }
}

impl LatencyHistogram {
    /// The bucket of a latency.
    pub fn bucket_of(latency: Duration) -> usize {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        if us == 0 {
            0
        } else {
            ((64 - us.leading_zeros()) as usize).min(LATENCY_BUCKETS - 1)
        }
    }

    /// The upper bound (exclusive) of bucket `i`, `None` for the last (unbounded) one.
    pub fn upper_bound(i: usize) -> Option<Duration> {
        (i + 1 < LATENCY_BUCKETS).then(|| Duration::from_micros(1u64 << i))
    }

    /// Activations counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The bucket-wise difference `self − earlier` (the activations of a period).
    pub fn since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        let mut out = *self;
        for (o, e) in out.buckets.iter_mut().zip(earlier.buckets.iter()) {
            *o = o.saturating_sub(*e);
        }
        out
    }

    /// The upper bound of the bucket holding the `q`-quantile (`0.0..=1.0`), `None` if
    /// empty or in the last bucket. `quantile(1.0)` bounds the worst activation.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, at least 1; the float is small (a count).
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        #[allow(clippy::cast_sign_loss)]
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= rank {
                return Self::upper_bound(i);
            }
        }
        None
    }
}

/// One read of an elastic pool ([`ElasticPool::sample`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSample {
    /// When it was read.
    pub at: Option<Instant>,
    /// One per thread slot (`limits().max` of them), cumulative.
    pub threads: Vec<ThreadSample>,
    /// The count the pool is asked to run ([`ElasticPool::thread_count`]).
    pub target_threads: usize,
    /// Threads running now (it follows the target cooperatively).
    pub running_threads: usize,
    /// Queues ready and not yet taken by a thread.
    pub ready_queues: usize,
    /// Activation latencies since the pool started.
    pub latency: LatencyHistogram,
    /// Demands of this pool run on other pools' shared threads, cumulative.
    pub foreign_events: u64,
    /// Wall time other pools' shared threads spent on this pool's demands, cumulative.
    pub foreign_busy_ns: u64,
    /// Wall time this pool's shared thread spent on other pools' demands, cumulative.
    pub lent_busy_ns: u64,
}

/// The harmonizer's counters of one pool (YDB's `TPoolHarmonizerStats`), kept by the pool
/// so that its stats show them; the harmonizer bumps them.
#[derive(Default)]
pub struct HarmonizerCounters {
    /// Threads added because the pool was needy.
    pub increasing_threads_by_needy_state: AtomicU64,
    /// Threads added by an exchange.
    pub increasing_threads_by_exchange: AtomicU64,
    /// Threads removed because the pool was starved.
    pub decreasing_threads_by_starved_state: AtomicU64,
    /// Threads removed because the pool was hoggish.
    pub decreasing_threads_by_hoggish_state: AtomicU64,
    /// Threads removed by an exchange.
    pub decreasing_threads_by_exchange: AtomicU64,
    /// The pool was needy at the last step.
    pub is_needy: AtomicBool,
    /// The pool was starved at the last step.
    pub is_starved: AtomicBool,
    /// The pool was hoggish at the last step.
    pub is_hoggish: AtomicBool,
    /// `PotentialMaxThreadCount` of the last step, in thousandths of a thread.
    pub potential_max_thread_count_milli: AtomicU64,
    /// Harmonizer steps that read this pool.
    pub iterations: AtomicU64,
}

impl fmt::Debug for HarmonizerCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl HarmonizerCounters {
    /// A plain copy of the counters.
    pub fn snapshot(&self) -> HarmonizerSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let b = |a: &AtomicBool| a.load(Ordering::Relaxed);
        HarmonizerSnapshot {
            increasing_threads_by_needy_state: l(&self.increasing_threads_by_needy_state),
            increasing_threads_by_exchange: l(&self.increasing_threads_by_exchange),
            decreasing_threads_by_starved_state: l(&self.decreasing_threads_by_starved_state),
            decreasing_threads_by_hoggish_state: l(&self.decreasing_threads_by_hoggish_state),
            decreasing_threads_by_exchange: l(&self.decreasing_threads_by_exchange),
            is_needy: b(&self.is_needy),
            is_starved: b(&self.is_starved),
            is_hoggish: b(&self.is_hoggish),
            potential_max_thread_count_milli: l(&self.potential_max_thread_count_milli),
            iterations: l(&self.iterations),
        }
    }
}

/// A plain copy of [`HarmonizerCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HarmonizerSnapshot {
    /// See [`HarmonizerCounters::increasing_threads_by_needy_state`].
    pub increasing_threads_by_needy_state: u64,
    /// See [`HarmonizerCounters::increasing_threads_by_exchange`].
    pub increasing_threads_by_exchange: u64,
    /// See [`HarmonizerCounters::decreasing_threads_by_starved_state`].
    pub decreasing_threads_by_starved_state: u64,
    /// See [`HarmonizerCounters::decreasing_threads_by_hoggish_state`].
    pub decreasing_threads_by_hoggish_state: u64,
    /// See [`HarmonizerCounters::decreasing_threads_by_exchange`].
    pub decreasing_threads_by_exchange: u64,
    /// See [`HarmonizerCounters::is_needy`].
    pub is_needy: bool,
    /// See [`HarmonizerCounters::is_starved`].
    pub is_starved: bool,
    /// See [`HarmonizerCounters::is_hoggish`].
    pub is_hoggish: bool,
    /// See [`HarmonizerCounters::potential_max_thread_count_milli`].
    pub potential_max_thread_count_milli: u64,
    /// See [`HarmonizerCounters::iterations`].
    pub iterations: u64,
}

/// The harmonizer's step, installed with [`ElasticPool::set_tick`].
pub type Tick = Arc<dyn Fn() + Send + Sync>;

/// A pool whose thread count a harmonizer can change: implemented by `thread_pool` and
/// `adv_thread_pool` dispatchers built with thread limits (and so by the YDB actor pools
/// of more than one thread). Get one with
/// [`DispatcherHandle::elastic`](crate::DispatcherHandle::elastic).
///
/// This is a hook for the layers above the core (the harmonizer); the pool keeps the
/// figures, the caller decides.
pub trait ElasticPool: Send + Sync {
    /// The dispatcher's name.
    fn name(&self) -> &str;

    /// The pool's bounds and parameters.
    fn limits(&self) -> ThreadLimits;

    /// The thread count the pool is asked to run (threads follow it cooperatively).
    fn thread_count(&self) -> usize;

    /// Asks for `n` threads, clamped to `[min, max]`. New threads start at once; a thread
    /// told to stop finishes the demand in hand and stops when it next asks for work.
    fn set_thread_count(&self, n: usize);

    /// A read of the pool's cumulative figures.
    fn sample(&self) -> PoolSample;

    /// The harmonizer's counters of this pool (atomics the harmonizer bumps).
    fn counters(&self) -> &HarmonizerCounters;

    /// Installs (or removes) the harmonizer's step: called by the pool's threads each time
    /// they ask for work, so it must be cheap when not due (an atomic deadline check) and
    /// must not block.
    fn set_tick(&self, tick: Option<Tick>);

    /// Runs this pool's demands on the calling (foreign) thread until `deadline` or until
    /// the pool has no ready queue, with the pool's own ordering rules; returns the
    /// demands run. Used by other pools' shared threads.
    fn run_foreign_slice(&self, deadline: Instant) -> usize;

    /// The pools this pool's shared thread may serve when the pool has no work, most
    /// important first (ignored without a shared thread).
    fn set_lend_targets(&self, targets: Vec<Arc<dyn ElasticPool>>);
}

/// The stats controller's quantities of an elastic pool, under `prefix`:
/// `threads.{target,min,default,max}`, per slot `wt-<i>/{busy,cpu,parked}_us` and
/// `events.count`, the latency buckets `activation.lt_<bound>us` (cumulative counts per
/// bucket) and the harmonizer's counters `harmonizer.<name>`.
pub(crate) fn distribute(
    ctl: &ThreadCtl,
    prefix: &str,
    out: &mut dyn FnMut(crate::stats::Quantity),
) {
    use crate::stats::source::quantity;
    let to = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let l = ctl.limits();
    out(quantity(prefix, "threads.target", ctl.target()));
    out(quantity(prefix, "threads.min", l.min));
    out(quantity(prefix, "threads.default", l.default));
    out(quantity(prefix, "threads.max", l.max));
    let s = ctl.sample();
    for (i, t) in s.threads.iter().enumerate() {
        let p = format!("{prefix}/wt-{i}");
        out(quantity(&p, "busy_us", to(t.busy_ns / 1000)));
        out(quantity(&p, "cpu_us", to(t.cpu_ns / 1000)));
        out(quantity(&p, "parked_us", to(t.parked_ns / 1000)));
        out(quantity(&p, "events.count", to(t.events)));
    }
    for (i, n) in s.latency.buckets.iter().enumerate() {
        out(crate::stats::Quantity {
            prefix: prefix.to_owned(),
            suffix: LATENCY_SUFFIXES[i],
            value: to(*n),
        });
    }
    let c = ctl.counters().snapshot();
    for (suffix, v) in [
        (
            "harmonizer.increasing_threads_by_needy_state",
            c.increasing_threads_by_needy_state,
        ),
        (
            "harmonizer.increasing_threads_by_exchange",
            c.increasing_threads_by_exchange,
        ),
        (
            "harmonizer.decreasing_threads_by_starved_state",
            c.decreasing_threads_by_starved_state,
        ),
        (
            "harmonizer.decreasing_threads_by_hoggish_state",
            c.decreasing_threads_by_hoggish_state,
        ),
        (
            "harmonizer.decreasing_threads_by_exchange",
            c.decreasing_threads_by_exchange,
        ),
        ("harmonizer.is_needy", u64::from(c.is_needy)),
        ("harmonizer.is_starved", u64::from(c.is_starved)),
        ("harmonizer.is_hoggish", u64::from(c.is_hoggish)),
        (
            "harmonizer.potential_max_thread_count_milli",
            c.potential_max_thread_count_milli,
        ),
        ("foreign.events", s.foreign_events),
    ] {
        out(crate::stats::Quantity {
            prefix: prefix.to_owned(),
            suffix,
            value: to(v),
        });
    }
}

/// Suffixes of the latency buckets (the stats controller wants `&'static str`).
const LATENCY_SUFFIXES: [&str; LATENCY_BUCKETS] = [
    "activation.lt_1us",
    "activation.lt_2us",
    "activation.lt_4us",
    "activation.lt_8us",
    "activation.lt_16us",
    "activation.lt_32us",
    "activation.lt_64us",
    "activation.lt_128us",
    "activation.lt_256us",
    "activation.lt_512us",
    "activation.lt_1024us",
    "activation.lt_2048us",
    "activation.lt_4096us",
    "activation.lt_8192us",
    "activation.lt_16384us",
    "activation.lt_32768us",
    "activation.lt_65536us",
    "activation.lt_131072us",
    "activation.lt_262144us",
    "activation.lt_524288us",
    "activation.lt_1048576us",
    "activation.lt_2097152us",
    "activation.lt_4194304us",
    "activation.lt_inf",
];
