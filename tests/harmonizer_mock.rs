//! The harmonizer driven through the core's hook with mock pools and a mock clock:
//! YDB's `TestExchangeThreads` and `TestToNeedyNextToHoggish` through `Harmonizer`, with the
//! pools' own counters (what `PoolStats` and the stats controller show). Deterministic:
//! every instant is given by the test, every figure by the mock.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::dispatcher::elastic::{
    ElasticPool, HarmonizerCounters, PoolSample, ThreadLimits, ThreadSample, Tick,
};
use agentbox::harmonizer::{Harmonizer, HarmonizerError};
use parking_lot::Mutex;

/// YDB's `TMockExecutorPool` behind the `ElasticPool` hook: cumulative per-thread figures
/// set by the test, a count clamped to `[min, max]`.
struct MockPool {
    name: String,
    limits: ThreadLimits,
    count: Mutex<usize>,
    threads: Mutex<Vec<ThreadSample>>,
    counters: HarmonizerCounters,
    tick: Mutex<Option<Tick>>,
    /// The lend targets set last (how many), if any were set.
    lend: Mutex<Option<usize>>,
}

impl MockPool {
    fn new(name: &str, min: usize, default: usize, max: usize) -> Arc<MockPool> {
        Arc::new(MockPool {
            name: name.into(),
            limits: ThreadLimits::new(min, default, max),
            count: Mutex::new(max),
            threads: Mutex::new(vec![ThreadSample::default(); max]),
            counters: HarmonizerCounters::default(),
            tick: Mutex::new(None),
            lend: Mutex::new(None),
        })
    }
    /// The same pool with a shared thread.
    fn with_shared_thread(name: &str, min: usize, default: usize, max: usize) -> Arc<MockPool> {
        let mut p = Arc::into_inner(MockPool::new(name, min, default, max)).unwrap();
        p.limits.has_shared_thread = true;
        Arc::new(p)
    }
    /// Threads `0..n` busy (and on CPU) for `secs` more seconds.
    fn busy(&self, n: usize, secs: u64) {
        for t in self.threads.lock().iter_mut().take(n) {
            t.busy_ns += secs * 1_000_000_000;
            t.cpu_ns += secs * 1_000_000_000;
        }
    }
}

impl ElasticPool for MockPool {
    fn name(&self) -> &str {
        &self.name
    }
    fn limits(&self) -> ThreadLimits {
        self.limits.clone()
    }
    fn thread_count(&self) -> usize {
        *self.count.lock()
    }
    fn set_thread_count(&self, n: usize) {
        *self.count.lock() = self.limits.clamp(n);
    }
    fn sample(&self) -> PoolSample {
        // As a real pool: the first `count` slots hold a thread.
        let count = self.thread_count();
        let mut threads = self.threads.lock().clone();
        for (i, t) in threads.iter_mut().enumerate() {
            t.running = i < count;
        }
        PoolSample {
            threads,
            target_threads: self.thread_count(),
            running_threads: self.thread_count(),
            ..PoolSample::default()
        }
    }
    fn counters(&self) -> &HarmonizerCounters {
        &self.counters
    }
    fn set_tick(&self, tick: Option<Tick>) {
        *self.tick.lock() = tick;
    }
    fn run_foreign_slice(&self, _deadline: Instant) -> usize {
        0
    }
    fn set_lend_targets(&self, targets: Vec<Arc<dyn ElasticPool>>) {
        *self.lend.lock() = Some(targets.len());
    }
}

fn counts(pools: &[Arc<MockPool>]) -> Vec<usize> {
    pools.iter().map(|p| p.thread_count()).collect()
}

/// The pool's own counters: (needy, exchange+, hoggish, starved, exchange−).
fn pool_ops(p: &MockPool) -> [u64; 5] {
    let c = &p.counters;
    [
        c.increasing_threads_by_needy_state.load(Ordering::Relaxed),
        c.increasing_threads_by_exchange.load(Ordering::Relaxed),
        c.decreasing_threads_by_hoggish_state
            .load(Ordering::Relaxed),
        c.decreasing_threads_by_starved_state
            .load(Ordering::Relaxed),
        c.decreasing_threads_by_exchange.load(Ordering::Relaxed),
    ]
}

