//! `thread_pool`: N worker threads serving agent queues from a shared queue of ready
//! queues.
//!
//! An agent queue (one per coop and binder with [`Fifo::Cooperation`], the default; one
//! per agent with [`Fifo::Individual`]) owns the executors of its agents. One thread
//! serves a queue at a time, so the agents of one coop under cooperation FIFO never run in
//! parallel, whatever the number of threads: choose individual FIFO (or a coop per agent)
//! for agents that should. A queue is in the
//! ready queue at most once; the worker that takes it runs its demands alone, so an
//! agent's handlers never overlap and a queue's demands run in FIFO order.
//!
//! # Scheduling
//!
//! 1. A push into an idle queue marks it scheduled and puts it into the ready queue.
//! 2. A worker takes a ready queue and runs up to `max_demands_at_once` of its demands
//!    (`on_start`, messages and `on_finish` count; the internal demand that binds an agent
//!    to its worker does not).
//! 3. Then, if the queue is empty it becomes idle; if not, and another queue is waiting, it
//!    goes to the back of the ready queue; otherwise the worker keeps going with it.
//!
//! Races: a push that finds the queue scheduled only appends; the worker checks for
//! emptiness and marks the queue idle under the same lock as the push, so no demand is left
//! in an idle queue. (Unlike `adv_thread_pool`, one worker at a time serves a queue, so
//! the `Bind` demand is installed before the next demand is looked at.) Checked by
//! `tests/dispatcher_thread_pool.rs` and the dispatcher suite stamped for both FIFO kinds.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::dispatcher::thread_pool;
//! use agentbox::{BindParams, Fifo};
//!
//! struct Job(u32);
//! impl Agent for Job {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         println!("job {} on {:?}", self.0, std::thread::current().name());
//!         ctx.deregister_coop(DeregReason::Normal);
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let pool = thread_pool::Builder::new().threads(2).max_demands_at_once(8).build().unwrap();
//!     for i in 0..4 {
//!         env.introduce_coop(|coop| {
//!             coop.set_binder(pool.binder_with(BindParams::new().fifo(Fifo::Individual)));
//!             coop.add_agent(Job(i));
//!         }).unwrap();
//!     }
//! }).unwrap();
//! ```

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use parking_lot::Mutex;

use super::activity::Activity;
use super::elastic::{PoolOps, ThreadCtl, ThreadLimits};
use super::pool::{
    pool_size_methods, pool_spin_threshold_method, pool_threads, thread_count, ReadyQueue, Workers,
};
use super::{
    common_builder_methods, AgentKey, AgentTable, BindError, Binder, BinderImpl, BuildError,
    CommonParams, Demand, DispatcherHandle, EventQueue, Fifo, KeyAllocator,
};
use crate::agent::AgentRef;
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

/// Builds a `thread_pool` dispatcher.
#[derive(Debug, Clone)]
pub struct Builder {
    common: CommonParams,
    threads: Option<usize>,
    limits: Option<ThreadLimits>,
    max_demands_at_once: usize,
    max_time_at_once: Option<Duration>,
    spin: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            common: CommonParams::default(),
            threads: None,
            limits: None,
            max_demands_at_once: 4,
            max_time_at_once: None,
            spin: None,
        }
    }
}

