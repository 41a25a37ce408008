//! The decision step (YDB's `THarmonizer::HarmonizeImpl`, revision L of the spec), pure:
//! no threads, no clock reads. The driver feeds it readings and applies its answers.
//!
//! One step, at instant `ts` (the module docs of `harmonizer` give the rules and where
//! they depart from YDB's):
//! 1. **Pull**: per thread slot with a thread, register cumulative CPU and elapsed
//!    seconds in a `ValueHistory<8>` (started anew when a thread starts in an empty slot,
//!    from the previous step); per pool, sum the threads' 8-second average and last
//!    second (LS), each over the time measured and rescaled by `x / 0.9` capped to
//!    `[0, 1]`, plus its shared-thread figures; decide the flags: starved
//!    `IsStarved(elapsed, cpu) ∨ IsStarved(LS elapsed, LS cpu)` with `IsStarved(e, c) =
//!    max(e, c) > 0.1 ∧ (c < 0.7·e ∨ (e − c > 0.5 ∧ c < 0.9·e))`; needy `LS cpu ≥ thread
//!    count ∨ (LS cpu ≥ full + own + 0.5 ∧ full threads' LS cpu ≥ full − 1) ∨ (full
//!    threads' LS cpu ≥ full − 0.5 ∧ ready queues > 0)`; hoggish: not needy and the full
//!    threads' elapsed and LS elapsed both `≤ full − 1`. Budget = cores (or Σ default
//!    thread counts) − Σ elapsed; its LS twin with LS elapsed; processing budget = LS
//!    budget − shared free CPU.
//! 2. **Branch**: starvation present (a starved pool, or LS budget < −1) and overbooked
//!    (−LS budget − ½) > threads still stopping → **starved**: least important pools first,
//!    each above its default loses threads one by one until overbooked ≤ stopping.
//!    Otherwise, unless starvation is present with LS budget < 0 → **needy**: most
//!    important first, a needy pool gains `min(ready queues (≥ 1), max − full,
//!    ⌊processing budget (+ extra foreign CPU) + ½⌋)` threads while the processing budget
//!    is > 0, paying 1 each.
//! 3. **Exchange** when the processing budget is < 1: needy pools, most important first,
//!    each gain one thread as long as the other pools hold enough threads above their
//!    default; the promised threads are then taken from the least important pools, only
//!    above their default.
//! 4. **Hoggish**: each hoggish pool above its minimum with ≥ 1 free CPU loses one thread
//!    (not at a pool's first measured step).
//! 5. **Potential max**: `min(max, full + max(0, budget − parked))` (floored without a
//!    shared pool) plus the shared CPU it could get.
//!
//! Importance: larger priority first, then lower pool index.

use super::history::ValueHistory;
use super::shared::{SharedInfo, SharedThreadReading};
use super::stats::{OperationCounts, PoolHarmonizerStats};

/// A thread's cumulative figures, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ThreadReading {
    /// OS CPU time of the thread.
    pub(crate) cpu_s: f64,
    /// Time not parked (running, or runnable and preempted; the driver leaves spinning
    /// out).
    pub(crate) elapsed_s: f64,
    /// Whether a thread occupies the slot: `None` when the pool does not say (YDB's
    /// mock: every slot counts); `Some(false)`: no thread, the slot counts nothing.
    pub(crate) running: Option<bool>,
}

/// Static facts of one pool, in full threads (its own shared thread not counted).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PoolSpec {
    pub(crate) name: String,
    pub(crate) min_full: usize,
    pub(crate) default_full: usize,
    pub(crate) max_full: usize,
    pub(crate) priority: i32,
    /// Shared threads owned (0 or 1).
    pub(crate) own_shared: usize,
}

impl PoolSpec {
    /// Bounds made consistent: `min ≤ default ≤ max`, default at least 1.
    pub(crate) fn normalized(mut self) -> Self {
        self.default_full = self.default_full.max(1);
        self.max_full = self.max_full.max(self.default_full);
        self.min_full = self.min_full.min(self.default_full);
        self
    }
    fn default_count(&self) -> f64 {
        (self.default_full + self.own_shared) as f64
    }
    fn max_count(&self) -> f64 {
        (self.max_full + self.own_shared) as f64
    }
    fn clamp(&self, n: usize) -> usize {
        n.clamp(self.min_full, self.max_full)
    }
}

