//! YDB's harmonizer: threads that move between pools to where the load is.
//!
//! Pools per load class (say "interactive" and "batch") keep a burst of background work
//! from delaying user requests, but a fixed split wastes the CPU an idle pool reserves,
//! and more threads than cores lets the OS preempt an actor in the middle of an event.
//! YDB's answer, restated here: measure every pool once per period and move *whole
//! threads* between pools within a CPU budget. A [`Harmonizer`] drives any group of
//! elastic pools ([`ElasticPool`](crate::dispatcher::elastic::ElasticPool)):
//! `thread_pool` and `adv_thread_pool` dispatchers built with thread limits, and so the
//! pools of an [`ActorSystem`](crate::actors::ActorSystem) (see
//! [`SystemSetup::harmonize`](crate::actors::SystemSetup::harmonize)).
//!
//! # What is measured
//!
//! Per thread, cumulative: *elapsed* (wall time not parked: running, spinning, or runnable
//! but not on a CPU) and *CPU* (the OS's CPU time of the thread). Elapsed above CPU means
//! the OS preempted the thread. A [`ValueHistory`] per thread turns them into an
//! 8-second average and the last second (LS); each thread's part is rescaled by
//! `x / 0.9` capped at 1 (a thread 90 % busy counts as fully busy). A pool's figures are
//! the sums over its threads.
//!
//! # The states (YDB's thresholds)
//!
//! | state | when |
//! |---|---|
//! | starved | `IsStarved(elapsed, cpu) ∨ IsStarved(LS elapsed, LS cpu)`, `IsStarved(e, c) = max(e, c) > 0.1 ∧ (c < 0.7·e ∨ e − c > 0.5)` |
//! | needy | `LS cpu ≥ thread count`, or `LS cpu ≥ full + own shared + 0.5` with the full threads' `LS cpu ≥ full − 1` |
//! | hoggish | not needy, and the full threads' elapsed and LS elapsed both `≤ full − 1` |
//!
//! The **budget** is the CPU budget (cores) minus the pools' summed elapsed; starvation is
//! also present when the last second's budget is below −0.1.
//!
//! # The step (once per period)
//!
//! 1. Starvation present and CPU overbooked by at least the threads still stopping:
//!    starved and other pools above their default shed threads, **least important
//!    first**, down to their default, until the overbooking is covered.
//! 2. Otherwise, with no starvation: each needy pool gains **one** thread while the
//!    budget allows (≥ 1 core), **most important first**.
//! 3. Budget spent (< 1): an **exchange** moves extra threads (above a pool's default)
//!    from the least important pools to the most important needy ones; a pool never
//!    drops below its default by an exchange.
//! 4. Each hoggish pool with a whole idle thread loses one thread, toward its minimum.
//!
//! Importance: larger priority first, then the pool added first. Every change stays within
//! the pool's `[min, max]`, and threads obey it cooperatively (a thread told to stop
//! finishes the demand in hand). Each operation is counted per pool with YDB's names
//! ([`OperationCounts`]), in the [`Harmonizer::stats`] snapshot and in the pool's own
//! [`HarmonizerCounters`](crate::dispatcher::elastic::HarmonizerCounters).
//!
//! # When it runs
//!
//! As in YDB, without a thread of its own: the first worker of any driven pool that asks
//! for work after the deadline runs the step under a try-lock (see [`Harmonizer`]).
//!
//! # Shared threads
//!
//! A pool whose limits say it has a shared thread lends it, when the pool has no work, to
//! the other pools of the harmonizer, most important first (its
//! [`set_lend_targets`](crate::dispatcher::elastic::ElasticPool::set_lend_targets));
//! the slices are bounded by the pool (YDB's 100 ms soft deadline).
//!
//! # Departures from YDB (spec `HARMONIZER.md`)
//!
//! - The budget defaults to the cores available to the process, not the sum of the
//!   pools' default counts ([`HarmonizerBuilder::cpu_budget`] sets either).
//! - No ping gate and no `NotEnoughCpuExecutions` (treated as "latency is bad"), no local
//!   queue sizing, no adaptive spin threshold; the iteration ring
//!   ([`Harmonizer::history`]) keeps whole snapshots, not YDB's per-thread records.
//! - The shared thread is counted as one of its owner's threads: the core's hook does not
//!   report a shared thread's figures per pool it served, so the fractional quotas of
//!   YDB's shared pool are modelled (and tested) but not fed by the driver.
//! - A cumulative figure that decreases is a new origin, never a negative amount.
//!
//! # Examples
//!
//! A SObjectizer-style program with an "interactive" and a "batch" thread pool sharing two
//! cores:
//!
//! ```
//! use std::time::Duration;
//! use agentbox::dispatcher::{elastic::ThreadLimits, thread_pool};
//! use agentbox::harmonizer::Harmonizer;
//!
//! let interactive = thread_pool::Builder::new()
//!     .name("interactive")
//!     .limits(ThreadLimits { priority: 1, ..ThreadLimits::new(1, 1, 2) })
//!     .build()
//!     .unwrap();
//! let batch = thread_pool::Builder::new().name("batch").thread_limits(1, 1, 2).build().unwrap();
//! let harmonizer = Harmonizer::builder()
//!     .dispatcher(&interactive)
//!     .dispatcher(&batch)
//!     .cpu_budget(2.0)
//!     .build()
//!     .unwrap();
//! // ... bind agents to `interactive.binder()` and `batch.binder()` ...
//! for pool in harmonizer.stats().pools {
//!     println!("{}: {} threads", pool.name, pool.current_thread_count);
//! }
//! // Dropping the harmonizer stops it. Inside `Environment::launch`, give it to the
//! // environment so that it runs until the environment ends: `env.keep(harmonizer)`.
//! # let _ = Duration::ZERO;
//! ```

mod driver;
mod history;
mod model;
mod shared;
mod stats;
#[cfg(test)]
mod tests;

pub use driver::{Harmonizer, HarmonizerBuilder, HarmonizerError, HarmonizerObserver, HISTORY_LEN};
pub use history::ValueHistory;
pub use stats::{HarmonizerStats, OperationCounts, PoolHarmonizerStats};