impl Builder {
    /// A builder with the defaults: available parallelism threads, 4 demands at once, a
    /// generated name (threads are named `<name>-<i>`), no activity tracking.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    pool_size_methods!(
        example: r#"```
use agentbox::dispatcher::thread_pool;

let pool = thread_pool::Builder::new().thread_limits(1, 2, 4).build().unwrap();
let elastic = pool.elastic().expect("a pool with limits is elastic");
assert_eq!(elastic.thread_count(), 2);
elastic.set_thread_count(10); // clamped to the maximum
assert_eq!(elastic.thread_count(), 4);
assert_eq!(elastic.sample().threads.len(), 4);
```"#,
        limits: "Makes the pool elastic with these limits (priority, shared thread and spin threshold included): see [`thread_limits`](Self::thread_limits)."
    );

    /// Demands a worker runs from one queue before it lets another waiting queue go first
    /// (default 4).
    pub fn max_demands_at_once(mut self, n: usize) -> Self {
        self.max_demands_at_once = n;
        self
    }

    pool_spin_threshold_method!();

    /// Time a worker spends on one queue before it lets another waiting queue go first,
    /// checked after each demand (default: none, only `max_demands_at_once` counts; YDB's
    /// `TimePerMailbox`). Setting it costs a clock read per demand.
    pub fn max_time_at_once(mut self, limit: Duration) -> Self {
        self.max_time_at_once = Some(limit);
        self
    }

    /// Starts the worker threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidParameter`] for 0 threads or 0 demands at once;
    /// [`BuildError::Spawn`] if a thread cannot be started (those started are stopped).
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let threads = match &self.limits {
            Some(l) => l.max,
            None => thread_count(self.threads)?,
        };
        if self.max_demands_at_once == 0 {
            return Err(BuildError::InvalidParameter(
                "max_demands_at_once must be at least 1",
            ));
        }
        let name = self.common.name("thread_pool");
        let (ctl, spin) = pool_threads(&name, self.limits, threads, self.spin);
        let shared = Arc::new(Shared {
            ctl: ctl.clone(),
            measured: ctl.is_measured(),
            ready: Arc::new(ReadyQueue::new(spin)),
            max_demands_at_once: self.max_demands_at_once,
            max_time_at_once: self.max_time_at_once,
            activity: if self.common.activity() {
                (0..threads).map(|_| Activity::default()).collect()
            } else {
                Vec::new()
            },
        });
        let s = shared.clone();
        let workers = Workers::spawn(&name, ctl.clone(), shared.ready.clone(), move |i| s.work(i))?;
        let core = Arc::new(Core {
            prefix: format!("disp/thread_pool/{name}"),
            workers,
            shared,
            queues: [Mutex::new(AHashMap::new()), Mutex::new(AHashMap::new())],
        });
        if ctl.is_measured() {
            let ops: Arc<dyn PoolOps> = core.clone();
            ctl.attach(Arc::downgrade(&ops));
        }
        let coop_binder = Binder(Arc::new(PoolBinder {
            stats: SourceReg::new(core.clone()),
            core: core.clone(),
            fifo: Fifo::Cooperation,
        }));
        let individual = Binder(Arc::new(PoolBinder {
            stats: SourceReg::new(core.clone()),
            core,
            fifo: Fifo::Individual,
        }));
        let cooperation = coop_binder.clone();
        let handle =
            DispatcherHandle::new("thread_pool", name, coop_binder).with_params(move |p| {
                match p.fifo_value() {
                    Fifo::Cooperation => cooperation.clone(),
                    Fifo::Individual => individual.clone(),
                }
            });
        Ok(if ctl.is_measured() {
            handle.with_elastic(ctl.handle())
        } else {
            handle
        })
    }
}

