//! The JSON views of elastic pools and harmonizers: a dispatcher's thread range, its
//! threads' busy, CPU and parked time, its activation latencies, and each attached
//! harmonizer's last step.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::harmonizer::{HarmonizerStats, PoolHarmonizerStats};

/// An elastic pool's own figures (`thread_limits` pools), under a dispatcher.
#[derive(Serialize, Default)]
pub(crate) struct ElasticView {
    /// Threads the pool is asked to run now, and its range.
    target: Option<usize>,
    min: Option<usize>,
    default: Option<usize>,
    max: Option<usize>,
    /// Activations (a demand's push to its handler's start) by latency bucket: the
    /// bucket's upper bound in µs → activations counted since the pool started. Only
    /// non-empty buckets.
    activation_lt_us: BTreeMap<u64, usize>,
    /// The harmonizer's operations on the pool (YDB's counter names in snake case) and
    /// its state flags at the last step.
    harmonizer: BTreeMap<String, usize>,
    /// Demands this pool's shared thread ran for other pools.
    foreign_events: Option<usize>,
}

impl ElasticView {
    /// Takes the quantity `suffix = value` of an elastic pool; false if it is not one.
    pub(crate) fn take(this: &mut Option<Self>, suffix: &str, value: usize) -> bool {
        if let Some(t) = suffix.strip_prefix("threads.") {
            let e = this.get_or_insert_with(Self::default);
            match t {
                "target" => e.target = Some(value),
                "min" => e.min = Some(value),
                "default" => e.default = Some(value),
                "max" => e.max = Some(value),
                _ => return false,
            }
        } else if let Some(bound) = suffix
            .strip_prefix("activation.lt_")
            .and_then(|b| b.strip_suffix("us"))
            .and_then(|b| b.parse::<u64>().ok())
        {
            let e = this.get_or_insert_with(Self::default);
            if value > 0 {
                e.activation_lt_us.insert(bound, value);
            }
        } else if let Some(name) = suffix.strip_prefix("harmonizer.") {
            let e = this.get_or_insert_with(Self::default);
            e.harmonizer.insert(name.to_owned(), value);
        } else if suffix == "foreign.events" {
            this.get_or_insert_with(Self::default).foreign_events = Some(value);
        } else {
            return false;
        }
        true
    }
}

/// One attached harmonizer's last step (`harmonizers` of `GET /api/dispatchers`).
#[derive(Serialize)]
pub(crate) struct HarmonizerView {
    iterations: u64,
    /// The CPU budget and what was left of it at the last step (cores).
    total_cores: f64,
    budget: f64,
    budget_last_second: f64,
    /// CPU lost to the OS preempting the pools' threads (cores).
    lost_cpu: f64,
    shared_free_cpu: f64,
    pools: Vec<HarmonizedPoolView>,
}

#[derive(Serialize)]
struct HarmonizedPoolView {
    name: String,
    priority: i32,
    /// `needy`, `starved`, `hoggish` or `balanced`: the last step's state.
    state: &'static str,
    threads: usize,
    full_threads: usize,
    min_threads: usize,
    default_threads: usize,
    max_threads: usize,
    potential_max_threads: f64,
    /// Time not parked and CPU time, 8-second averages and the last second (cores).
    elapsed: f64,
    cpu: f64,
    last_second_elapsed: f64,
    last_second_cpu: f64,
    /// Activations of the last period and their latency (upper bound of the bucket, µs).
    activations: u64,
    latency_p50_us: Option<u128>,
    latency_p99_us: Option<u128>,
    latency_max_us: Option<u128>,
    /// The harmonizer's operations on the pool, by YDB's names.
    operations: BTreeMap<&'static str, u64>,
}

impl HarmonizedPoolView {
    fn new(p: &PoolHarmonizerStats) -> Self {
        let state = p.state_name();
        HarmonizedPoolView {
            name: p.name.clone(),
            priority: p.priority,
            state,
            threads: p.current_thread_count,
            full_threads: p.full_thread_count,
            min_threads: p.min_thread_count,
            default_threads: p.default_thread_count,
            max_threads: p.max_thread_count,
            potential_max_threads: p.potential_max_thread_count,
            elapsed: p.elapsed,
            cpu: p.cpu,
            last_second_elapsed: p.last_second_elapsed,
            last_second_cpu: p.last_second_cpu,
            activations: p.activations,
            latency_p50_us: p.latency_p50.map(|d| d.as_micros()),
            latency_p99_us: p.latency_p99.map(|d| d.as_micros()),
            latency_max_us: p.latency_max.map(|d| d.as_micros()),
            operations: p.counters.named().into_iter().collect(),
        }
    }
}

impl HarmonizerView {
    pub(crate) fn new(s: &HarmonizerStats) -> Self {
        HarmonizerView {
            iterations: s.iterations,
            total_cores: s.total_cores,
            budget: s.budget,
            budget_last_second: s.budget_last_second,
            lost_cpu: s.lost_cpu,
            shared_free_cpu: s.shared_free_cpu,
            pools: s.pools.iter().map(HarmonizedPoolView::new).collect(),
        }
    }
}
