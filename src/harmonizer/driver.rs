//! [`Harmonizer`]: runs the decision step once per period on elastic pools.
//!
//! # When the step runs (YDB's way)
//!
//! No thread of its own. The harmonizer installs a tick in every pool it drives
//! ([`ElasticPool::set_tick`]); each worker calls it when it asks for work:
//! 1. The tick compares the clock with the next deadline (one relaxed atomic load and a
//!    clock read) and returns at once when it is not due.
//! 2. When due, it tries the step's lock; if another worker holds it, it returns (that
//!    worker runs the step).
//! 3. The winner checks the deadline again under the lock, moves it one period on, reads
//!    every pool ([`ElasticPool::sample`]), runs the model, and applies the new counts
//!    ([`ElasticPool::set_thread_count`], cooperative: no handler is interrupted).
//!
//! Races: two workers passing step 1 at once both try the lock; the loser returns, and
//! the re-check in step 3 stops a late winner from running a second step in one period.
//! A system with every thread parked runs no step (there is nothing to move); the
//! next worker to wake runs it. [`Harmonizer::harmonize_at`] runs a step by hand (tests,
//! or a caller that wants a timer).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use thiserror::Error;

use super::model::{Model, PoolReading, PoolSpec, ThreadReading};
use super::stats::{HarmonizerStats, OperationCounts};
use crate::dispatcher::elastic::{ElasticPool, LatencyHistogram, PoolSample, Tick};
use crate::DispatcherHandle;

/// Why a [`Harmonizer`] could not be built.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum HarmonizerError {
    /// The dispatcher's thread count cannot change (only `thread_pool` and
    /// `adv_thread_pool` dispatchers built with thread limits are elastic).
    #[error("dispatcher {0:?} is not elastic (build it with thread limits)")]
    NotElastic(String),
    /// No pool was added.
    #[error("a harmonizer needs at least one pool")]
    NoPools,
    /// The period is zero.
    #[error("the harmonizer's period must be longer than zero")]
    ZeroPeriod,
    /// The CPU budget is not a positive finite number.
    #[error("the CPU budget {0} is not a positive number of cores")]
    InvalidBudget(f64),
    /// The same pool was added twice.
    #[error("pool {0:?} was added twice")]
    DuplicatePool(String),
}

/// Builds a [`Harmonizer`]: the pools it drives, its period and CPU budget.
///
/// # Examples
///
/// ```
/// use agentbox::harmonizer::Harmonizer;
/// use std::time::Duration;
///
/// let b = Harmonizer::builder().period(Duration::from_millis(500)).cpu_budget(2.0);
/// // Without pools it cannot be built.
/// assert!(b.build().is_err());
/// ```
#[derive(Default)]
pub struct HarmonizerBuilder {
    pools: Vec<Arc<dyn ElasticPool>>,
    period: Option<Duration>,
    budget: Option<f64>,
    errors: Vec<HarmonizerError>,
}

impl std::fmt::Debug for HarmonizerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarmonizerBuilder")
            .field(
                "pools",
                &self
                    .pools
                    .iter()
                    .map(|p| p.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("period", &self.period)
            .field("budget", &self.budget)
            .finish()
    }
}

impl HarmonizerBuilder {
    /// Adds a pool (an [`ElasticPool`]). Pools added first are the more important among
    /// pools of equal priority.
    pub fn pool(mut self, pool: Arc<dyn ElasticPool>) -> Self {
        self.pools.push(pool);
        self
    }

    /// Adds a dispatcher's pool; [`build`](Self::build) fails with
    /// [`HarmonizerError::NotElastic`] if its thread count cannot change.
    pub fn dispatcher(mut self, handle: &DispatcherHandle) -> Self {
        match handle.elastic() {
            Some(p) => self.pools.push(p),
            None => self
                .errors
                .push(HarmonizerError::NotElastic(handle.name().to_owned())),
        }
        self
    }

    /// How often the step runs; default 1 s (YDB's).
    pub fn period(mut self, period: Duration) -> Self {
        self.period = Some(period);
        self
    }

    /// The CPU budget in cores that the pools share; default: the cores available to the
    /// process (`std::thread::available_parallelism`). YDB's budget is the sum of the
    /// pools' default counts; pass that sum to get YDB's behaviour.
    pub fn cpu_budget(mut self, cores: f64) -> Self {
        self.budget = Some(cores);
        self
    }

