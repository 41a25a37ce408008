//! `adv_thread_pool`: N workers; an agent's thread-safe handlers may run in parallel, its
//! other demands run alone, and demands *start* in FIFO order per agent.
//!
//! Each agent has a queue. A demand that runs a thread-safe handler (see
//! [`event_thread_safe`](crate::SubscriptionBuilder::event_thread_safe); the agent must
//! be added with [`add_thread_safe_agent`](crate::Coop::add_thread_safe_agent)) may start
//! while other thread-safe demands of the agent run; any other demand (a plain handler,
//! `on_start`, `on_finish`, every demand of an agent added with `add_agent`) starts only
//! when nothing of the agent runs, and nothing starts after it until it is done: a waiting
//! exclusive demand holds back the thread-safe ones behind it.
//!
//! # Scheduling
//!
//! Each agent's queue follows the protocol written (and model-checked with loom) in
//! `dispatcher/adv_queue.rs`: a queue is in the pool's ready list at most once; a worker
//! starts the head demand if it can (the `Bind` demand that installs the agent's executor
//! and every non-thread-safe demand alone, thread-safe ones beside each other) and puts the
//! queue back whenever its head could start, so that another worker can start the next
//! thread-safe demand in parallel. No demand is dropped once taken, except after the agent's
//! `on_finish`.
//!
//! # Examples
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use agentbox::prelude::*;
//! use agentbox::dispatcher::adv_thread_pool;
//! use agentbox::ThreadSafeContext;
//!
//! struct Cache { hits: AtomicU32 }
//! impl Agent for Cache {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event_thread_safe(|a: &Self, ctx: &ThreadSafeContext, _: &u32| {
//!             if a.hits.fetch_add(1, Ordering::SeqCst) == 9 {
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             }
//!         })?;
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         for i in 0..10u32 {
//!             send(&ctx.direct_mbox(), i).unwrap();
//!         }
//!     }
//!     fn exception_reaction(&self) -> ExceptionReaction { ExceptionReaction::Ignore }
//! }
//!
//! Environment::launch(|env| {
//!     let pool = adv_thread_pool::Builder::new().threads(2).build().unwrap();
//!     env.introduce_coop(|coop| {
//!         coop.set_binder(pool.binder());
//!         coop.add_thread_safe_agent(Cache { hits: AtomicU32::new(0) });
//!     }).unwrap();
//! }).unwrap();
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use parking_lot::Mutex;

use super::adv_queue::{AdvQueue, Protocol};
use super::elastic::{PoolOps, ThreadCtl, ThreadLimits};
use super::pool::{
    pool_size_methods, pool_spin_threshold_method, pool_threads, thread_count, ReadyQueue, Workers,
};
use super::unwind::{self, Gone};
use super::{
    common_builder_methods, AgentKey, BindError, Binder, BinderImpl, BuildError, CommonParams,
    Demand, DispatcherHandle, EventQueue,
};
use crate::agent::exec::SharedExec;
use crate::agent::{AgentArc, AgentRef, ExecBox};
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

/// Builds an `adv_thread_pool` dispatcher.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    common: CommonParams,
    threads: Option<usize>,
    limits: Option<ThreadLimits>,
    spin: Option<Duration>,
}

impl Builder {
    /// A builder with the defaults: available parallelism threads, a generated name.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    pool_spin_threshold_method!();