thread_local! {
    /// On a worker: the address of its pool's `Shared`, and of the queue it is serving (0
    /// between queues). A queue being served is held by that worker alone.
    static POOL: Cell<usize> = const { Cell::new(0) };
    static HOLDING: Cell<usize> = const { Cell::new(0) };
    /// On a worker: its pool's thread control (for [`BlockedWorker`]).
    static CTL: std::cell::RefCell<Option<Arc<ThreadCtl>>> = const { std::cell::RefCell::new(None) };
    /// Set when a request's deadlock check met an agent of the calling worker's own pool
    /// (another queue of it): the wait then needs a thread of this pool ([`BlockedWorker`]).
    static TARGET_IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// A worker of a thread pool waiting in a blocking request (`request_reply`) for an agent
/// of another queue of its own pool, until dropped: counted by its pool, which keeps a
/// thread besides it (and every other worker so waiting) running, so that the agent can
/// answer. A wait for anything else (another dispatcher's agent, a chain) is not counted:
/// the worker comes back by itself.
pub(crate) struct BlockedWorker(Option<Arc<ThreadCtl>>);

impl BlockedWorker {
    /// Before a request's deadlock check: forgets what an earlier check met.
    pub(crate) fn before_check() {
        TARGET_IN_POOL.set(false);
    }

    /// After the check found receivers that can answer: `None` if one of them is an agent
    /// of the calling worker's own pool and no thread of the pool is free to run it (then
    /// the request would wait for nothing: a deadlock); otherwise the wait's guard (which
    /// counts it if it needs a thread of the pool).
    pub(crate) fn enter() -> Option<BlockedWorker> {
        if !TARGET_IN_POOL.replace(false) {
            return Some(BlockedWorker(None));
        }
        let Some(ctl) = CTL.with_borrow(Clone::clone) else {
            return Some(BlockedWorker(None));
        };
        ctl.enter_blocked().then_some(BlockedWorker(Some(ctl)))
    }
}

impl Drop for BlockedWorker {
    fn drop(&mut self) {
        if let Some(ctl) = self.0.take() {
            ctl.leave_blocked();
        }
    }
}

/// Marks the queue a worker serves, until dropped (a panic included).
struct Holding;

impl Holding {
    fn enter(q: &Arc<AgentQueue>) -> Holding {
        HOLDING.set(Arc::as_ptr(q) as usize);
        Holding
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        HOLDING.set(0);
    }
}

struct Shared {
    /// Worker threads: their slots, count and figures.
    ctl: Arc<ThreadCtl>,
    /// `ctl.is_measured()`, read on the push path without following `ctl`.
    measured: bool,
    ready: Arc<ReadyQueue<Arc<AgentQueue>>>,
    max_demands_at_once: usize,
    max_time_at_once: Option<Duration>,
    /// One per worker when activity is tracked; empty otherwise.
    activity: Vec<Activity>,
}

impl Shared {
    fn work(&self, i: usize) {
        POOL.set(self as *const Shared as usize);
        CTL.set(Some(self.ctl.clone()));
        let activity = self.activity.get(i);
        if self.measured {
            return self.work_measured(i, activity);
        }
        let mut spin = self.ready.spinner();
        loop {
            let waiting = activity.map(|_| Instant::now());
            let next = self.ready.next(&mut spin);
            if let (Some(a), Some(t)) = (activity, waiting) {
                a.waited_since(t);
            }
            let Some(q) = next else {
                return;
            };
            // A panic escaping a demand (a payload's `Drop`, see `dispatcher::unwind`) is
            // reported and the queue served on: it is still scheduled, and this worker
            // still the one serving it.
            while let Err(payload) =
                catch_unwind(AssertUnwindSafe(|| self.serve(&q, activity, true)))
            {
                q.table.lock().contain(payload);
            }
        }
    }

    /// `work` for an elastic pool: the thread measures itself, runs the tick and stops
    /// when the pool shrinks (all in `ThreadCtl::ask`, when it asks for work).
    fn work_measured(&self, slot: usize, activity: Option<&Activity>) {
        let mut clock = self.ctl.clock(slot);
        loop {
            let waiting = activity.map(|_| Instant::now());
            let next = self.ctl.ask(&mut clock, &self.ready);
            if let (Some(a), Some(t)) = (activity, waiting) {
                a.waited_since(t);
            }
            let Some(q) = next else {
                return;
            };
            clock.events += self.serve_caught(&q, activity, true) as u64;
        }
    }

    /// Serves a queue taken from the ready list (see `serve`), panics escaping a demand
    /// contained; the demands run.
    fn serve_caught(&self, q: &Arc<AgentQueue>, activity: Option<&Activity>, keep: bool) -> usize {
        self.ctl.activated(q.ready_at.load(Ordering::Relaxed));
        let mut ran = 0;
        loop {
            match catch_unwind(AssertUnwindSafe(|| self.serve(q, activity, keep))) {
                Ok(n) => return ran + n,
                Err(payload) => {
                    ran += 1;
                    q.table.lock().contain(payload);
                }
            }
        }
    }

    /// Puts a queue (still scheduled) into the ready list, stamped if measured.
    #[inline]
    fn make_ready(&self, q: Arc<AgentQueue>) {
        if self.measured {
            q.ready_at.store(self.ctl.stamp(), Ordering::Relaxed);
        }
        self.ready.push(q);
    }

    /// Whether the pool runs one thread now (then a demand blocked on it has no other
    /// worker). A worker waiting in a request keeps the pool from shrinking below what it
    /// needs ([`BlockedWorker`]), so today's count decides, not the pool's minimum.
    fn single_thread(&self) -> bool {
        self.ctl.runs_one()
    }

    /// Scheduling steps 2 and 3 for one queue; the demands run. With `keep` false (a
    /// foreign thread's slice) the queue goes back to the ready list after one budget.
    #[inline(always)] // in the plain worker loop as before elastic pools (one more copy)
    fn serve(&self, q: &Arc<AgentQueue>, activity: Option<&Activity>, keep: bool) -> usize {
        let mut ran = 0;
        // Uncontended: a scheduled queue is served by one worker at a time.
        let mut table = q.table.lock();
        let _holding = Holding::enter(q);
        loop {
            // The budget counts the demands a user sees (`on_start`, messages, `on_finish`),
            // not the internal `Bind` that hands an agent's executor to this worker.
            let mut budget = self.max_demands_at_once;
            let started = self.max_time_at_once.map(|_| Instant::now());
            while budget > 0 {
                let next = {
                    let mut inbox = q.inbox.lock();
                    match inbox.demands.pop_front() {
                        Some(d) => d,
                        None => {
                            inbox.scheduled = false;
                            inbox.release_burst();
                            return ran;
                        }
                    }
                };
                if next.is_bind() {
                    // Every agent of a coop is bound before the first `Bind` is queued:
                    // the table is sized for all of them at once, by this thread (growing
                    // it per agent reallocated memory another thread had allocated, and
                    // the two threads then fought over the allocator's lock: skynet).
                    table.reserve_slots(q.keys.slots());
                    if next.starts_after_bind() {
                        // Its `Start` is a demand the user sees.
                        budget -= 1;
                    }
                } else {
                    budget -= 1;
                }
                ran += 1;
                match activity {
                    None => table.run(next),
                    Some(a) => {
                        let t = Instant::now();
                        table.run(next);
                        a.worked_since(t);
                    }
                }
                if let (Some(t), Some(limit)) = (started, self.max_time_at_once) {
                    if t.elapsed() >= limit {
                        break;
                    }
                }
            }
            {
                let mut inbox = q.inbox.lock();
                if inbox.demands.is_empty() {
                    inbox.scheduled = false;
                    inbox.release_burst();
                    return ran;
                }
            }
            if !keep || self.ready.has_waiting() {
                // Another queue is waiting: this one goes to the back, still scheduled.
                drop(table);
                self.make_ready(q.clone());
                return ran;
            }
        }
    }
}

/// Owns the threads: dropped when the handle, both binders and every bound agent are gone.
struct Core {
    prefix: String,
    shared: Arc<Shared>,
    workers: Workers<Arc<AgentQueue>>,
    /// Queues by coop id (cooperation FIFO, index 0) or agent id (individual, index 1),
    /// with their agent counts; a queue goes when its last agent is unbound.
    queues: [QueueMap; 2],
}

impl Drop for Core {
    fn drop(&mut self) {
        self.shared.ctl.detach();
    }
}

impl PoolOps for Core {
    fn set_count(&self, n: usize) {
        // A thread that cannot start leaves the count lower; the harmonizer sees it in
        // the next sample.
        let _ = self.workers.set_count(n);
    }

    fn foreign_slice(&self, deadline: Instant) -> usize {
        let start = Instant::now();
        let mut ran = 0;
        while Instant::now() < deadline {
            let Some(q) = self.shared.ready.take_for_foreign() else {
                break;
            };
            ran += self.shared.serve_caught(&q, None, false);
        }
        self.shared.ctl.served_foreign(ran, start);
        ran
    }

    fn nudge(&self) {
        self.shared.ready.wake(1);
    }

    fn ready_len(&self) -> usize {
        self.shared.ready.len()
    }
}

/// Agent queues by coop or agent id, with the number of agents bound to each.
type QueueMap = Mutex<AHashMap<u64, (Arc<AgentQueue>, usize)>>;

impl StatsSource for Core {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        out(quantity(
            &self.prefix,
            "threads.count",
            self.workers.count(),
        ));
        if self.shared.ctl.is_measured() {
            super::elastic::distribute(&self.shared.ctl, &self.prefix, out);
        }
        let mut agents = 0;
        for (i, map) in self.queues.iter().enumerate() {
            let tag = if i == 0 { "cq" } else { "aq" };
            for (id, (q, n)) in map.lock().iter() {
                agents += n;
                let prefix = format!("{}/{tag}-{id}", self.prefix);
                // Read into a local: the inbox's guard ends here, not after `out`.
                let waiting = q.inbox.lock().demands.len();
                out(quantity(&prefix, "demands.count", waiting));
            }
        }
        out(quantity(&self.prefix, "agent.count", agents));
        for (i, a) in self.shared.activity.iter().enumerate() {
            a.distribute(&format!("{}/wt-{i}", self.prefix), out);
        }
    }
}