    /// Builds the harmonizer and installs its tick in every pool; the first step runs one
    /// period later. Each pool starts from its default thread count.
    ///
    /// # Errors
    ///
    /// [`HarmonizerError`]: a dispatcher that is not elastic, no pools, a pool added
    /// twice, a zero period, a budget that is not a positive number.
    pub fn build(self) -> Result<Harmonizer, HarmonizerError> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        if self.pools.is_empty() {
            return Err(HarmonizerError::NoPools);
        }
        let period = self.period.unwrap_or(Duration::from_secs(1));
        if period.is_zero() {
            return Err(HarmonizerError::ZeroPeriod);
        }
        let budget = self.budget.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
        });
        if !(budget.is_finite() && budget > 0.0) {
            return Err(HarmonizerError::InvalidBudget(budget));
        }
        for (i, p) in self.pools.iter().enumerate() {
            if self.pools[..i].iter().any(|q| Arc::ptr_eq(p, q)) {
                return Err(HarmonizerError::DuplicatePool(p.name().to_owned()));
            }
        }
        let mut model = Model::default();
        model.set_total_cores(Some(budget));
        for p in &self.pools {
            let l = p.limits();
            model.add_pool(PoolSpec {
                name: p.name().to_owned(),
                min_full: l.min,
                default_full: l.default,
                max_full: l.max,
                priority: l.priority,
                own_shared: 0,
            });
            p.set_thread_count(l.default);
        }
        let origin = Instant::now();
        // The starting point of every history: the first step has a period measured.
        let first = pool_samples(&self.pools);
        model.prime(0, &readings(&self.pools, &first));
        let lending: Vec<bool> = self
            .pools
            .iter()
            .map(|p| p.limits().has_shared_thread)
            .collect();
        let n = self.pools.len();
        let inner = Arc::new(Inner {
            pools: self.pools,
            period,
            gate: Arc::new(Gate {
                origin,
                next_due_us: AtomicU64::new(micros(period)),
            }),
            step: Mutex::new(StepState {
                model,
                last_latency: vec![LatencyHistogram::default(); n],
                reported: vec![OperationCounts::default(); n],
                lent: first.iter().map(|s| (s.lent_busy_ns, 0)).collect(),
                lending,
            }),
            stats: Mutex::new(HarmonizerStats::default()),
            history: Mutex::new(std::collections::VecDeque::with_capacity(HISTORY_LEN)),
        });
        inner.publish_initial();
        install(&inner);
        Ok(Harmonizer {
            alive: Arc::new(()),
            inner,
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn pool_samples(pools: &[Arc<dyn ElasticPool>]) -> Vec<PoolSample> {
    pools.iter().map(|p| p.sample()).collect()
}

/// The model's readings of the pools' samples.
fn readings(pools: &[Arc<dyn ElasticPool>], samples: &[PoolSample]) -> Vec<PoolReading> {
    pools
        .iter()
        .zip(samples)
        .map(|(p, s)| PoolReading {
            full: p.thread_count(),
            threads: s
                .threads
                .iter()
                .map(|t| {
                    // Spinning is waiting for work: left out of both figures (it is
                    // CPU the thread gives up as soon as another thread wants it).
                    let spin = t.spin_ns.min(t.busy_ns);
                    let elapsed_s = (t.busy_ns - spin) as f64 / 1e9;
                    // Without a thread CPU clock, CPU time reads 0: take busy time.
                    let cpu_s = if t.cpu_ns == 0 {
                        elapsed_s
                    } else {
                        t.cpu_ns.saturating_sub(spin) as f64 / 1e9
                    };
                    ThreadReading {
                        cpu_s,
                        elapsed_s,
                        running: Some(t.running),
                    }
                })
                .collect(),
            ready_queues: s.ready_queues,
            stopping: s.running_threads.saturating_sub(s.target_threads),
        })
        .collect()
}

/// The pools that pool `i`'s shared thread serves: the others, most important first
/// (priority descending, then order of addition).
fn lend_targets(pools: &[Arc<dyn ElasticPool>], i: usize) -> Vec<Arc<dyn ElasticPool>> {
    let mut order: Vec<usize> = (0..pools.len()).filter(|&j| j != i).collect();
    let prio: Vec<i32> = pools.iter().map(|p| p.limits().priority).collect();
    order.sort_by(|&a, &b| prio[b].cmp(&prio[a]).then(a.cmp(&b)));
    order.into_iter().map(|j| pools[j].clone()).collect()
}

/// Lends the shared thread of every pool that has one to the other pools, most
/// important first (priority descending, then order of addition).
fn install(inner: &Arc<Inner>) {
    for (i, p) in inner.pools.iter().enumerate() {
        if p.limits().has_shared_thread {
            p.set_lend_targets(lend_targets(&inner.pools, i));
        }
    }
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let gate = inner.gate.clone();
    // Not due: a clock read and one relaxed load of a word written once per period (no
    // shared read-modify-write on the workers' path; the upgrade comes only when due).
    let tick: Tick = Arc::new(move || {
        let now_us = gate.since_origin(Instant::now());
        if now_us < gate.next_due_us.load(Ordering::Relaxed) {
            return;
        }
        if let Some(inner) = weak.upgrade() {
            inner.tick_due(now_us);
        }
    });
    for p in &inner.pools {
        p.set_tick(Some(tick.clone()));
    }
}

struct StepState {
    model: Model,
    last_latency: Vec<LatencyHistogram>,
    /// Operation counts already added to each pool's `HarmonizerCounters`.
    reported: Vec<OperationCounts>,
    /// Per pool: its shared thread's time on other pools (cumulative, ns) at the last
    /// step, and that step's instant (µs).
    lent: Vec<(u64, u64)>,
    /// Per pool: whether its shared thread may lend itself now.
    lending: Vec<bool>,
}

/// The deadline of the next step, shared by the ticks.
struct Gate {
    origin: Instant,
    /// Microseconds since `origin` of the next step.
    next_due_us: AtomicU64,
}

impl Gate {
    fn since_origin(&self, at: Instant) -> u64 {
        micros(at.saturating_duration_since(self.origin))
    }
}

struct Inner {
    pools: Vec<Arc<dyn ElasticPool>>,
    period: Duration,
    /// When the next step is due (held by the ticks too).
    gate: Arc<Gate>,
    step: Mutex<StepState>,
    stats: Mutex<HarmonizerStats>,
    /// The last [`HISTORY_LEN`] steps' snapshots, oldest first.
    history: Mutex<std::collections::VecDeque<HarmonizerStats>>,
}

/// Steps kept by [`Harmonizer::history`] (YDB's `SAVED_ITERATION_COUNT`: a minute at the
/// default period).
pub const HISTORY_LEN: usize = 60;

impl Inner {
    fn since_origin(&self, at: Instant) -> u64 {
        self.gate.since_origin(at)
    }

    /// The due part of a tick: try the lock, re-check, run.
    fn tick_due(&self, now_us: u64) {
        if let Some(mut state) = self.step.try_lock() {
            if now_us < self.gate.next_due_us.load(Ordering::Relaxed) {
                return;
            }
            self.gate.next_due_us.store(
                now_us.saturating_add(micros(self.period)),
                Ordering::Relaxed,
            );
            self.run_step(&mut state, now_us);
        }
    }

    fn publish_initial(&self) {
        let state = self.step.lock();
        let mut stats = self.stats.lock();
        stats.total_cores = state.model.total_cores();
        stats.pools = state.model.pool_stats();
    }

    /// A shared thread lends itself only while the budget, without what it lent in the
    /// last period, has a whole core free: lent on a machine whose cores are taken, it
    /// would only time-slice with the other pools' threads (and its own pool's).
    fn gate_lending(
        &self,
        state: &mut StepState,
        samples: &[PoolSample],
        now_us: u64,
        budget_ls: f64,
    ) {
        for (i, p) in self.pools.iter().enumerate() {
            if !p.limits().has_shared_thread {
                continue;
            }
            let (lent_before, at) = state.lent[i];
            let lent_now = samples[i].lent_busy_ns;
            state.lent[i] = (lent_now, now_us);
            let period_ns = now_us.saturating_sub(at).saturating_mul(1000);
            if period_ns == 0 {
                continue;
            }
            let lent = lent_now.saturating_sub(lent_before) as f64 / period_ns as f64;
            let lend = budget_ls + lent.min(1.0) >= 1.0;
            if lend != state.lending[i] {
                state.lending[i] = lend;
                p.set_lend_targets(if lend {
                    lend_targets(&self.pools, i)
                } else {
                    Vec::new()
                });
            }
        }
    }

    /// One step at `now_us` (microseconds since `origin`), under the step lock.
    fn run_step(&self, state: &mut StepState, now_us: u64) {
        let samples: Vec<_> = self.pools.iter().map(|p| p.sample()).collect();
        let readings = readings(&self.pools, &samples);
        let decisions = state.model.step(now_us, &readings, &[]);
        let mut pool_stats = state.model.pool_stats();
        for (i, p) in self.pools.iter().enumerate() {
            let d = decisions[i];
            if d.full != readings[i].full {
                p.set_thread_count(d.full);
            }
            let st = &mut pool_stats[i];
            let c = p.counters();
            let done = st.counters;
            let before = std::mem::replace(&mut state.reported[i], done);
            let add = |a: &AtomicU64, now: u64, was: u64| {
                a.fetch_add(now.saturating_sub(was), Ordering::Relaxed);
            };
            add(
                &c.increasing_threads_by_needy_state,
                done.increasing_threads_by_needy_state,
                before.increasing_threads_by_needy_state,
            );
            add(
                &c.increasing_threads_by_exchange,
                done.increasing_threads_by_exchange,
                before.increasing_threads_by_exchange,
            );
            add(
                &c.decreasing_threads_by_starved_state,
                done.decreasing_threads_by_starved_state,
                before.decreasing_threads_by_starved_state,
            );
            add(
                &c.decreasing_threads_by_hoggish_state,
                done.decreasing_threads_by_hoggish_state,
                before.decreasing_threads_by_hoggish_state,
            );
            add(
                &c.decreasing_threads_by_exchange,
                done.decreasing_threads_by_exchange,
                before.decreasing_threads_by_exchange,
            );
            c.is_needy.store(st.is_needy, Ordering::Relaxed);
            c.is_starved.store(st.is_starved, Ordering::Relaxed);
            c.is_hoggish.store(st.is_hoggish, Ordering::Relaxed);
            c.potential_max_thread_count_milli.store(
                (st.potential_max_thread_count * 1000.0).round() as u64,
                Ordering::Relaxed,
            );
            c.iterations.fetch_add(1, Ordering::Relaxed);
            let period = samples[i].latency.since(&state.last_latency[i]);
            state.last_latency[i] = samples[i].latency;
            st.activations = period.count();
            st.latency_p50 = period.quantile(0.5);
            st.latency_p99 = period.quantile(0.99);
            st.latency_max = period.quantile(1.0);
        }
        let g = state.model.globals;
        self.gate_lending(state, &samples, now_us, g.budget_ls);
        let snapshot = HarmonizerStats {
            iterations: g.iteration,
            total_cores: g.total_cores,
            budget: g.budget,
            budget_last_second: g.budget_ls,
            lost_cpu: g.lost_cpu,
            shared_free_cpu: g.shared_free_cpu,
            max_used_cpu: g.max_used_cpu,
            min_used_cpu: g.min_used_cpu,
            max_elapsed_cpu: g.max_elapsed_cpu,
            min_elapsed_cpu: g.min_elapsed_cpu,
            pools: pool_stats,
        };
        {
            let mut history = self.history.lock();
            if history.len() == HISTORY_LEN {
                history.pop_front();
            }
            history.push_back(snapshot.clone());
        }
        *self.stats.lock() = snapshot;
    }
}

/// YDB's harmonizer over a group of elastic pools: once per period it measures each
/// pool's threads and moves whole threads between the pools within a CPU budget.
///
/// Each period, per pool (see the [module docs](super) for the thresholds):
/// - **starved** (its threads are runnable but not running: the OS preempts them, or CPU
///   is overbooked): when the pools overdraw the budget it sheds its threads above its
///   default, least important pools first;
/// - **needy** (its CPU in the last second reached its thread count, or every thread is
///   busy and queues are ready): it gains the threads it can use (one per ready queue, at
///   least one) while the budget allows, most important pools first; when the budget is
///   spent, an extra thread moves to it from a less important pool (an exchange);
/// - **hoggish** (at least one of its threads idle): it gives one thread back, toward its
///   minimum.
///
/// Every change stays within the pool's `[min, max]` and is cooperative. Dropping the
/// harmonizer uninstalls its tick; the pools keep their current counts.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use agentbox::dispatcher::{elastic::ThreadLimits, thread_pool};
/// use agentbox::harmonizer::Harmonizer;
///
/// let interactive = thread_pool::Builder::new()
///     .name("interactive")
///     .limits(ThreadLimits { priority: 1, ..ThreadLimits::new(1, 1, 2) })
///     .build()
///     .unwrap();
/// let batch = thread_pool::Builder::new()
///     .name("batch")
///     .thread_limits(1, 1, 2)
///     .build()
///     .unwrap();
/// let harmonizer = Harmonizer::builder()
///     .dispatcher(&interactive)
///     .dispatcher(&batch)
///     .cpu_budget(2.0)
///     .period(Duration::from_millis(100))
///     .build()
///     .unwrap();
/// let stats = harmonizer.stats();
/// assert_eq!(stats.pools.len(), 2);
/// assert_eq!(stats.pools[0].name, "interactive");
/// ```
#[must_use = "dropping the Harmonizer stops it: keep it in a variable for as long as the pools should follow the load, or give it to the environment with `env.keep(harmonizer)`"]
pub struct Harmonizer {
    /// Dropped first: what tells [`HarmonizerObserver`]s that the handle is gone.
    alive: Arc<()>,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Harmonizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harmonizer")
            .field("pools", &self.inner.pools.len())
            .field("period", &self.inner.period)
            .finish()
    }
}

impl Harmonizer {
    /// A builder: period 1 s, budget = available cores, no pools yet.
    pub fn builder() -> HarmonizerBuilder {
        HarmonizerBuilder::default()
    }

    /// The last step's figures and every pool's counters (a copy).
    ///
    /// It is published at the end of a step, after the step changed the pools' counts: a
    /// pool's [`ElasticPool::thread_count`] may show a change a moment before this does.
    /// Before the first step the figures are 0 and the counts the pools' defaults.
    pub fn stats(&self) -> HarmonizerStats {
        self.inner.stats.lock().clone()
    }

    /// The snapshots of the last steps (at most [`HISTORY_LEN`], oldest first; YDB's
    /// iteration history): empty before the first step.
    pub fn history(&self) -> Vec<HarmonizerStats> {
        self.inner.history.lock().iter().cloned().collect()
    }

    /// The pools driven, in the order they were added.
    pub fn pools(&self) -> &[Arc<dyn ElasticPool>] {
        &self.inner.pools
    }

    /// Runs one step now as if the clock read `at` (waiting for a step in progress), and
    /// moves the next automatic step one period after `at`. Steps must be given
    /// non-decreasing instants to measure anything; an earlier instant restarts the
    /// measurement. For tests with a mock clock and for callers driving it from a timer.
    pub fn harmonize_at(&self, at: Instant) {
        let now_us = self.inner.since_origin(at);
        let mut state = self.inner.step.lock();
        self.inner.gate.next_due_us.store(
            now_us.saturating_add(micros(self.inner.period)),
            Ordering::Relaxed,
        );
        self.inner.run_step(&mut state, now_us);
    }

    /// The instant the harmonizer measures from (its build time).
    pub fn origin(&self) -> Instant {
        self.inner.gate.origin
    }

    /// A watcher of this harmonizer's figures that does not keep it alive: what a
    /// monitoring page holds (the `monitor` feature's `Monitor::add_harmonizer`).
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::dispatcher::thread_pool;
    /// use agentbox::harmonizer::Harmonizer;
    ///
    /// let pool = thread_pool::Builder::new().thread_limits(1, 1, 2).build().unwrap();
    /// let h = Harmonizer::builder().dispatcher(&pool).build().unwrap();
    /// let watch = h.observer();
    /// assert_eq!(watch.stats().unwrap().pools.len(), 1);
    /// drop(h);
    /// assert!(watch.stats().is_none());
    /// ```
    pub fn observer(&self) -> HarmonizerObserver {
        HarmonizerObserver {
            inner: Arc::downgrade(&self.inner),
            alive: Arc::downgrade(&self.alive),
        }
    }
}

/// A weak watcher of a [`Harmonizer`]'s figures ([`Harmonizer::observer`]).
///
/// It keeps neither the harmonizer nor its pools alive: once the harmonizer is dropped,
/// [`stats`](Self::stats) answers `None`.
#[derive(Clone)]
pub struct HarmonizerObserver {
    inner: std::sync::Weak<Inner>,
    alive: std::sync::Weak<()>,
}

impl HarmonizerObserver {
    /// The harmonizer's last step's figures ([`Harmonizer::stats`]), or `None` once it
    /// was dropped.
    pub fn stats(&self) -> Option<HarmonizerStats> {
        // The handle's token goes first in its drop: a tick still holding the inner part
        // for a moment does not make a dropped harmonizer look alive.
        self.alive.upgrade()?;
        Some(self.inner.upgrade()?.stats.lock().clone())
    }

    /// Whether this watches the same harmonizer as `other`.
    pub fn same_as(&self, other: &HarmonizerObserver) -> bool {
        self.inner.ptr_eq(&other.inner)
    }
}

impl std::fmt::Debug for HarmonizerObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarmonizerObserver")
            .field("alive", &(self.alive.strong_count() > 0))
            .finish()
    }
}

impl Drop for Harmonizer {
    fn drop(&mut self) {
        for p in &self.inner.pools {
            p.set_tick(None);
            if p.limits().has_shared_thread {
                p.set_lend_targets(Vec::new());
            }
        }
    }
}
