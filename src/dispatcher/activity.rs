//! Per-thread activity tracking: how long a worker spent running demands and waiting for
//! them. Opt-in per dispatcher (its builder's `activity_tracking`): when off, workers do
//! not read the clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::stats::source::Quantity;

/// Counts and total times of one worker thread. Written by that thread only.
#[derive(Default)]
pub(crate) struct Activity {
    work_count: AtomicU64,
    work_ns: AtomicU64,
    wait_count: AtomicU64,
    wait_ns: AtomicU64,
}

fn add(counter: &AtomicU64, total: &AtomicU64, d: Duration) {
    // One writer: load + store is enough, and cheaper than read-modify-write.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    total.store(
        total.load(Ordering::Relaxed).saturating_add(ns),
        Ordering::Relaxed,
    );
}

impl Activity {
    pub(crate) fn worked_since(&self, start: Instant) {
        add(&self.work_count, &self.work_ns, start.elapsed());
    }

    pub(crate) fn waited_since(&self, start: Instant) {
        add(&self.wait_count, &self.wait_ns, start.elapsed());
    }

    /// `work.count`, `work.total_ns`, `work.avg_ns` and the same for `wait`.
    pub(crate) fn distribute(&self, prefix: &str, out: &mut dyn FnMut(Quantity)) {
        for (what, count, total) in [
            ("work", &self.work_count, &self.work_ns),
            ("wait", &self.wait_count, &self.wait_ns),
        ] {
            let n = count.load(Ordering::Relaxed);
            let t = total.load(Ordering::Relaxed);
            let avg = t.checked_div(n).unwrap_or(0);
            let (c, tt, a) = match what {
                "work" => ("work.count", "work.total_ns", "work.avg_ns"),
                _ => ("wait.count", "wait.total_ns", "wait.avg_ns"),
            };
            for (suffix, v) in [(c, n), (tt, t), (a, avg)] {
                out(Quantity {
                    prefix: prefix.to_owned(),
                    suffix,
                    value: usize::try_from(v).unwrap_or(usize::MAX),
                });
            }
        }
    }
}