fn build(pools: &[Arc<MockPool>]) -> Harmonizer {
    let total: usize = pools.iter().map(|p| p.limits.default).sum();
    let mut b = Harmonizer::builder().cpu_budget(total as f64);
    for p in pools {
        b = b.pool(p.clone());
    }
    b.build().unwrap()
}

#[test]
fn test_exchange_threads() {
    let pools = vec![
        MockPool::new("p0", 1, 1, 2),
        MockPool::new("p1", 1, 1, 2),
        MockPool::new("p2", 1, 1, 2),
    ];
    let h = build(&pools);
    // The harmonizer starts each pool at its default and installs its tick.
    assert_eq!(counts(&pools), [1, 1, 1]);
    assert!(pools.iter().all(|p| p.tick.lock().is_some()));
    let t0 = h.origin();
    let s = Duration::from_secs(1);
    h.harmonize_at(t0 + s);
    pools[1].busy(1, 60);
    pools[2].busy(1, 60);
    h.harmonize_at(t0 + 61 * s);
    assert_eq!(counts(&pools), [1, 2, 1]);
    assert_eq!(pool_ops(&pools[1]), [1, 0, 0, 0, 0]);
    let st = h.stats();
    assert!((st.budget - 1.0).abs() < 1e-6);
    assert!(st.pools[0].is_hoggish && st.pools[1].is_needy && st.pools[2].is_needy);
    pools[0].busy(1, 60);
    pools[1].busy(2, 60);
    h.harmonize_at(t0 + 121 * s);
    assert_eq!(counts(&pools), [2, 1, 1]);
    assert_eq!(pool_ops(&pools[0]), [0, 1, 0, 0, 0]);
    assert_eq!(pool_ops(&pools[1]), [1, 0, 0, 0, 1]);
    assert_eq!(pool_ops(&pools[2]), [0, 0, 0, 0, 0]);
    let st = h.stats();
    assert_eq!(st.iterations, 3);
    assert_eq!(st.pools[0].counters.increasing_threads_by_exchange, 1);
    assert_eq!(st.pools[1].counters.decreasing_threads_by_exchange, 1);
    assert!(pools[2].counters.is_hoggish.load(Ordering::Relaxed));
}

#[test]
fn test_to_needy_next_to_hoggish() {
    let pools = vec![MockPool::new("a", 4, 4, 8), MockPool::new("b", 4, 4, 8)];
    let h = build(&pools);
    let t0 = h.origin();
    let s = Duration::from_secs(1);
    h.harmonize_at(t0 + s);
    assert_eq!(h.stats().pools[0].potential_max_thread_count, 8.0);
    pools[0].busy(4, 59);
    h.harmonize_at(t0 + 60 * s);
    assert_eq!(counts(&pools), [5, 4]);
    assert_eq!(pool_ops(&pools[0]), [1, 0, 0, 0, 0]);
    h.harmonize_at(t0 + 120 * s);
    assert_eq!(counts(&pools), [4, 4]);
    assert_eq!(pool_ops(&pools[0]), [1, 0, 1, 0, 0]);
    assert_eq!(
        pools[0]
            .counters
            .potential_max_thread_count_milli
            .load(Ordering::Relaxed),
        8000
    );
}

#[test]
fn dropping_the_harmonizer_uninstalls_its_tick() {
    let pools = vec![MockPool::new("a", 1, 1, 2)];
    let h = build(&pools);
    assert!(pools[0].tick.lock().is_some());
    drop(h);
    assert!(pools[0].tick.lock().is_none());
}

#[test]
fn builder_errors() {
    assert_eq!(
        Harmonizer::builder().build().unwrap_err(),
        HarmonizerError::NoPools
    );
    let p = MockPool::new("a", 1, 1, 2);
    let e = Harmonizer::builder()
        .pool(p.clone())
        .period(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e, HarmonizerError::ZeroPeriod);
    let e = Harmonizer::builder()
        .pool(p.clone())
        .cpu_budget(f64::NAN)
        .build()
        .unwrap_err();
    assert!(matches!(e, HarmonizerError::InvalidBudget(_)));
    let e = Harmonizer::builder()
        .pool(p.clone())
        .pool(p.clone())
        .build()
        .unwrap_err();
    assert_eq!(e, HarmonizerError::DuplicatePool("a".into()));
    let one = agentbox::dispatcher::one_thread::Builder::new()
        .name("fixed")
        .build()
        .unwrap();
    let e = Harmonizer::builder().dispatcher(&one).build().unwrap_err();
    assert_eq!(e, HarmonizerError::NotElastic("fixed".into()));
}

