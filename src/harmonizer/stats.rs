//! What the harmonizer shows: per-pool figures and counters, global figures (YDB's
//! `TPoolHarmonizerStats` and `THarmonizerStats`).

use std::time::Duration;

/// The harmonizer's operations on one pool, counted since it was added (YDB's counter
/// names, in snake case: `IncreasingThreadsByNeedyState` is
/// `increasing_threads_by_needy_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationCounts {
    /// Threads added because the pool was needy and the budget allowed it.
    pub increasing_threads_by_needy_state: u64,
    /// Threads added by an exchange (taken from a less important pool's extra threads).
    pub increasing_threads_by_exchange: u64,
    /// Threads removed because CPU was overbooked and the pool was above its default.
    pub decreasing_threads_by_starved_state: u64,
    /// Threads removed because the pool left at least one thread idle.
    pub decreasing_threads_by_hoggish_state: u64,
    /// Threads removed by an exchange (given to a more important needy pool).
    pub decreasing_threads_by_exchange: u64,
}

impl OperationCounts {
    /// The counters with YDB's names, for monitoring pages.
    pub fn named(&self) -> [(&'static str, u64); 5] {
        [
            (
                "IncreasingThreadsByNeedyState",
                self.increasing_threads_by_needy_state,
            ),
            (
                "IncreasingThreadsByExchange",
                self.increasing_threads_by_exchange,
            ),
            (
                "DecreasingThreadsByStarvedState",
                self.decreasing_threads_by_starved_state,
            ),
            (
                "DecreasingThreadsByHoggishState",
                self.decreasing_threads_by_hoggish_state,
            ),
            (
                "DecreasingThreadsByExchange",
                self.decreasing_threads_by_exchange,
            ),
        ]
    }
}

/// One pool as the harmonizer saw it at its last step.
///
/// CPU figures are in cores (seconds per second): `elapsed` is time not parked (running,
/// spinning, or runnable but preempted by the OS), `cpu` the OS's CPU time; each thread's
/// part is rescaled so that a thread busy 90 % of the time counts as 1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolHarmonizerStats {
    /// The pool's name.
    pub name: String,
    /// Its priority (larger is more important).
    pub priority: i32,
    /// Operations counted on it.
    pub counters: OperationCounts,
    /// Thread count after the last step (own shared thread included).
    pub current_thread_count: usize,
    /// Full threads after the last step (own shared thread not included).
    pub full_thread_count: usize,
    /// Default, minimum and maximum thread counts.
    pub default_thread_count: usize,
    /// See [`default_thread_count`](Self::default_thread_count).
    pub min_thread_count: usize,
    /// See [`default_thread_count`](Self::default_thread_count).
    pub max_thread_count: usize,
    /// How many threads the pool could use now: its count plus the budget not taken by
    /// its own parked threads, plus the shared CPU it could get, capped at its maximum.
    pub potential_max_thread_count: f64,
    /// The fractional part of the thread count given by shared threads.
    pub shared_cpu_quota: f64,
    /// Foreign slots the pool allows on shared threads (`None` without shared threads).
    pub foreign_slots: Option<usize>,
    /// Flags of the last step.
    pub is_needy: bool,
    /// See [`is_needy`](Self::is_needy).
    pub is_starved: bool,
    /// See [`is_needy`](Self::is_needy).
    pub is_hoggish: bool,
    /// 8-second average of time not parked, rescaled (cores).
    pub elapsed: f64,
    /// 8-second average of CPU time, rescaled (cores).
    pub cpu: f64,
    /// Last second's time not parked, rescaled (cores).
    pub last_second_elapsed: f64,
    /// Last second's CPU time, rescaled (cores).
    pub last_second_cpu: f64,
    /// Largest, smallest and mean second of CPU time over 16 s (cores, not rescaled).
    pub max_used_cpu: f64,
    /// See [`max_used_cpu`](Self::max_used_cpu).
    pub min_used_cpu: f64,
    /// See [`max_used_cpu`](Self::max_used_cpu).
    pub avg_used_cpu: f64,
    /// Largest, smallest and mean second of time not parked over 16 s (cores).
    pub max_elapsed_cpu: f64,
    /// See [`max_elapsed_cpu`](Self::max_elapsed_cpu).
    pub min_elapsed_cpu: f64,
    /// See [`max_elapsed_cpu`](Self::max_elapsed_cpu).
    pub avg_elapsed_cpu: f64,
    /// Activations of the last period (from the pool's latency histogram).
    pub activations: u64,
    /// Median and 99th percentile activation latency of the last period (upper bound of
    /// the histogram bucket), `None` without activations.
    pub latency_p50: Option<Duration>,
    /// See [`latency_p50`](Self::latency_p50).
    pub latency_p99: Option<Duration>,
    /// The worst activation latency of the last period (upper bound of its bucket;
    /// `None` without activations or above the histogram's range).
    pub latency_max: Option<Duration>,
}

impl PoolHarmonizerStats {
    /// The pool's state after the last step, by the flags' precedence: `"starved"`,
    /// `"needy"`, `"hoggish"`, or `"balanced"` when none is set.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::harmonizer::PoolHarmonizerStats;
    ///
    /// let mut p = PoolHarmonizerStats::default();
    /// assert_eq!(p.state_name(), "balanced");
    /// p.is_needy = true;
    /// p.is_starved = true;
    /// assert_eq!(p.state_name(), "starved");
    /// ```
    pub fn state_name(&self) -> &'static str {
        if self.is_starved {
            "starved"
        } else if self.is_needy {
            "needy"
        } else if self.is_hoggish {
            "hoggish"
        } else {
            "balanced"
        }
    }
}

/// A snapshot of a harmonizer: global figures and every pool
/// ([`Harmonizer::stats`](super::Harmonizer::stats)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HarmonizerStats {
    /// Steps run so far.
    pub iterations: u64,
    /// The CPU budget in cores: Σ default thread counts (or the builder's budget).
    pub total_cores: f64,
    /// Budget left at the last step: total − Σ elapsed (8-second averages).
    pub budget: f64,
    /// The same with the last second.
    pub budget_last_second: f64,
    /// CPU lost to preemption: max(0, Σ elapsed − Σ cpu).
    pub lost_cpu: f64,
    /// Idle capacity of the shared threads (cores).
    pub shared_free_cpu: f64,
    /// Largest and smallest second of CPU time of all pools over 16 s (cores).
    pub max_used_cpu: f64,
    /// See [`max_used_cpu`](Self::max_used_cpu).
    pub min_used_cpu: f64,
    /// Largest and smallest second of time not parked of all pools over 16 s (cores).
    pub max_elapsed_cpu: f64,
    /// See [`max_elapsed_cpu`](Self::max_elapsed_cpu).
    pub min_elapsed_cpu: f64,
    /// One entry per pool, in the order they were added.
    pub pools: Vec<PoolHarmonizerStats>,
}
