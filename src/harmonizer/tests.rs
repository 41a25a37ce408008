//! YDB's harmonizer tests (spec §7), in our words, on the pure model: a mock clock (the
//! `ts` passed to each step) and mock per-thread figures, so nothing depends on the
//! machine's speed. Each test is named after the YDB scenario it re-tests.

use super::history::ValueHistory;
use super::model::{Model, PoolReading, PoolSpec, ThreadReading};
use super::shared::{SharedInfo, SharedThreadReading};
use super::stats::OperationCounts;

const S: u64 = 1_000_000;

/// YDB's `TMockExecutorPool`: per-thread cumulative figures, a count clamped to
/// `[min, max]` (defaults 4/4/8).
struct MockPool {
    spec: PoolSpec,
    full: usize,
    threads: Vec<ThreadReading>,
    /// Ready queues reported at each step.
    ready: usize,
    /// Report which slots run (the first `full`), as the real pools do.
    report_running: bool,
}

impl MockPool {
    fn new(min: usize, default: usize, max: usize) -> Self {
        MockPool {
            spec: PoolSpec {
                name: "MockPool".into(),
                min_full: min,
                default_full: default,
                max_full: max,
                priority: 0,
                own_shared: 0,
            },
            full: default,
            threads: vec![ThreadReading::default(); max],
            ready: 0,
            report_running: false,
        }
    }
    /// The pool's reading now.
    fn reading(&self) -> PoolReading {
        let mut threads = self.threads.clone();
        if self.report_running {
            for (i, t) in threads.iter_mut().enumerate() {
                t.running = Some(i < self.full);
            }
        }
        PoolReading {
            full: self.full,
            threads,
            stopping: 0,
            ready_queues: self.ready,
        }
    }
    /// Each running thread (the first `full`) busy for `us`, getting `cpu_share` of it as CPU.
    fn run_busy(&mut self, us: u64, cpu_share: f64) {
        let s = us as f64 / 1e6;
        let n = self.full;
        self.add(s * cpu_share, s, 0, n);
    }
    fn set_full(&mut self, n: usize) {
        self.full = n.clamp(self.spec.min_full, self.spec.max_full);
    }
    /// Adds `cpu_s` of CPU and `elapsed_s` not parked to threads `from..from + count`.
    fn add(&mut self, cpu_s: f64, elapsed_s: f64, from: usize, count: usize) {
        for t in &mut self.threads[from..from + count] {
            t.cpu_s += cpu_s;
            t.elapsed_s += elapsed_s;
        }
    }
}

struct Bench {
    model: Model,
    pools: Vec<MockPool>,
    ts: u64,
}

impl Bench {
    fn new(pools: Vec<MockPool>) -> Self {
        let mut model = Model::default();
        for p in &pools {
            model.add_pool(p.spec.clone());
        }
        Bench {
            model,
            pools,
            ts: S,
        }
    }
    fn harmonize_after(&mut self, us: u64) {
        self.ts += us;
        let readings: Vec<PoolReading> = self.pools.iter().map(MockPool::reading).collect();
        let decisions = self.model.step(self.ts, &readings, &[]);
        for (p, d) in self.pools.iter_mut().zip(decisions) {
            p.set_full(d.full);
        }
    }
    fn counts(&self) -> Vec<usize> {
        self.pools.iter().map(|p| p.full).collect()
    }
    fn ops(&self, i: usize) -> OperationCounts {
        self.model.pool_stats()[i].counters
    }
}

