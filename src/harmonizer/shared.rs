//! Shared threads' figures per pool (YDB's `TSharedInfo`), pure: no clock, no threads.
//!
//! A shared thread is owned by one pool and may serve others. Each period the
//! harmonizer reads, per shared thread and per pool, the cumulative seconds the thread
//! spent not parked (elapsed) and on CPU for that pool. From the last second:
//! - a pool's shared `elapsed`/`cpu`: summed over all shared threads;
//! - a thread's idle part: `max(0, 1 − Σ elapsed of all pools on it)`;
//! - `free_cpu`: the idle parts of all shared threads;
//! - a pool's `cpu_quota`: its elapsed on any shared thread plus the idle parts of the
//!   threads it owns — the fractional part of its thread count;
//! - a pool's `foreign_elapsed`/`foreign_cpu`: cumulative seconds on threads it does not
//!   own.

use super::history::ValueHistory;

/// One shared thread's cumulative figures, per pool it served (seconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SharedThreadReading {
    /// Index of the owner pool.
    pub(crate) owner: usize,
    /// `(elapsed_s, cpu_s)` per pool index, cumulative; missing pools count as 0.
    pub(crate) per_pool: Vec<(f64, f64)>,
}

/// A pool's shared-thread figures of the last second.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SharedPoolFigures {
    pub(crate) elapsed: f64,
    pub(crate) cpu: f64,
    pub(crate) cpu_quota: f64,
    pub(crate) foreign_elapsed: f64,
    pub(crate) foreign_cpu: f64,
    /// Shared threads this pool owns.
    pub(crate) owned: usize,
}

#[derive(Debug, Default)]
pub(crate) struct SharedInfo {
    /// `[thread][pool]` → (elapsed history, cpu history).
    histories: Vec<Vec<(ValueHistory<8>, ValueHistory<8>)>>,
    owners: Vec<usize>,
    pub(crate) pools: Vec<SharedPoolFigures>,
    pub(crate) free_cpu: f64,
}

impl SharedInfo {
    /// Sizes the tables: see `Model::set_shared_threads` for why only tests call it.
    #[cfg_attr(not(test), allow(dead_code))]
    /// Sizes the tables: `pool_count` pools, one entry per shared thread naming its owner.
    pub(crate) fn init(pool_count: usize, owners: &[usize]) -> Self {
        let mut pools = vec![SharedPoolFigures::default(); pool_count];
        for &o in owners {
            if let Some(p) = pools.get_mut(o) {
                p.owned += 1;
            }
        }
        // Before the first reading every owned thread is idle: the quota is the count.
        for p in &mut pools {
            p.cpu_quota = p.owned as f64;
        }
        Self {
            histories: owners
                .iter()
                .map(|_| vec![(ValueHistory::new(), ValueHistory::new()); pool_count])
                .collect(),
            owners: owners.to_vec(),
            free_cpu: owners.len() as f64,
            pools,
        }
    }

    pub(crate) fn thread_count(&self) -> usize {
        self.owners.len()
    }

    /// Reads the shared threads' cumulative figures at `ts_us`.
    pub(crate) fn pull(&mut self, ts_us: u64, threads: &[SharedThreadReading]) {
        let pool_count = self.pools.len();
        for p in &mut self.pools {
            p.elapsed = 0.0;
            p.cpu = 0.0;
            p.cpu_quota = 0.0;
            p.foreign_elapsed = 0.0;
            p.foreign_cpu = 0.0;
        }
        self.free_cpu = 0.0;
        for (t, hist) in self.histories.iter_mut().enumerate() {
            let reading = threads.get(t);
            let mut busy = 0.0;
            for (p, (el, cpu)) in hist.iter_mut().enumerate() {
                let (e, c) = reading
                    .and_then(|r| r.per_pool.get(p).copied())
                    .unwrap_or_default();
                el.register(ts_us, e);
                cpu.register(ts_us, c);
                let ls_e = el.avg_last_second();
                let ls_c = cpu.avg_last_second();
                busy += ls_e;
                let fig = &mut self.pools[p];
                fig.elapsed += ls_e;
                fig.cpu += ls_c;
                fig.cpu_quota += ls_e;
                if self.owners[t] != p {
                    fig.foreign_elapsed += e;
                    fig.foreign_cpu += c;
                }
            }
            let idle = (1.0 - busy).max(0.0);
            self.free_cpu += idle;
            if let Some(owner) = self.pools.get_mut(self.owners[t]) {
                owner.cpu_quota += idle;
            }
        }
        debug_assert_eq!(self.pools.len(), pool_count);
    }
}