    pool_size_methods!(
        example: r#"```
use agentbox::dispatcher::adv_thread_pool;

let pool = adv_thread_pool::Builder::new().thread_limits(2, 2, 3).build().unwrap();
let elastic = pool.elastic().unwrap();
elastic.set_thread_count(0); // clamped to the minimum
assert_eq!(elastic.thread_count(), 2);
```"#,
        limits: "Makes the pool elastic with these limits: see [`thread_limits`](Self::thread_limits)."
    );

    /// Starts the worker threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidParameter`] for 0 threads; [`BuildError::Spawn`] (the threads
    /// started are stopped).
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("adv_thread_pool");
        let threads = match self.limits {
            Some(_) => 0,
            None => thread_count(self.threads)?,
        };
        let (ctl, spin) = pool_threads(&name, self.limits, threads, self.spin);
        let ready: Arc<ReadyQueue<Arc<Queue>>> = Arc::new(ReadyQueue::new(spin));
        let r = ready.clone();
        let c = ctl.clone();
        let workers = Workers::spawn(&name, ctl.clone(), ready.clone(), move |slot| {
            if c.is_measured() {
                let mut clock = c.clock(slot);
                while let Some(q) = c.ask(&mut clock, &r) {
                    c.activated(q.proto().ready_at.load(Ordering::Relaxed));
                    q.serve();
                    clock.events += 1;
                }
            } else {
                let mut spin = r.spinner();
                while let Some(q) = r.next(&mut spin) {
                    q.serve();
                }
            }
        })?;
        let core = Arc::new(Core {
            prefix: format!("disp/adv_thread_pool/{name}"),
            ready,
            workers,
            queues: Mutex::new(AHashMap::new()),
            ctl: ctl.clone(),
        });
        if ctl.is_measured() {
            let ops: Arc<dyn PoolOps> = core.clone();
            ctl.attach(Arc::downgrade(&ops));
        }
        let handle = DispatcherHandle::new(
            "adv_thread_pool",
            name,
            Binder(Arc::new(AdvBinder {
                stats: SourceReg::new(core.clone()),
                core,
            })),
        );
        Ok(if ctl.is_measured() {
            handle.with_elastic(ctl.handle())
        } else {
            handle
        })
    }
}

/// Owns the threads: dropped when the handle, the binder and every bound agent are gone.
struct Core {
    prefix: String,
    ready: Arc<ReadyQueue<Arc<Queue>>>,
    workers: Workers<Arc<Queue>>,
    queues: Mutex<AHashMap<u64, Arc<Queue>>>,
    ctl: Arc<ThreadCtl>,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.ctl.detach();
    }
}

impl PoolOps for Core {
    fn set_count(&self, n: usize) {
        // A thread that cannot start leaves the count lower; the harmonizer sees it in
        // the next sample.
        let _ = self.workers.set_count(n);
    }

    /// One demand per queue taken (the queue's protocol puts it back if its head can
    /// start), as the pool's own threads do.
    fn foreign_slice(&self, deadline: Instant) -> usize {
        let start = Instant::now();
        let mut ran = 0;
        while Instant::now() < deadline {
            let Some(q) = self.ready.take_for_foreign() else {
                break;
            };
            self.ctl
                .activated(q.proto().ready_at.load(Ordering::Relaxed));
            q.serve();
            ran += 1;
        }
        self.ctl.served_foreign(ran, start);
        ran
    }

    fn nudge(&self) {
        self.ready.wake(1);
    }

    fn ready_len(&self) -> usize {
        self.ready.len()
    }
}

impl StatsSource for Core {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let queues = self.queues.lock();
        out(quantity(
            &self.prefix,
            "threads.count",
            self.workers.count(),
        ));
        out(quantity(&self.prefix, "agent.count", queues.len()));
        if self.ctl.is_measured() {
            super::elastic::distribute(&self.ctl, &self.prefix, out);
        }
        for (id, q) in queues.iter() {
            let prefix = format!("{}/aq-{id}", self.prefix);
            out(quantity(&prefix, "demands.count", q.len()));
        }
    }
}

type Queue = AdvQueue<Agents>;

/// The protocol of `adv_queue` for real agents: demands, executors, the pool's ready list.
struct Agents {
    ready: Weak<ReadyQueue<Arc<Queue>>>,
    /// The queue's agent, for the demands dropped after it finished.
    gone: Gone,
    /// The pool's threads (for the activation stamp of elastic pools).
    ctl: Arc<ThreadCtl>,
    /// When the queue last went into the ready list (elastic pools).
    ready_at: AtomicU64,
}