/// One pool's reading for a step.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PoolReading {
    /// The full thread count in force (the pool's target).
    pub(crate) full: usize,
    /// Per thread slot, cumulative; slots keep their index across readings.
    pub(crate) threads: Vec<ThreadReading>,
    /// Threads told to stop that have not stopped yet.
    pub(crate) stopping: usize,
    /// Queues ready and not taken by a thread when the pool was read: work that more
    /// threads could start on now.
    pub(crate) ready_queues: usize,
}

/// What a step decided for one pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolDecision {
    /// The new full thread count (within `[min, max]`).
    pub(crate) full: usize,
    /// Foreign slots allowed on the shared threads, when a shared pool exists.
    pub(crate) foreign_slots: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Consumption {
    elapsed: f64,
    cpu: f64,
    ls_elapsed: f64,
    ls_cpu: f64,
}

#[derive(Debug)]
struct PoolState {
    spec: PoolSpec,
    /// Per thread slot: elapsed and CPU histories, and whether a thread ran in the slot at
    /// the last reading (a thread starting in an empty slot starts its histories anew).
    threads: Vec<(ValueHistory<8>, ValueHistory<8>, bool)>,
    used: ValueHistory<16>,
    elapsed: ValueHistory<16>,
    counters: OperationCounts,
    stats: PoolHarmonizerStats,
}

/// Rescale: a thread at least 90 % busy counts as fully busy.
fn rescale(x: f64) -> f64 {
    (x / 0.9).clamp(0.0, 1.0)
}

/// Starved: the threads got less CPU than 70 % of the time they were not parked, or lost
/// more than half a core *and* more than a tenth of that time (YDB's second test, the
/// absolute half core alone, judges every pool of 9 threads or more starved as soon as
/// each loses 6 %: a helper thread of the process is enough).
fn is_starved(elapsed: f64, cpu: f64) -> bool {
    elapsed.max(cpu) > 0.1
        && (cpu < 0.7 * elapsed || (elapsed - cpu > 0.5 && cpu < LOST_SHARE * elapsed))
}

/// A pool loses CPU only when below this share of its elapsed time (with the half core).
const LOST_SHARE: f64 = 0.9;

/// Starvation is present when the last second's budget is below this (more than a whole
/// core overbooked; YDB: −0.1). A grant may overbook by up to [`GRANT_ROUNDING`], so the
/// gap between the two keeps a pool from gaining a thread at one step and losing it at the
/// next.
const OVERBOOKED_LS: f64 = -1.0;

/// A more important pool's use of a core below this fraction of it, or this close to a
/// whole core, reserves nothing for it (see the needy rule).
const PART_TOLERANCE: f64 = 0.05;

/// A thread is granted when the budget left covers all but this part of a core (YDB: the
/// whole core). The pools' figures leave out parked and spinning time, so a pool that is
/// mostly parked does not keep another *of equal or higher importance* from the last
/// core; a less important pool leaves whole the cores a more important pool uses in part.
const GRANT_ROUNDING: f64 = 0.5;

/// A pool whose threads' last-second CPU is within this of its thread count has every
/// thread busy (for the ready-queue need).
const ALL_BUSY_MARGIN: f64 = 0.5;

/// Global figures of the last step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Globals {
    pub(crate) total_cores: f64,
    pub(crate) budget: f64,
    pub(crate) budget_ls: f64,
    pub(crate) lost_cpu: f64,
    pub(crate) shared_free_cpu: f64,
    pub(crate) max_used_cpu: f64,
    pub(crate) min_used_cpu: f64,
    pub(crate) max_elapsed_cpu: f64,
    pub(crate) min_elapsed_cpu: f64,
    pub(crate) iteration: u64,
}

/// The harmonizer's state between steps.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pools: Vec<PoolState>,
    shared: Option<SharedInfo>,
    used: ValueHistory<16>,
    elapsed: ValueHistory<16>,
    pub(crate) globals: Globals,
    /// The budget in cores; `None`: Σ default counts (YDB's).
    total_cores: Option<f64>,
    /// The instant of the last step.
    prev_ts: Option<u64>,
}

impl Model {
    /// Adds a pool; returns its index. Its potential max starts at its max.
    pub(crate) fn add_pool(&mut self, spec: PoolSpec) -> usize {
        let spec = spec.normalized();
        let stats = PoolHarmonizerStats {
            name: spec.name.clone(),
            potential_max_thread_count: spec.max_count(),
            current_thread_count: spec.default_full + spec.own_shared,
            default_thread_count: spec.default_full + spec.own_shared,
            min_thread_count: spec.min_full + spec.own_shared,
            max_thread_count: spec.max_full + spec.own_shared,
            priority: spec.priority,
            ..PoolHarmonizerStats::default()
        };
        self.pools.push(PoolState {
            spec,
            threads: Vec::new(),
            used: ValueHistory::new(),
            elapsed: ValueHistory::new(),
            counters: OperationCounts::default(),
            stats,
        });
        self.pools.len() - 1
    }

