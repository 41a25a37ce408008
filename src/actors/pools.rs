//! Pools: one dispatcher per load class, configured in the setup.
//!
//! | max threads | dispatcher | queues |
//! |---|---|---|
//! | 1 | [`one_thread`](crate::dispatcher::one_thread) | one FIFO for the pool |
//! | N > 1 | elastic [`thread_pool`](crate::dispatcher::thread_pool) with [`Fifo::Individual`] | one FIFO per mailbox |
//!
//! A pool of more than one thread is elastic: it starts its default count, and a
//! harmonizer may move it within `[min, max]` (YDB's `TBasicExecutorPoolConfig`; see
//! [`elastic`](crate::dispatcher::elastic)).
//!
//! An actor is bound to its pool's dispatcher for life, and the pool id (its index in the
//! setup, 0 first) is in its [`ActorId`](super::ActorId). The dispatcher is named
//! `node<N>-<pool name>`, so the core's own stats (`disp/<kind>/node<N>-<pool>/…`) apply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::idle::IdleMailboxes;
use super::table::ActorTable;
use crate::dispatcher::elastic::{ElasticPool, HarmonizerSnapshot, ThreadLimits};
use crate::dispatcher::{one_thread, thread_pool, BuildError};
use crate::{BindParams, Binder, DispatcherHandle, Fifo};

/// One pool of a system's [`SystemSetup`](super::SystemSetup).
///
/// The thread counts follow YDB (`TBasicExecutorPoolConfig`, spec §2.1): a minimum or
/// maximum of 0 means the default; then the minimum is clamped to `[1, default]` and the
/// maximum to at least the default. [`threads`](Self::threads) sets all three. A default
/// of 0 (so `threads(0)`) is refused when the system starts
/// ([`SystemError::Pool`](super::SystemError::Pool)): agentbox has no separate `Threads`
/// field for it to fall back on.
///
/// | setting | default |
/// |---|---|
/// | min / default / max threads | 1 / 1 / 1 |
/// | priority | 0 (larger is more important) |
/// | spin threshold | 100 µs |
/// | time per mailbox | 10 ms |
/// | events per mailbox | 100 |
/// | has shared thread | false |
/// | idle mailboxes kept | 16384 |
///
/// # Examples
///
/// ```
/// use agentbox::actors::PoolConfig;
///
/// let batch = PoolConfig::new("Batch").threads(2).activity_tracking(true);
/// assert_eq!(batch.name(), "Batch");
/// assert_eq!(batch.thread_limits(), (2, 2, 2));
///
/// let user = PoolConfig::new("User").min_threads(1).default_threads(2).max_threads(6).priority(40);
/// assert_eq!(user.thread_limits(), (1, 2, 6));
/// // 0 means "the default"; the minimum never exceeds it.
/// let odd = PoolConfig::new("Odd").min_threads(5).default_threads(3).max_threads(0);
/// assert_eq!(odd.thread_limits(), (3, 3, 3));
/// ```
#[derive(Debug, Clone)]
pub struct PoolConfig {
    name: String,
    min_threads: usize,
    default_threads: usize,
    max_threads: usize,
    priority: i32,
    spin_threshold: Duration,
    time_per_mailbox: Duration,
    events_per_mailbox: usize,
    has_shared_thread: bool,
    activity: bool,
    idle_mailboxes: usize,
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

    /// A pool named `name` with the defaults of the table above and no activity tracking.
    pub fn new(name: impl Into<String>) -> PoolConfig {
        PoolConfig {
            name: name.into(),
            min_threads: 1,
            default_threads: 1,
            max_threads: 1,
            priority: 0,
            spin_threshold: Duration::from_micros(100),
            time_per_mailbox: Duration::from_millis(10),
            events_per_mailbox: 100,
            has_shared_thread: false,
            activity: false,
            idle_mailboxes: 16384,
        }
    }

    /// A fixed number of threads: sets the minimum, default and maximum to `n` (default 1).
    pub fn threads(mut self, n: usize) -> PoolConfig {
        self.min_threads = n;
        self.default_threads = n;
        self.max_threads = n;
        self
    }

    /// Fewest threads a harmonizer may leave the pool (0: the default count).
    pub fn min_threads(mut self, n: usize) -> PoolConfig {
        self.min_threads = n;
        self
    }