#[derive(Default)]
struct Inbox {
    demands: VecDeque<Demand>,
    scheduled: bool,
    /// The first push has sized the queue for its registration burst.
    sized: bool,
}

impl Inbox {
    /// An empty queue gives back the memory of a past burst (a registration queues two
    /// demands per agent): with a queue per cooperation, a million agents kept gigabytes.
    fn release_burst(&mut self) {
        if self.demands.capacity() > 8 {
            self.demands = VecDeque::new();
        }
    }
}

/// A FIFO of demands and the executors of the agents it serves.
struct AgentQueue {
    inbox: Mutex<Inbox>,
    /// When it last went into the ready list (elastic pools: `ThreadCtl::stamp`).
    ready_at: AtomicU64,
    table: Mutex<AgentTable>,
    keys: KeyAllocator,
    shared: Weak<Shared>,
    me: Weak<AgentQueue>,
}

impl Drop for AgentQueue {
    /// Demands still queued when the queue goes (its pool stopped before serving them, or
    /// they were pushed after it stopped) are dropped and counted through the table.
    fn drop(&mut self) {
        let demands = std::mem::take(&mut self.inbox.get_mut().demands);
        let table = self.table.get_mut();
        for d in demands {
            table.drop_unrun(d);
        }
        table.retire();
    }
}