    /// Sets the CPU budget in cores (`None`: the sum of the pools' default counts).
    pub(crate) fn set_total_cores(&mut self, cores: Option<f64>) {
        self.total_cores = cores;
    }

    /// The CPU budget in cores.
    pub(crate) fn total_cores(&self) -> f64 {
        self.total_cores
            .unwrap_or_else(|| self.pools.iter().map(|p| p.spec.default_count()).sum())
    }

    /// Declares the shared threads: one entry per thread, naming its owner pool.
    ///
    /// Only the tests use it: the core's hook does not report a shared thread's figures
    /// per pool it served, so the driver models a shared thread as one of its owner's.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn set_shared_threads(&mut self, owners: &[usize]) {
        self.shared = (!owners.is_empty()).then(|| SharedInfo::init(self.pools.len(), owners));
    }

    /// The stats of every pool, as of the last step.
    pub(crate) fn pool_stats(&self) -> Vec<PoolHarmonizerStats> {
        self.pools
            .iter()
            .map(|p| {
                let mut s = p.stats.clone();
                s.counters = p.counters;
                s
            })
            .collect()
    }

    /// Least important first: priority ascending, then index descending.
    fn priority_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.pools.len()).collect();
        order.sort_by(|&a, &b| {
            self.pools[a]
                .spec
                .priority
                .cmp(&self.pools[b].spec.priority)
                .then(b.cmp(&a))
        });
        order
    }

    /// Takes `readings` at `ts_us` as the starting point of every history, deciding
    /// nothing (no step is counted): the driver's first reading, when it is built, so that
    /// its first step has a whole period measured.
    pub(crate) fn prime(&mut self, ts_us: u64, readings: &[PoolReading]) {
        let (mut sum_cpu, mut sum_el) = (0.0, 0.0);
        for (pool, reading) in self.pools.iter_mut().zip(readings) {
            if pool.threads.len() < reading.threads.len() {
                pool.threads
                    .resize_with(reading.threads.len(), Default::default);
            }
            let (mut acc_cpu, mut acc_el) = (0.0, 0.0);
            for ((el_h, cpu_h, was_running), r) in pool.threads.iter_mut().zip(&reading.threads) {
                acc_cpu += r.cpu_s;
                acc_el += r.elapsed_s;
                el_h.register(ts_us, r.elapsed_s);
                cpu_h.register(ts_us, r.cpu_s);
                *was_running = r.running != Some(false);
            }
            pool.used.register(ts_us, acc_cpu);
            pool.elapsed.register(ts_us, acc_el);
            sum_cpu += acc_cpu;
            sum_el += acc_el;
        }
        self.used.register(ts_us, sum_cpu);
        self.elapsed.register(ts_us, sum_el);
        self.prev_ts = Some(ts_us);
    }

    /// Runs one step at `ts_us` with one reading per pool (in pool order) and the shared
    /// threads' readings; returns one decision per pool.
    pub(crate) fn step(
        &mut self,
        ts_us: u64,
        readings: &[PoolReading],
        shared_threads: &[SharedThreadReading],
    ) -> Vec<PoolDecision> {
        let n = self.pools.len();
        self.globals.iteration += 1;
        if let Some(shared) = &mut self.shared {
            shared.pull(ts_us, shared_threads);
        }
        let empty = PoolReading::default();
        let mut full: Vec<usize> = (0..n)
            .map(|i| {
                let r = readings.get(i).unwrap_or(&empty);
                self.pools[i].spec.clamp(r.full)
            })
            .collect();

        // 1. Pull.
        let prev_ts = self.prev_ts.replace(ts_us);
        let mut pool_all = vec![Consumption::default(); n];
        let mut pool_full = vec![Consumption::default(); n];
        let (mut sum_cpu_total, mut sum_elapsed_total) = (0.0, 0.0);
        let mut total_cores = 0.0;
        let mut stopping: f64 = 0.0;
        let mut starved_present = false;
        let mut needy_flags = vec![false; n];
        // Threads each needy pool could use now beyond its count (at least 1).
        let mut wanted = vec![1usize; n];
        let mut hoggish: Vec<(usize, f64)> = Vec::new();
        let (mut sum_e, mut sum_c, mut sum_ls_e) = (0.0, 0.0, 0.0);
        for i in 0..n {
            let reading = readings.get(i).unwrap_or(&empty);
            let pool = &mut self.pools[i];
            if pool.threads.len() < reading.threads.len() {
                pool.threads
                    .resize_with(reading.threads.len(), Default::default);
            }
            let mut fc = Consumption::default();
            let (mut acc_cpu, mut acc_el) = (0.0, 0.0);
            let mut measured = false;
            for (t, (el_h, cpu_h, was_running)) in pool.threads.iter_mut().enumerate() {
                let r = reading.threads.get(t).copied();
                // A slot with no reading keeps its last value: its time goes on, idle.
                let (el, cpu, running) = match r {
                    Some(r) => (r.elapsed_s, r.cpu_s, r.running),
                    None => (el_h.last_value(), cpu_h.last_value(), None),
                };
                acc_cpu += cpu;
                acc_el += el;
                match running {
                    // No thread: the slot counts nothing (its figures are kept up to
                    // date), and its next thread starts anew.
                    Some(false) => {
                        el_h.register(ts_us, el);
                        cpu_h.register(ts_us, cpu);
                        *was_running = false;
                        continue;
                    }
                    Some(true) if !*was_running => {
                        // A thread new in the slot: measured from the last step (when the
                        // harmonizer started it), not over a window padded with the time
                        // it did not exist.
                        let (el0, cpu0) = (el_h.last_value(), cpu_h.last_value());
                        *el_h = ValueHistory::new();
                        *cpu_h = ValueHistory::new();
                        if let Some(prev) = prev_ts.filter(|&p| p < ts_us) {
                            el_h.register(prev, el0);
                            cpu_h.register(prev, cpu0);
                        }
                        *was_running = true;
                    }
                    _ => {}
                }
                el_h.register(ts_us, el);
                cpu_h.register(ts_us, cpu);
                measured |= el_h.covered_us() > 0;
                // Averages over the time measured (a window of 8 s and the last second,
                // each shortened to the history's length while it is younger).
                fc.elapsed += rescale(el_h.avg_covered(8));
                fc.cpu += rescale(cpu_h.avg_covered(8));
                fc.ls_elapsed += rescale(el_h.avg_covered(1));
                fc.ls_cpu += rescale(cpu_h.avg_covered(1));
            }
            let mut ac = fc;
            let (mut quota, mut own) = (0.0, 0);
            if let Some(shared) = &self.shared {
                let sp = &shared.pools[i];
                ac.elapsed += sp.elapsed;
                ac.cpu += sp.cpu;
                ac.ls_elapsed += sp.elapsed;
                ac.ls_cpu += sp.cpu;
                quota = sp.cpu_quota;
                own = sp.owned.min(1);
            }
            pool.used.register(ts_us, acc_cpu);
            pool.elapsed.register(ts_us, acc_el);
            sum_cpu_total += acc_cpu;
            sum_elapsed_total += acc_el;

            let spec = &pool.spec;
            total_cores += spec.default_count();
            stopping += reading.stopping as f64;
            let f = full[i] as f64;
            let thread_count = f + quota;
            let starved = is_starved(ac.elapsed, ac.cpu) || is_starved(ac.ls_elapsed, ac.ls_cpu);
            starved_present |= starved;
            let more_than_expected = ac.ls_cpu >= f + own as f64 + 0.5 && fc.ls_cpu >= f - 1.0;
            // Measured need: every thread busy and queues ready that no thread took.
            let all_busy = fc.ls_cpu >= f - ALL_BUSY_MARGIN;
            let ready = if all_busy { reading.ready_queues } else { 0 };
            let needy = ac.ls_cpu >= thread_count || more_than_expected || ready > 0;
            wanted[i] = ready.max(1);
            let hog = !needy && fc.elapsed <= f - 1.0 && fc.ls_elapsed <= f - 1.0;
            // A pool with no time measured yet (the first step) has shown no idle thread.
            if hog && measured {
                hoggish.push((i, (f - fc.elapsed).min(f - fc.ls_elapsed)));
            }
            needy_flags[i] = needy;
            sum_e += ac.elapsed;
            sum_c += ac.cpu;
            sum_ls_e += ac.ls_elapsed;
            pool_all[i] = ac;
            pool_full[i] = fc;
            let st = &mut pool.stats;
            st.is_needy = needy;
            st.is_starved = starved;
            st.is_hoggish = hog;
            st.elapsed = ac.elapsed;
            st.cpu = ac.cpu;
            st.last_second_elapsed = ac.ls_elapsed;
            st.last_second_cpu = ac.ls_cpu;
            st.shared_cpu_quota = quota;
            st.max_used_cpu = pool.used.max();
            st.min_used_cpu = pool.used.min();
            st.avg_used_cpu = pool.used.avg();
            st.max_elapsed_cpu = pool.elapsed.max();
            st.min_elapsed_cpu = pool.elapsed.min();
            st.avg_elapsed_cpu = pool.elapsed.avg();
        }
        // Threads above the pools' defaults: Σ max(0, full − default).
        let mut additional: i64 = (0..n)
            .map(|i| (full[i] as i64 - self.pools[i].spec.default_full as i64).max(0))
            .sum();
        self.used.register(ts_us, sum_cpu_total);
        self.elapsed.register(ts_us, sum_elapsed_total);
        let free_cpu = self.shared.as_ref().map_or(0.0, |s| s.free_cpu);
        if let Some(cores) = self.total_cores {
            total_cores = cores;
        }
        let budget = total_cores - sum_e;
        let budget_ls = total_cores - sum_ls_e;
        if budget_ls < OVERBOOKED_LS {
            starved_present = true;
        }
        let mut processing_budget = budget_ls - free_cpu;
        self.globals = Globals {
            total_cores,
            budget,
            budget_ls,
            lost_cpu: (sum_e - sum_c).max(0.0),
            shared_free_cpu: free_cpu,
            max_used_cpu: self.used.max(),
            min_used_cpu: self.used.min(),
            max_elapsed_cpu: self.elapsed.max(),
            min_elapsed_cpu: self.elapsed.min(),
            iteration: self.globals.iteration,
        };
        let order = self.priority_order();
        // Most important first: priority descending, then index ascending.
        let mut needy_order: Vec<usize> = (0..n).filter(|&i| needy_flags[i]).collect();
        needy_order.sort_by(|&a, &b| {
            self.pools[b]
                .spec
                .priority
                .cmp(&self.pools[a].spec.priority)
                .then(a.cmp(&b))
        });
        let mut still_needy = needy_flags.clone();

        // 2. Starved or needy. The pools shed only what they overbook beyond a grant's
        // rounding (so that a grant is not undone at the next step), and starvation stops
        // growth only while the pools overbook the budget: threads that lose CPU while
        // they do not outnumber the budget lose it to other processes, and shedding or
        // not growing would hand it to them.
        // Overbooking is judged on the last second, as growth is: the 8-second average
        // still counts a pool the load has left (YDB: the 8-second budget).
        let overbooked = -budget_ls - GRANT_ROUNDING;
        let growth_blocked = starved_present && budget_ls < 0.0;
        if starved_present && overbooked > stopping {
            'pools: for &i in &order {
                let quota = self.shared.as_ref().map_or(0.0, |s| s.pools[i].cpu_quota);
                if pool_all[i].elapsed > full[i] as f64 + quota {
                    continue;
                }
                if let Some(s) = &self.shared {
                    let own = s.pools[i].owned.min(1);
                    let allowed = self.foreign_slots(i, full[i]).unwrap_or(0);
                    if quota > (own + allowed) as f64 {
                        continue;
                    }
                }
                let default_full = self.pools[i].spec.default_full;
                while full[i] > default_full {
                    full[i] -= 1;
                    self.pools[i].counters.decreasing_threads_by_starved_state += 1;
                    additional -= 1;
                    stopping += 1.0;
                    if overbooked <= stopping {
                        break 'pools;
                    }
                }
            }
        } else if !growth_blocked {
            for &i in &needy_order {
                let spec = &self.pools[i].spec;
                let foreign = self
                    .shared
                    .as_ref()
                    .map_or(0.0, |s| s.pools[i].foreign_elapsed);
                let allowed = self.foreign_slots(i, full[i]).unwrap_or(0) as f64;
                let extra_foreign = (foreign - (allowed - 1.0).max(0.0)).max(0.0);
                // The cores that more important pools use in part stay theirs. A use within
                // `PART_TOLERANCE` of a whole core (a parked pool's wake-ups, a float sum a
                // hair over an integer) reserves nothing: the decision must not flip on
                // whether one wake-up fell in the last second.
                let reserved: f64 = (0..n)
                    .filter(|&j| self.pools[j].spec.priority > spec.priority)
                    .map(|j| {
                        let f = pool_all[j].ls_elapsed.max(0.0).fract();
                        if !(PART_TOLERANCE..=1.0 - PART_TOLERANCE).contains(&f) {
                            0.0
                        } else {
                            1.0 - f
                        }
                    })
                    .sum();
                let budget_i = processing_budget - reserved;
                if budget_i > 0.0 && full[i] < spec.max_full {
                    // As many threads as it can use, as the budget covers (each within
                    // `GRANT_ROUNDING` of a core), up to its maximum.
                    let affordable = (budget_i + extra_foreign + GRANT_ROUNDING).floor().max(0.0);
                    let k = wanted[i]
                        .min(affordable as usize)
                        .min(spec.max_full - full[i]);
                    if k > 0 {
                        full[i] += k;
                        self.pools[i].counters.increasing_threads_by_needy_state += k as u64;
                        still_needy[i] = false;
                        additional += k as i64;
                        processing_budget -= k as f64;
                    }
                }
            }
        }

        // 3. Exchange.
        if processing_budget < 1.0 && !needy_order.is_empty() {
            let mut promised: i64 = 0;
            let mut extra_left = additional;
            for &i in &needy_order {
                let spec = &self.pools[i].spec;
                extra_left -= full[i] as i64 - spec.default_full as i64;
                if extra_left < promised + 1 {
                    break;
                }
                let quota = self.shared.as_ref().map_or(0.0, |s| s.pools[i].cpu_quota);
                if full[i] as f64 + quota + 1.0 > spec.max_count() || full[i] >= spec.max_full {
                    continue;
                }
                if !still_needy[i] {
                    continue;
                }
                full[i] += 1;
                self.pools[i].counters.increasing_threads_by_exchange += 1;
                still_needy[i] = false;
                promised += 1;
            }
            for &i in &order {
                if promised <= 0 {
                    break;
                }
                let spec = &self.pools[i].spec;
                let above = full[i].saturating_sub(spec.default_full) as i64;
                let take = above.min(promised);
                if take == 0 {
                    continue;
                }
                promised -= take;
                full[i] -= take as usize;
                self.pools[i].counters.decreasing_threads_by_exchange += take as u64;
            }
        }

        // 4. Hoggish.
        for &(i, free) in &hoggish {
            if full[i] > self.pools[i].spec.min_full && free >= 1.0 {
                full[i] -= 1;
                self.pools[i].counters.decreasing_threads_by_hoggish_state += 1;
            }
        }

        // 5. Potential max, stats, decisions.
        let budget_wo_shared = (budget - free_cpu).max(0.0);
        let mut decisions = Vec::with_capacity(n);
        for i in 0..n {
            let spec = self.pools[i].spec.clone();
            debug_assert!(full[i] >= spec.min_full && full[i] <= spec.max_full);
            let f = full[i] as f64;
            let parked = (f - pool_full[i].elapsed).max(0.0);
            let mut base = spec
                .max_count()
                .min(f + (budget_wo_shared - parked).max(0.0));
            let mut shared_cap = 0.0;
            if let Some(s) = &self.shared {
                let sp = &s.pools[i];
                base = base.max(0.0);
                let threads = self.foreign_slots(i, full[i]).unwrap_or(0) + sp.owned.min(1);
                shared_cap = (sp.elapsed + free_cpu).min(threads.min(s.thread_count()) as f64);
            } else {
                base = base.floor();
            }
            let potential = spec.max_count().min(base + shared_cap);
            let foreign_slots = self.foreign_slots(i, full[i]);
            let st = &mut self.pools[i].stats;
            st.potential_max_thread_count = potential;
            st.current_thread_count = full[i] + spec.own_shared;
            st.full_thread_count = full[i];
            st.foreign_slots = foreign_slots;
            decisions.push(PoolDecision {
                full: full[i],
                foreign_slots,
            });
        }
        decisions
    }

    /// Foreign slots of pool `i` at `full` threads (spec §2.3 step 6, L):
    /// `min(max count − full − own, shared threads − own)`; `None` without shared threads.
    fn foreign_slots(&self, i: usize, full: usize) -> Option<usize> {
        let s = self.shared.as_ref()?;
        let own = s.pools[i].owned.min(1);
        let spec = &self.pools[i].spec;
        let slots = (spec.max_full + spec.own_shared).saturating_sub(full + own);
        Some(slots.min(s.thread_count().saturating_sub(own)))
    }
}