/// (needy, exchange up, hoggish, starved, exchange down): YDB's `CHECK_CHANGING_THREADS`
/// order is (needy, exchange+, hoggish, starved, exchange−).
fn ops(needy: u64, inc_ex: u64, hog: u64, starved: u64, dec_ex: u64) -> OperationCounts {
    OperationCounts {
        increasing_threads_by_needy_state: needy,
        increasing_threads_by_exchange: inc_ex,
        decreasing_threads_by_hoggish_state: hog,
        decreasing_threads_by_starved_state: starved,
        decreasing_threads_by_exchange: dec_ex,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn test_add_pool() {
    let b = Bench::new(vec![MockPool::new(4, 4, 8)]);
    let stats = b.model.pool_stats();
    assert_eq!(stats[0].potential_max_thread_count, 8.0);
    assert_eq!(stats[0].counters, OperationCounts::default());
}

#[test]
fn test_harmonize() {
    let mut b = Bench::new(vec![MockPool::new(4, 4, 8)]);
    b.harmonize_after(S);
    assert_eq!(b.counts(), [4]);
    assert_eq!(b.ops(0), OperationCounts::default());
}

#[test]
fn test_to_needy_next_to_hoggish() {
    let mut b = Bench::new(vec![MockPool::new(4, 4, 8), MockPool::new(4, 4, 8)]);
    // Run 0: both idle.
    b.harmonize_after(S);
    assert!(close(b.model.globals.budget, 8.0));
    let st = b.model.pool_stats();
    assert!(st[0].is_hoggish && st[1].is_hoggish);
    assert_eq!(st[0].potential_max_thread_count, 8.0);
    assert_eq!(
        (b.ops(0), b.ops(1)),
        (ops(0, 0, 0, 0, 0), ops(0, 0, 0, 0, 0))
    );
    // Pool 0's 4 threads busy for 59 s.
    b.pools[0].add(59.0, 59.0, 0, 4);
    b.harmonize_after(59 * S);
    assert!(close(b.model.globals.budget, 4.0));
    let st = b.model.pool_stats();
    assert!(st[0].is_needy && st[1].is_hoggish);
    assert_eq!(b.counts(), [5, 4]);
    assert_eq!(b.ops(0), ops(1, 0, 0, 0, 0));
    assert_eq!(st[1].potential_max_thread_count, 4.0);
    // 60 s idle.
    b.harmonize_after(60 * S);
    assert!(close(b.model.globals.budget, 8.0));
    assert!(b.model.pool_stats()[0].is_hoggish);
    assert_eq!(b.counts(), [4, 4]);
    assert_eq!(b.ops(0), ops(1, 0, 1, 0, 0));
}

#[test]
fn test_to_needy_next_to_starved() {
    let mut b = Bench::new(vec![MockPool::new(4, 4, 8), MockPool::new(4, 4, 8)]);
    b.harmonize_after(S);
    b.pools[0].add(59.0, 59.0, 0, 4);
    b.harmonize_after(59 * S);
    assert!(b.model.pool_stats()[0].is_needy);
    assert_eq!(b.counts(), [5, 4]);
    assert_eq!(b.ops(0), ops(1, 0, 0, 0, 0));
    // Pool 0's 5 threads get 40 s of CPU in 60 s not parked; pool 1 fully busy.
    b.pools[0].add(40.0, 60.0, 0, 5);
    b.pools[1].add(60.0, 60.0, 0, 4);
    b.harmonize_after(60 * S);
    let g = b.model.globals;
    assert!(close(g.budget, -1.0), "budget {}", g.budget);
    let lost = 9.0 - (1.0 / 0.9) * (4.0 / 6.0) * 5.0 - 4.0;
    assert!(
        (g.lost_cpu - lost).abs() < 1e-6,
        "lost {} vs {lost}",
        g.lost_cpu
    );
    let st = b.model.pool_stats();
    assert!(st[0].is_starved);
    assert!(st[1].is_needy);
    assert_eq!(b.counts(), [4, 4]);
    assert_eq!(b.ops(0), ops(1, 0, 0, 1, 0));
    assert_eq!(b.ops(1), ops(0, 0, 0, 0, 0));
    assert_eq!(st[0].potential_max_thread_count, 4.0);
    assert_eq!(st[1].potential_max_thread_count, 4.0);
}

#[test]
fn test_exchange_threads() {
    let mut b = Bench::new(vec![
        MockPool::new(1, 1, 2),
        MockPool::new(1, 1, 2),
        MockPool::new(1, 1, 2),
    ]);
    b.harmonize_after(S);
    // Pools 1 and 2 busy.
    b.pools[1].add(60.0, 60.0, 0, 1);
    b.pools[2].add(60.0, 60.0, 0, 1);
    b.harmonize_after(60 * S);
    assert!(close(b.model.globals.budget, 1.0));
    let st = b.model.pool_stats();
    assert!(st[0].is_hoggish && st[1].is_needy && st[2].is_needy);
    assert_eq!(b.counts(), [1, 2, 1]);
    assert_eq!(
        [b.ops(0), b.ops(1), b.ops(2)],
        [ops(0, 0, 0, 0, 0), ops(1, 0, 0, 0, 0), ops(0, 0, 0, 0, 0)]
    );
    // Pools 0 and 1 busy, pool 2 idle: no budget, so pool 1's extra thread moves to the
    // more important (lower index) needy pool 0.
    b.pools[0].add(60.0, 60.0, 0, 1);
    b.pools[1].add(60.0, 60.0, 0, 2);
    b.harmonize_after(60 * S);
    assert!(close(b.model.globals.budget, 0.0));
    let st = b.model.pool_stats();
    assert!(st[0].is_needy && st[1].is_needy && st[2].is_hoggish);
    assert_eq!(b.counts(), [2, 1, 1]);
    assert_eq!(
        [b.ops(0), b.ops(1), b.ops(2)],
        [ops(0, 1, 0, 0, 0), ops(1, 0, 0, 0, 1), ops(0, 0, 0, 0, 0)]
    );
}

#[test]
fn test_thread_counts() {
    let mut b = Bench::new(vec![
        MockPool::new(5, 5, 15),
        MockPool::new(5, 5, 15),
        MockPool::new(5, 5, 15),
    ]);
    let budget = 15usize;
    b.harmonize_after(S);
    let mut checked = 0;
    for i in 0..15 {
        for ii in 0..15 {
            for iii in 0..15 {
                if i + ii + iii > budget {
                    continue;
                }
                let requests = [i, ii, iii];
                let mut busy = [0; 3];
                for (p, &r) in requests.iter().enumerate() {
                    b.pools[p].set_full(r);
                    busy[p] = r.min(b.pools[p].full);
                    b.pools[p].add(60.0, 60.0, 0, busy[p]);
                }
                b.harmonize_after(60 * S);
                let local_budget = (budget - (i + ii + iii)) as f64;
                let st = b.model.pool_stats();
                for p in 0..3 {
                    let count = b.pools[p].full as f64;
                    let idle = (count - busy[p] as f64).max(0.0);
                    let want = (count + (local_budget - idle).max(0.0)).min(15.0);
                    assert_eq!(
                        st[p].potential_max_thread_count, want,
                        "requests {requests:?} pool {p} count {count}"
                    );
                    assert!((5..=15).contains(&b.pools[p].full));
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 600);
}

// YDB's iteration tests (`harmonizer_iteration_ut`) are in tests/harmonizer_mock.rs: the
// iteration ring belongs to the driver.

// ---- shared_info_ut ----

fn shared_reading(owner: usize, per_pool: &[(f64, f64)]) -> SharedThreadReading {
    SharedThreadReading {
        owner,
        per_pool: per_pool.to_vec(),
    }
}

#[test]
fn test_initialization() {
    let info = SharedInfo::init(2, &[0, 0, 1, 1]);
    assert_eq!(info.pools.len(), 2);
    assert_eq!(info.thread_count(), 4);
}

#[test]
fn test_pull() {
    // Owned (2, 1): threads 0 and 1 belong to pool 0, thread 2 to pool 1.
    let mut info = SharedInfo::init(2, &[0, 0, 1]);
    assert_eq!((info.pools[0].owned, info.pools[1].owned), (2, 1));
    let mut cum = [[(0.0, 0.0); 2]; 3];
    let mut ts = S;
    let pull = |info: &mut SharedInfo, ts: u64, cum: &[[(f64, f64); 2]; 3]| {
        let r: Vec<_> = [0, 0, 1]
            .iter()
            .zip(cum.iter())
            .map(|(&o, c)| shared_reading(o, c))
            .collect();
        info.pull(ts, &r);
    };
    pull(&mut info, ts, &cum);
    for _ in 0..1 {
        ts += S;
        for t in &mut cum {
            for p in t.iter_mut() {
                p.0 += 0.4;
                p.1 += 0.3;
            }
        }
        pull(&mut info, ts, &cum);
    }
    // Each pool: 0.4/0.3 per thread over 3 threads.
    assert!(close(info.pools[0].elapsed, 1.2) && close(info.pools[0].cpu, 0.9));
    for _ in 0..8 {
        ts += S;
        for t in &mut cum {
            for p in t.iter_mut() {
                p.0 += 0.5;
                p.1 += 0.4;
            }
        }
        pull(&mut info, ts, &cum);
    }
    assert!(close(info.pools[1].elapsed, 1.5) && close(info.pools[1].cpu, 1.2));
}

#[test]
fn test_cpu_consumption_calculation() {
    let owners = [0, 0, 1, 1];
    let mut info = SharedInfo::init(2, &owners);
    assert!(close(info.pools[0].cpu_quota, 2.0) && close(info.pools[1].cpu_quota, 2.0));
    let mut cum = [[0.0f64; 2]; 4];
    let mut ts = S;
    let pull = |info: &mut SharedInfo, ts: u64, cum: &[[f64; 2]; 4]| {
        let r: Vec<_> = owners
            .iter()
            .zip(cum.iter())
            .map(|(&o, c)| shared_reading(o, &[(c[0], c[0]), (c[1], c[1])]))
            .collect();
        info.pull(ts, &r);
    };
    pull(&mut info, ts, &cum);
    for (u0, u1, e0, q0, e1, q1) in [
        (0.45, 0.1, 1.8, 2.7, 0.4, 1.3),
        (0.5, 0.05, 2.0, 2.9, 0.2, 1.1),
    ] {
        ts += S;
        for t in &mut cum {
            t[0] += u0;
            t[1] += u1;
        }
        pull(&mut info, ts, &cum);
        let p = &info.pools;
        assert!(close(p[0].elapsed, e0), "{} vs {e0}", p[0].elapsed);
        assert!(close(p[0].cpu_quota, q0), "{} vs {q0}", p[0].cpu_quota);
        assert!(close(p[1].elapsed, e1) && close(p[1].cpu_quota, q1));
    }
}

// ---- history_ut ----

#[test]
fn value_history_splits_by_second_with_tail() {
    let mut h = ValueHistory::<8>::new();
    h.register(0, 0.0);
    // 1.5 s at 1.0 per second.
    h.register(1_500_000, 1.5);
    assert!(close(h.max(), 1.0));
    // Last second with tail: 0.5 of tail + half of the previous second.
    assert!(close(h.avg_last_second(), 1.0));
    assert!(close(h.avg_whole(1), 1.0));
    // Time going backwards clears the history.
    h.register(10, 5.0);
    assert!(close(h.max(), 0.0) && close(h.avg(), 0.0));
    // A gap longer than the window fills every slot with the mean.
    h.register(10 + 20 * S, 15.0);
    assert!(close(h.min(), 0.5) && close(h.max(), 0.5) && close(h.avg(), 0.5));
    // A zero gap adds to the tail.
    h.register(10 + 20 * S, 15.25);
    assert!(close(h.avg_with_tail(0), 0.25));
}

#[test]
fn value_history_max_min_avg_windows() {
    let mut h = ValueHistory::<4>::new();
    h.register(0, 0.0);
    let mut v = 0.0;
    for (i, per) in [1.0, 2.0, 3.0, 4.0, 5.0].iter().enumerate() {
        v += per;
        h.register((i as u64 + 1) * S, v);
    }
    // The ring keeps the last 4 whole seconds: 2, 3, 4, 5.
    assert!(close(h.max(), 5.0) && close(h.min(), 2.0));
    assert!(close(h.avg_whole(4), 3.5));
    assert!(close(h.avg_whole(2), 4.5));
    // A decreasing cumulative value is a new origin, never a negative amount.
    h.register(6 * S, 0.0);
    assert!(h.min() >= 0.0);
}

#[test]
fn every_change_stays_within_bounds_under_overload() {
    // Two pools fully busy and preempted (elapsed ≫ cpu) for many periods: counts never
    // leave [min, max], and starved pools never go below their default.
    let mut b = Bench::new(vec![MockPool::new(2, 3, 6), MockPool::new(1, 2, 5)]);
    b.pools[0].spec.priority = 1;
    b.harmonize_after(S);
    for round in 0..40 {
        let (cpu, el) = if round % 10 < 5 {
            (60.0, 60.0)
        } else {
            (20.0, 60.0)
        };
        for p in 0..2 {
            let n = b.pools[p].full;
            b.pools[p].add(cpu, el, 0, n);
        }
        b.harmonize_after(60 * S);
        for p in &b.pools {
            assert!((p.spec.min_full..=p.spec.max_full).contains(&p.full));
        }
    }
}

#[test]
fn an_idle_shared_thread_is_used_before_a_full_thread_is_granted() {
    // Pool 0 owns the one shared thread, idle: its quota is 1 and the shared free CPU 1.
    // Its 4 full threads are busy: LS cpu 4 < thread count 4 + 1, so it is not needy and
    // gains no full thread; pool 1 may use one foreign slot, pool 0 none (it owns it).
    let mut a = MockPool::new(4, 4, 8);
    a.spec.own_shared = 1;
    let mut b = Bench::new(vec![a, MockPool::new(4, 4, 8)]);
    b.model.set_shared_threads(&[0]);
    let idle = [SharedThreadReading {
        owner: 0,
        per_pool: vec![(0.0, 0.0), (0.0, 0.0)],
    }];
    b.ts += S;
    let r = |b: &Bench| -> Vec<PoolReading> {
        b.pools
            .iter()
            .map(|p| PoolReading {
                full: p.full,
                threads: p.threads.clone(),
                stopping: 0,
                ready_queues: 0,
            })
            .collect()
    };
    b.model.step(b.ts, &r(&b), &idle);
    b.pools[0].add(60.0, 60.0, 0, 4);
    b.ts += 60 * S;
    let d = b.model.step(b.ts, &r(&b), &idle);
    assert_eq!((d[0].full, d[1].full), (4, 4));
    assert_eq!((d[0].foreign_slots, d[1].foreign_slots), (Some(0), Some(1)));
    let st = b.model.pool_stats();
    assert!(close(st[0].shared_cpu_quota, 1.0));
    assert!(!st[0].is_needy);
    assert!(close(b.model.globals.shared_free_cpu, 1.0));
    assert_eq!(st[0].current_thread_count, 5);
}

/// The stats of a pool report its spec as given: name, priority, and the counts (minimum,
/// default, maximum and current, each with the pool's own shared thread).
#[test]
fn pool_stats_report_the_pool_s_spec() {
    let mut model = Model::default();
    model.add_pool(PoolSpec {
        name: "io".into(),
        min_full: 2,
        default_full: 3,
        max_full: 5,
        priority: 7,
        own_shared: 1,
    });
    model.add_pool(PoolSpec {
        name: "batch".into(),
        min_full: 1,
        default_full: 1,
        max_full: 1,
        priority: -2,
        own_shared: 0,
    });
    let st = model.pool_stats();
    assert_eq!(st.len(), 2);
    let got = |i: usize| {
        let s = &st[i];
        (
            s.name.as_str(),
            s.priority,
            s.min_thread_count,
            s.default_thread_count,
            s.max_thread_count,
            s.current_thread_count,
        )
    };
    assert_eq!(got(0), ("io", 7, 3, 4, 6, 4));
    assert_eq!(got(1), ("batch", -2, 1, 1, 1, 1));
}

/// YDB's starvation rule on one busy thread (so that `elapsed − cpu > 0.5` cannot decide):
/// a pool whose threads got less CPU than 70 % of the time they were not parked is starved;
/// at 71 % it is not (both figures after the rescale that counts 90 % as fully busy).
#[test]
fn a_pool_is_starved_below_seventy_percent_of_its_elapsed_time_in_cpu() {
    for (cpu, starved) in [(0.69, true), (0.71, false), (0.95, false), (0.5, true)] {
        let mut b = Bench::new(vec![MockPool::new(1, 2, 4)]);
        for _ in 0..20 {
            // Rescaled: a thread 90 % busy counts as fully busy.
            b.pools[0].add(cpu * 0.9, 0.9, 0, 1);
            b.harmonize_after(S);
        }
        let st = &b.model.pool_stats()[0];
        assert!(close(st.elapsed, 1.0), "elapsed {}", st.elapsed);
        assert!(close(st.cpu, cpu), "cpu {}", st.cpu);
        assert_eq!(st.is_starved, starved, "cpu {cpu} of 1.0 elapsed");
    }
}

// Rules beyond YDB's scenarios (issue 32: many cores, debug builds).
#[path = "tests_departures.rs"]
mod departures;