#[test]
fn test_harmonizer_creation_and_invoke_read_history() {
    // YDB: the history is empty before the first step, one entry after.
    let pools = vec![MockPool::new("a", 4, 4, 8)];
    let h = build(&pools);
    assert!(h.history().is_empty());
    h.harmonize_at(h.origin() + Duration::from_secs(1));
    let history = h.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].iterations, 1);
}

#[test]
fn test_harmonizer_iteration_stats_to_needy_next_to_hoggish() {
    // YDB's iteration test of the same scenario: one entry per step, each with its pools;
    // the ring keeps the last HISTORY_LEN steps.
    let pools = vec![MockPool::new("a", 4, 4, 8), MockPool::new("b", 4, 4, 8)];
    let h = build(&pools);
    let t0 = h.origin();
    let s = Duration::from_secs(1);
    h.harmonize_at(t0 + s);
    assert_eq!(h.history().len(), 1);
    pools[0].busy(4, 59);
    h.harmonize_at(t0 + 60 * s);
    let history = h.history();
    assert_eq!(history.len(), 2);
    assert!(history[0].pools[0].is_hoggish && history[1].pools[0].is_needy);
    assert_eq!(history[1].pools[0].current_thread_count, 5);
    for i in 0..agentbox::harmonizer::HISTORY_LEN as u32 {
        h.harmonize_at(t0 + (61 + i) * s);
    }
    let history = h.history();
    assert_eq!(history.len(), agentbox::harmonizer::HISTORY_LEN);
    assert_eq!(
        history.last().unwrap().iterations,
        2 + agentbox::harmonizer::HISTORY_LEN as u64
    );
}

/// The harmonizer reads its pools when it is built: its first step, one period later,
/// has a whole period measured and acts on it (it used to be only the starting point, so
/// a loaded pool waited two periods, two seconds by default, for its first thread).
#[test]
fn the_first_step_acts_on_the_first_period() {
    let pools = vec![MockPool::new("a", 1, 1, 4)];
    let h = Harmonizer::builder()
        .pool(pools[0].clone())
        .cpu_budget(4.0)
        .build()
        .unwrap();
    let t0 = h.origin();
    pools[0].busy(1, 1);
    h.harmonize_at(t0 + Duration::from_secs(1));
    assert!(h.stats().pools[0].is_needy);
    assert_eq!(counts(&pools), [2]);
}

/// A shared thread lends itself only while the budget has a whole core free without it:
/// lent on a machine whose cores the pools take, it would only time-slice with their
/// threads. The harmonizer takes the targets away and gives them back as the load goes.
#[test]
fn a_shared_thread_lends_only_while_a_core_is_free() {
    let pools = vec![
        MockPool::with_shared_thread("s", 1, 1, 2),
        MockPool::new("b", 1, 1, 2),
    ];
    let h = build(&pools);
    assert_eq!(*pools[0].lend.lock(), Some(1), "lent from the start");
    let t0 = h.origin();
    let s = Duration::from_secs(1);
    // `b` busy on one thread: one core free.
    pools[1].busy(1, 1);
    h.harmonize_at(t0 + s);
    assert_eq!(*pools[0].lend.lock(), Some(1));
    // `b` busy on two threads: no core free, no lending.
    pools[1].set_thread_count(2);
    pools[1].busy(2, 1);
    h.harmonize_at(t0 + 2 * s);
    assert_eq!(*pools[0].lend.lock(), Some(0));
    // `b` idle again: lending again.
    h.harmonize_at(t0 + 3 * s);
    assert_eq!(*pools[0].lend.lock(), Some(1));
    drop(h);
    assert_eq!(
        *pools[0].lend.lock(),
        Some(0),
        "the harmonizer's drop ends lending"
    );
}