    /// Threads the pool starts with (YDB's `DefaultThreadCount`; at least 1).
    pub fn default_threads(mut self, n: usize) -> PoolConfig {
        self.default_threads = n;
        self
    }

    /// Most threads a harmonizer may give the pool (0: the default count). A pool whose
    /// maximum is above 1 is a thread pool.
    pub fn max_threads(mut self, n: usize) -> PoolConfig {
        self.max_threads = n;
        self
    }

    /// Importance for a harmonizer: larger is more important (default 0).
    pub fn priority(mut self, p: i32) -> PoolConfig {
        self.priority = p;
        self
    }

    /// How long an idle thread spins before it parks (default 100 µs). A pool of one thread
    /// (max 1) spins this long (with the serial worker's adaptive budget: a preempted spin
    /// halves it); the threads of a pool of more threads park at once for now.
    pub fn spin_threshold(mut self, t: Duration) -> PoolConfig {
        self.spin_threshold = t;
        self
    }

    /// Time a thread spends on one mailbox before it lets another waiting mailbox go
    /// first (pools of more than one thread; default 10 ms).
    pub fn time_per_mailbox(mut self, t: Duration) -> PoolConfig {
        self.time_per_mailbox = t;
        self
    }

    /// Events of one mailbox a thread runs before it lets another waiting mailbox go
    /// first (pools of more than one thread; default 100; 0 is taken as 1).
    pub fn events_per_mailbox(mut self, n: usize) -> PoolConfig {
        self.events_per_mailbox = n;
        self
    }

    /// Whether one of the pool's threads is a shared thread that serves other pools for
    /// bounded slices when its own pool has nothing to do (default false). Counted in the
    /// pool's threads; the pools it serves are set by a harmonizer.
    pub fn has_shared_thread(mut self, on: bool) -> PoolConfig {
        self.has_shared_thread = on;
        self
    }

    /// How many idle mailboxes the pool keeps for the next registrations (default 16384;
    /// 0: none, every actor's mailbox is made and deregistered with it).
    ///
    /// # Registration cost
    ///
    /// A mailbox is a core agent in a coop of its own; making one (agent, coop,
    /// subscriptions, binding, start) and destroying it is ~5 400 instructions per
    /// registered actor (callgrind, `ydb_register`: an actor that passes away in its
    /// bootstrap). So a mailbox whose actors all passed away is kept (*parked*) instead of
    /// deregistered, and `register` of an actor of the same type takes it: a table entry,
    /// the actor left in the mailbox's dock and a signal (no allocation) to its queue,
    /// ~1 750 instructions for the registration, the bootstrap, the pass-away and the
    /// parking together. A mailbox is made only when none of the type is parked: while the
    /// registering thread runs ahead of the pool's, the actors it registered and that have
    /// not run yet each hold one. Mailboxes are kept per actor type (a mailbox hosts its
    /// first actor inline), at most this many in all for the pool; one that finds the pool
    /// full deregisters. A parked mailbox takes about half a kilobyte (resident set of
    /// `ydb_register` with ~12 000 parked: +5 MB); the pool keeps no more than the peak
    /// of mailboxes it had at once. Parked mailboxes do not hold the environment's
    /// autoshutdown, and [`ActorSystem::stop`](super::ActorSystem::stop) deregisters them.
    /// Ids are never reused: an event for an actor that left its mailbox never reaches
    /// the mailbox's next actor (it is not delivered).
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::actors::*;
    /// use agentbox::{ActorId, Environment};
    ///
    /// struct Brief;
    /// impl Actor for Brief {
    ///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
    ///         ctx.pass_away().unwrap();
    ///     }
    /// }
    ///
    /// Environment::launch(|env| {
    ///     let setup = SystemSetup::new(1).pool(PoolConfig::new("User").idle_mailboxes(16));
    ///     let system = ActorSystem::start(env, setup).unwrap();
    ///     for _ in 0..1000 {
    ///         system.register(Brief).unwrap();
    ///     }
    ///     // However many mailboxes were made, at most 16 stay parked.
    ///     assert!(system.pool_stats(0).unwrap().idle_mailboxes <= 16);
    /// }).unwrap(); // parked mailboxes do not keep the environment running
    /// ```
    pub fn idle_mailboxes(mut self, n: usize) -> PoolConfig {
        self.idle_mailboxes = n;
        self
    }