/// The executor of the queue's agent, once its `Bind` demand has run.
struct Exec {
    core: AgentArc,
    /// For exclusive demands; only one runs at a time (the queue's protocol), so the lock
    /// is never contended.
    exclusive: Mutex<ExecBox>,
    /// For thread-safe demands, if the agent has any.
    shared: Option<Arc<dyn SharedExec>>,
}

impl Protocol for Agents {
    type Demand = Demand;
    type Exec = Exec;

    fn is_bind(d: &Demand) -> bool {
        d.is_bind()
    }

    fn bind(mut d: Demand) -> Option<Exec> {
        let (core, exec) = d.take_bind()?;
        Some(Exec {
            core,
            shared: exec.shared(),
            exclusive: Mutex::new(exec),
        })
    }

    fn is_safe(e: &Exec, d: &Demand) -> bool {
        e.shared
            .as_ref()
            .is_some_and(|s| s.is_thread_safe(&e.core, d.run_plain()))
    }

    /// Handler panics are caught around the handler; what is caught here (per demand:
    /// this pool's demands take two locks each anyway) is a payload's `Drop`, or a panic
    /// in the reaction's own user code, so that the queue's bookkeeping always completes.
    fn run_safe(e: &Exec, d: Demand) {
        let ran = unwind::catching(|| {
            if let Some(s) = &e.shared {
                s.execute_shared(&e.core, d.run_plain());
            }
            d.recycle();
        });
        if let Err(msg) = ran {
            unwind::react(&e.core, msg, "dropping a message after its handler");
        }
    }

    fn run_exclusive(e: &Exec, d: Demand) -> bool {
        let mut finished = false;
        let ran = unwind::catching(|| {
            finished = e.exclusive.lock().execute(&e.core, d.run_plain());
            d.recycle();
        });
        if let Err(msg) = ran {
            unwind::react(&e.core, msg, "dropping a message after its handler");
            // Cut short after its `Finish` ran: finished all the same.
            finished |= e.core.status() == crate::agent::core::FINISHED;
        }
        finished
    }

    fn finished(exec: Arc<Exec>) {
        let core = exec.core.clone();
        if let Err(msg) = unwind::catching(|| drop(exec)) {
            unwind::react(&core, msg, "its Drop (after on_finish)");
        }
        crate::agent::core::finished(&core);
    }

    fn drop_unrun(&self, d: Demand) {
        unwind::drop_unrun(d, Some(&self.gone));
    }

    fn make_ready(&self, q: Arc<Queue>) {
        if let Some(ready) = self.ready.upgrade() {
            if self.ctl.is_measured() {
                self.ready_at.store(self.ctl.stamp(), Ordering::Relaxed);
            }
            ready.push(q);
        }
    }
}

impl EventQueue for Queue {
    fn push(&self, demand: Demand) {
        AdvQueue::push(self, demand);
    }
}

struct AdvBinder {
    core: Arc<Core>,
    stats: SourceReg,
}

impl BinderImpl for AdvBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let ready = Arc::downgrade(&self.core.ready);
        let queue = AdvQueue::new(Agents {
            ready,
            gone: Gone::of(&agent.0),
            ctl: self.core.ctl.clone(),
            ready_at: AtomicU64::new(0),
        });
        self.core
            .queues
            .lock()
            .insert(agent.id().as_u64(), queue.clone());
        (queue, AgentKey::single())
    }

    fn unbind(&self, agent: &AgentRef, _key: AgentKey) {
        // Dropped outside the lock: the last reference drops what is still queued, and a
        // payload's `Drop` is user code.
        let queue = self.core.queues.lock().remove(&agent.id().as_u64());
        drop(queue);
    }

    /// Unbinding releases a key (and maybe a queue): never waits for a thread.
    fn unbinds_anywhere(&self) -> bool {
        true
    }
}