impl EventQueue for AgentQueue {
    /// The worker runs demands through an `AgentTable`.
    fn starts_on_bind(&self) -> bool {
        true
    }

    /// The worker serving this queue holds it until the demand in hand returns; and a
    /// pool with no other free worker (one thread, or every other one waiting in a request
    /// of its own: [`BlockedWorker`]) has nobody to serve it.
    fn blocked_by_current_thread(&self) -> bool {
        if HOLDING.get() == self as *const AgentQueue as usize {
            return true;
        }
        let pool = POOL.get();
        if pool == 0 || pool != self.shared.as_ptr() as usize {
            return false;
        }
        // The request's wait will need a thread of this pool (`BlockedWorker::enter`
        // decides whether one is free, under the pool's lock).
        TARGET_IN_POOL.set(true);
        self.shared.upgrade().is_some_and(|s| s.single_thread())
    }

    fn push(&self, demand: Demand) {
        let schedule = {
            let mut inbox = self.inbox.lock();
            if !inbox.sized {
                // A fresh queue: room for the `BindStart` of each agent bound to it, in one
                // allocation (a registration queues them in a burst).
                inbox.sized = true;
                inbox.demands.reserve(self.keys.slots().max(4));
            }
            inbox.demands.push_back(demand);
            !std::mem::replace(&mut inbox.scheduled, true)
        };
        if schedule {
            if let (Some(shared), Some(me)) = (self.shared.upgrade(), self.me.upgrade()) {
                shared.make_ready(me);
            }
        }
    }
}

struct PoolBinder {
    core: Arc<Core>,
    fifo: Fifo,
    stats: SourceReg,
}

impl PoolBinder {
    fn queues(&self) -> &QueueMap {
        &self.core.queues[match self.fifo {
            Fifo::Cooperation => 0,
            Fifo::Individual => 1,
        }]
    }

    fn queue_key(&self, agent: &AgentRef) -> u64 {
        match self.fifo {
            Fifo::Individual => agent.id().as_u64(),
            Fifo::Cooperation => agent.0.coop().map_or(agent.id().as_u64(), |c| c.id),
        }
    }
}

impl BinderImpl for PoolBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let mut queues = self.queues().lock();
        let (queue, count) = queues.entry(self.queue_key(agent)).or_insert_with(|| {
            let shared = Arc::downgrade(&self.core.shared);
            let queue = Arc::new_cyclic(|me| AgentQueue {
                inbox: Mutex::new(Inbox::default()),
                ready_at: AtomicU64::new(0),
                table: Mutex::new(AgentTable::default()),
                keys: KeyAllocator::default(),
                shared,
                me: me.clone(),
            });
            (queue, 0)
        });
        *count += 1;
        (queue.clone(), queue.keys.allocate())
    }

    fn unbind(&self, agent: &AgentRef, key: AgentKey) {
        let qk = self.queue_key(agent);
        let gone = {
            let mut queues = self.queues().lock();
            match queues.get_mut(&qk) {
                Some((queue, count)) => {
                    queue.keys.release(key);
                    *count -= 1;
                    if *count == 0 {
                        queues.remove(&qk)
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        // Dropped outside the lock: the last reference drops what is still queued, and a
        // payload's `Drop` is user code.
        drop(gone);
    }

    /// Unbinding releases a key (and maybe a queue): never waits for a thread.
    fn unbinds_anywhere(&self) -> bool {
        true
    }
}
