//! Pools: one dispatcher per load class, configured in the setup.
//!
//! | threads | dispatcher | queues |
//! |---|---|---|
//! | 1 | [`one_thread`](crate::dispatcher::one_thread) | one FIFO for the pool |
//! | N > 1 | [`thread_pool`](crate::dispatcher::thread_pool) with [`Fifo::Individual`] | one FIFO per mailbox |
//!
//! An actor is bound to its pool's dispatcher for life, and the pool id (its index in the
//! setup, 0 first) is in its [`ActorId`](super::ActorId). The dispatcher is named
//! `node<N>-<pool name>`, so the core's own stats (`disp/<kind>/node<N>-<pool>/…`) apply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::table::ActorTable;
use crate::dispatcher::{one_thread, thread_pool, BuildError};
use crate::{BindParams, Binder, DispatcherHandle, Fifo};

/// One pool of a system's [`SystemSetup`](super::SystemSetup).
///
/// # Examples
///
/// ```
/// use agentbox::actors::PoolConfig;
///
/// let batch = PoolConfig::new("Batch").threads(2).activity_tracking(true);
/// assert_eq!(batch.name(), "Batch");
/// ```
#[derive(Debug, Clone)]
pub struct PoolConfig {
    name: String,
    threads: usize,
    activity: bool,
    events_at_once: usize,
}

impl PoolConfig {
    /// YDB's pool for critical system actors.
    pub const SYSTEM: &'static str = "System";
    /// YDB's pool for user requests.
    pub const USER: &'static str = "User";
    /// YDB's pool for background work.
    pub const BATCH: &'static str = "Batch";
    /// YDB's pool for blocking input and output.
    pub const IO: &'static str = "IO";

    /// A pool named `name` with the defaults: 1 thread, no activity tracking, 4 events of
    /// one mailbox at once (thread pools only).
    pub fn new(name: impl Into<String>) -> PoolConfig {
        PoolConfig {
            name: name.into(),
            threads: 1,
            activity: false,
            events_at_once: 4,
        }
    }

    /// Number of threads (default 1).
    pub fn threads(mut self, n: usize) -> PoolConfig {
        self.threads = n;
        self
    }

    /// Whether the pool measures the time its threads work and its queue length (default
    /// off: then those figures of [`PoolStats`] stay zero, nothing reads the clock and the
    /// send path counts nothing shared).
    pub fn activity_tracking(mut self, on: bool) -> PoolConfig {
        self.activity = on;
        self
    }

    /// Events of one mailbox a thread runs before it lets another mailbox go first (pools
    /// of more than one thread; default 4).
    pub fn events_at_once(mut self, n: usize) -> PoolConfig {
        self.events_at_once = n;
        self
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A snapshot of one pool's figures ([`ActorSystem::pool_stats`](super::ActorSystem::pool_stats)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// The pool id (its index in the setup).
    pub pool_id: u32,
    /// The pool's name.
    pub name: String,
    /// Its threads.
    pub threads: usize,
    /// Actors registered on it and not passed away.
    pub actors: usize,
    /// Events its actors handled (bootstraps included).
    pub events_handled: u64,
    /// Events queued for its actors and not yet handled (nor dropped); counted with
    /// activity tracking only (zero otherwise: it costs two shared counters per event).
    pub queue_length: u64,
    /// Time its threads spent in actors' code (with activity tracking).
    pub work: Duration,
    /// Time its threads did not (threads × elapsed − work; with activity tracking).
    pub idle: Duration,
}

/// The run-time half of a pool.
pub(crate) struct Pool {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
    threads: usize,
    pub(crate) activity: bool,
    /// Keeps the dispatcher alive while the system lives.
    _disp: DispatcherHandle,
    pub(crate) binder: Binder,
    pub(crate) table: ActorTable,
    pub(crate) handled: AtomicU64,
    pub(crate) enqueued: AtomicU64,
    pub(crate) dequeued: AtomicU64,
    pub(crate) work_ns: AtomicU64,
    started: Instant,
}

impl Pool {
    pub(crate) fn start(node_id: u32, id: u32, cfg: &PoolConfig) -> Result<Pool, BuildError> {
        let disp_name = format!("node{node_id}-{}", cfg.name);
        let (disp, binder) = if cfg.threads == 1 {
            let d = one_thread::Builder::new()
                .name(disp_name)
                .activity_tracking(cfg.activity)
                .build()?;
            let b = d.binder();
            (d, b)
        } else {
            let d = thread_pool::Builder::new()
                .name(disp_name)
                .threads(cfg.threads)
                .max_demands_at_once(cfg.events_at_once)
                .activity_tracking(cfg.activity)
                .build()?;
            let b = d.binder_with(BindParams::new().fifo(Fifo::Individual));
            (d, b)
        };
        Ok(Pool {
            id,
            name: cfg.name.as_str().into(),
            threads: cfg.threads,
            activity: cfg.activity,
            _disp: disp,
            binder,
            table: ActorTable::default(),
            handled: AtomicU64::new(0),
            enqueued: AtomicU64::new(0),
            dequeued: AtomicU64::new(0),
            work_ns: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// Counts one event handled. A one-thread pool has one writer: a plain load and store.
    #[inline]
    pub(crate) fn count_handled(&self) {
        if self.threads == 1 {
            let n = self.handled.load(Ordering::Relaxed);
            self.handled.store(n + 1, Ordering::Relaxed);
        } else {
            self.handled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds the time since `start` to the pool's work time.
    pub(crate) fn add_work(&self, start: Instant) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.work_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let work = Duration::from_nanos(self.work_ns.load(Ordering::Relaxed));
        let idle = if self.activity {
            let total = self.started.elapsed() * u32::try_from(self.threads).unwrap_or(u32::MAX);
            total.saturating_sub(work)
        } else {
            Duration::ZERO
        };
        let enq = self.enqueued.load(Ordering::Relaxed);
        let deq = self.dequeued.load(Ordering::Relaxed);
        PoolStats {
            pool_id: self.id,
            name: self.name.to_string(),
            threads: self.threads,
            actors: self.table.live(),
            events_handled: self.handled.load(Ordering::Relaxed),
            queue_length: enq.saturating_sub(deq),
            work,
            idle,
        }
    }
}

impl Pool {
    /// The pool's dispatcher as an elastic pool (a harmonizer's hook), if its thread
    /// count can change.
    pub(crate) fn elastic(
        &self,
    ) -> Option<std::sync::Arc<dyn crate::dispatcher::elastic::ElasticPool>> {
        self._disp.elastic()
    }
}