    /// The clamped `(min, default, max)` thread counts.
    pub fn thread_limits(&self) -> (usize, usize, usize) {
        let l = self.limits();
        (l.min, l.default, l.max)
    }

    /// The pool's limits as the elastic thread pool takes them.
    fn limits(&self) -> ThreadLimits {
        ThreadLimits {
            priority: self.priority,
            has_shared_thread: self.has_shared_thread,
            spin_threshold: self.spin_threshold,
            ..ThreadLimits::new(self.min_threads, self.default_threads, self.max_threads)
        }
    }

    /// Whether the pool measures the time its threads work and its queue length (default
    /// off: then those figures of [`PoolStats`] stay zero, nothing reads the clock and the
    /// send path counts nothing shared).
    pub fn activity_tracking(mut self, on: bool) -> PoolConfig {
        self.activity = on;
        self
    }

    /// The same as [`events_per_mailbox`](Self::events_per_mailbox) (the name before
    /// YDB's fields came).
    pub fn events_at_once(self, n: usize) -> PoolConfig {
        self.events_per_mailbox(n)
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
    /// Its threads running now.
    pub threads: usize,
    /// The thread count asked for (a harmonizer's; threads follow it cooperatively).
    pub current_threads: usize,
    /// The configured minimum thread count.
    pub min_threads: usize,
    /// The configured default thread count.
    pub default_threads: usize,
    /// The configured maximum thread count.
    pub max_threads: usize,
    /// YDB's `PotentialMaxThreadCount` of the last harmonizer step, in thousandths of a
    /// thread (0 without a harmonizer).
    pub potential_max_threads_milli: u64,
    /// The harmonizer's counters of this pool (all zero without a harmonizer).
    pub harmonizer: HarmonizerSnapshot,
    /// Actors registered on it and not passed away.
    pub actors: usize,
    /// Idle mailboxes it keeps now for the next registrations (at most
    /// [`PoolConfig::idle_mailboxes`]).
    pub idle_mailboxes: usize,
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
    limits: ThreadLimits,
    pub(crate) activity: bool,
    /// Keeps the dispatcher alive while the system lives.
    _disp: DispatcherHandle,
    /// `_disp.elastic()`, kept (pools of more than one thread).
    elastic_pool: Option<Arc<dyn ElasticPool>>,
    pub(crate) binder: Binder,
    pub(crate) table: ActorTable,
    /// Mailboxes whose actors all passed away, for the next registrations.
    pub(crate) idle: IdleMailboxes,
    pub(crate) handled: AtomicU64,
    pub(crate) enqueued: AtomicU64,
    pub(crate) dequeued: AtomicU64,
    pub(crate) work_ns: AtomicU64,
    started: Instant,
}

impl Pool {
    pub(crate) fn start(node_id: u32, id: u32, cfg: &PoolConfig) -> Result<Pool, BuildError> {
        let disp_name = format!("node{node_id}-{}", cfg.name);
        if cfg.default_threads == 0 {
            return Err(BuildError::InvalidParameter("threads must be at least 1"));
        }
        let limits = cfg.limits();
        let (disp, binder) = if limits.max == 1 {
            let d = one_thread::Builder::new()
                .name(disp_name)
                .activity_tracking(cfg.activity)
                .spin_threshold(cfg.spin_threshold)
                .build()?;
            let b = d.binder();
            (d, b)
        } else {
            let d = thread_pool::Builder::new()
                .name(disp_name)
                .limits(limits.clone())
                .max_demands_at_once(cfg.events_per_mailbox.max(1))
                .max_time_at_once(cfg.time_per_mailbox)
                .activity_tracking(cfg.activity)
                .build()?;
            let b = d.binder_with(BindParams::new().fifo(Fifo::Individual));
            (d, b)
        };
        Ok(Pool {
            id,
            name: cfg.name.as_str().into(),
            threads: limits.max,
            elastic_pool: disp.elastic(),
            limits,
            activity: cfg.activity,
            _disp: disp,
            binder,
            table: ActorTable::default(),
            idle: IdleMailboxes::new(cfg.idle_mailboxes),
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
        let (running, current) = match &self.elastic_pool {
            Some(e) => {
                let s = e.sample();
                (s.running_threads, s.target_threads)
            }
            None => (self.threads, self.threads),
        };
        let harmonizer = self
            .elastic_pool
            .as_ref()
            .map(|e| e.counters().snapshot())
            .unwrap_or_default();
        let work = Duration::from_nanos(self.work_ns.load(Ordering::Relaxed));
        let idle = if self.activity {
            // Approximate for elastic pools (the count may have changed): the current one.
            let total = self.started.elapsed() * u32::try_from(running).unwrap_or(u32::MAX);
            total.saturating_sub(work)
        } else {
            Duration::ZERO
        };
        let enq = self.enqueued.load(Ordering::Relaxed);
        let deq = self.dequeued.load(Ordering::Relaxed);
        PoolStats {
            pool_id: self.id,
            name: self.name.to_string(),
            threads: running,
            current_threads: current,
            min_threads: self.limits.min,
            default_threads: self.limits.default,
            max_threads: self.limits.max,
            potential_max_threads_milli: harmonizer.potential_max_thread_count_milli,
            harmonizer,
            actors: self.table.live(),
            idle_mailboxes: self.idle.len(),
            events_handled: self.handled.load(Ordering::Relaxed),
            queue_length: enq.saturating_sub(deq),
            work,
            idle,
        }
    }
}

impl Pool {
    /// The pool's dispatcher as an elastic pool (the harmonizer's hook), if its thread
    /// count can change.
    pub(crate) fn elastic(&self) -> Option<Arc<dyn ElasticPool>> {
        self.elastic_pool.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::{Pool, PoolConfig};

    #[test]
    fn ydb_defaults_and_clamping() {
        let c = PoolConfig::new("P");
        assert_eq!(c.thread_limits(), (1, 1, 1));
        let l = c.limits();
        assert_eq!(l.priority, 0);
        assert!(!l.has_shared_thread);
        assert_eq!(l.spin_threshold.as_micros(), 100);
        assert_eq!(c.time_per_mailbox.as_millis(), 10);
        assert_eq!(c.events_per_mailbox, 100);
        // Min and max 0 are the default.
        let c = PoolConfig::new("P")
            .default_threads(2)
            .min_threads(0)
            .max_threads(0);
        assert_eq!(c.thread_limits(), (2, 2, 2));
        // No threads at all is refused.
        assert!(Pool::start(1, 0, &PoolConfig::new("P").threads(0)).is_err());
        let c = PoolConfig::new("P").default_threads(3);
        assert_eq!(c.thread_limits(), (1, 3, 3), "min 1 stays, max 1 rises");
        let c = PoolConfig::new("P").threads(4).max_threads(2);
        assert_eq!(
            c.thread_limits(),
            (4, 4, 4),
            "max below default is the default"
        );
        let c = PoolConfig::new("P").threads(2).events_at_once(7);
        assert_eq!(c.events_per_mailbox, 7);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // starts threads
    fn a_pool_of_several_threads_is_elastic_and_reports_its_counts() {
        let cfg = PoolConfig::new("User")
            .min_threads(1)
            .default_threads(2)
            .max_threads(4)
            .priority(3);
        let pool = Pool::start(1, 0, &cfg).unwrap();
        let e = pool._disp.elastic().expect("elastic");
        assert_eq!(e.limits().priority, 3);
        let s = pool.stats();
        assert_eq!(
            (
                s.threads,
                s.current_threads,
                s.min_threads,
                s.default_threads,
                s.max_threads
            ),
            (2, 2, 1, 2, 4)
        );
        e.set_thread_count(3);
        e.counters()
            .decreasing_threads_by_hoggish_state
            .fetch_add(1, Ordering::Relaxed);
        e.counters()
            .potential_max_thread_count_milli
            .store(3500, Ordering::Relaxed);
        let s = pool.stats();
        assert_eq!((s.threads, s.current_threads), (3, 3));
        assert_eq!(s.harmonizer.decreasing_threads_by_hoggish_state, 1);
        assert_eq!(s.potential_max_threads_milli, 3500);
        // One thread: the one_thread dispatcher, not elastic.
        let one = Pool::start(1, 1, &PoolConfig::new("System")).unwrap();
        assert!(one._disp.elastic().is_none());
        assert_eq!(one.stats().max_threads, 1);
    }
}
