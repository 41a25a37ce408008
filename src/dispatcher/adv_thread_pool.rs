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
//! 1. A queue is in the shared ready queue at most once (`scheduled`).
//! 2. A worker takes a queue and, under its lock, starts the head demand if it can: a
//!    thread-safe one when no exclusive one runs, an exclusive one when nothing runs.
//! 3. Whenever the head could start (after a push, after a start, after a demand ends) and
//!    the queue is not scheduled, it is put back into the ready queue, so another worker
//!    can start the next thread-safe demand in parallel.
//!
//! Races: the head is classified only while no exclusive demand runs, so its handler
//! cannot change between the classification and the start.
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

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use ahash::AHashMap;
use parking_lot::Mutex;

use super::one_thread::quantity;
use super::pool::{thread_count, ReadyQueue, Workers};
use super::{
    common_builder_methods, AgentKey, BindError, Binder, BinderImpl, BuildError, CommonParams,
    Demand, DemandKind, DispatcherHandle, EventQueue,
};
use crate::agent::exec::SharedExec;
use crate::agent::{AgentArc, AgentExec, AgentRef};
use crate::stats::{Quantity, SourceReg, StatsSource};

/// Builds an `adv_thread_pool` dispatcher.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    common: CommonParams,
    threads: Option<usize>,
}

impl Builder {
    /// A builder with the defaults: available parallelism threads, a generated name.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    /// Number of worker threads (default: `std::thread::available_parallelism`).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// Starts the worker threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidParameter`] for 0 threads; [`BuildError::Spawn`] (the threads
    /// started are stopped).
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let threads = thread_count(self.threads)?;
        let name = self.common.name("adv_thread_pool");
        let ready: Arc<ReadyQueue<Arc<AgentQueue>>> = Arc::new(ReadyQueue::new());
        let r = ready.clone();
        let workers = Workers::spawn(&name, threads, ready.clone(), move |_| {
            while let Some(q) = r.next() {
                q.serve();
            }
        })?;
        let core = Arc::new(Core {
            prefix: format!("disp/adv_thread_pool/{name}"),
            ready,
            workers,
            queues: Mutex::new(AHashMap::new()),
        });
        Ok(DispatcherHandle::new(
            "adv_thread_pool",
            name,
            Binder(Arc::new(AdvBinder {
                stats: SourceReg::new(core.clone()),
                core,
            })),
        ))
    }
}

/// Owns the threads: dropped when the handle, the binder and every bound agent are gone.
struct Core {
    prefix: String,
    ready: Arc<ReadyQueue<Arc<AgentQueue>>>,
    workers: Workers<Arc<AgentQueue>>,
    queues: Mutex<AHashMap<u64, Arc<AgentQueue>>>,
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
        for (id, q) in queues.iter() {
            let prefix = format!("{}/aq-{id}", self.prefix);
            out(quantity(
                &prefix,
                "demands.count",
                q.state.lock().demands.len(),
            ));
        }
    }
}

/// The executor of the queue's agent, once its `Bind` demand has arrived.
struct Exec {
    core: AgentArc,
    /// For exclusive demands.
    exclusive: Mutex<Option<Box<dyn AgentExec>>>,
    /// For thread-safe demands, if the agent has any.
    shared: Option<Arc<dyn SharedExec>>,
}

#[derive(Default)]
struct State {
    demands: VecDeque<Demand>,
    running_safe: usize,
    running_exclusive: bool,
    scheduled: bool,
}

/// One agent's FIFO and the executor it feeds.
struct AgentQueue {
    state: Mutex<State>,
    exec: Mutex<Option<Arc<Exec>>>,
    ready: Weak<ReadyQueue<Arc<AgentQueue>>>,
    me: Weak<AgentQueue>,
}

enum Start {
    Safe(Arc<Exec>, Demand),
    Exclusive(Arc<Exec>, Demand),
    Bind(Demand),
}

impl AgentQueue {
    /// Whether the head demand could start now (and how).
    fn head_startable(&self, st: &State) -> bool {
        let Some(head) = st.demands.front() else {
            return false;
        };
        if st.running_exclusive {
            return false;
        }
        if matches!(head.kind, DemandKind::Bind(..)) {
            return st.running_safe == 0;
        }
        st.running_safe == 0 || self.is_safe(head)
    }

    fn is_safe(&self, d: &Demand) -> bool {
        let exec = self.exec.lock().clone();
        exec.is_some_and(|e| {
            e.shared
                .as_ref()
                .is_some_and(|s| s.is_thread_safe(&e.core, &d.kind))
        })
    }

    /// Scheduling step 3.
    fn reschedule(&self, st: &mut State) {
        if !st.scheduled && self.head_startable(st) {
            if let (Some(ready), Some(me)) = (self.ready.upgrade(), self.me.upgrade()) {
                st.scheduled = true;
                ready.push(me);
            }
        }
    }

    /// Scheduling step 2, then running what was started.
    fn serve(&self) {
        let start = {
            let mut st = self.state.lock();
            st.scheduled = false;
            if !self.head_startable(&st) {
                return;
            }
            let d = st.demands.pop_front().expect("startable head");
            let start = if matches!(d.kind, DemandKind::Bind(..)) {
                Start::Bind(d)
            } else {
                let exec = self.exec.lock().clone();
                let Some(exec) = exec else {
                    // Demands before Bind cannot exist: Bind is queued first.
                    return;
                };
                if self.is_safe(&d) {
                    st.running_safe += 1;
                    Start::Safe(exec, d)
                } else {
                    st.running_exclusive = true;
                    Start::Exclusive(exec, d)
                }
            };
            self.reschedule(&mut st);
            start
        };
        match start {
            Start::Bind(d) => {
                if let DemandKind::Bind(core, exec) = d.kind {
                    let shared = exec.shared();
                    *self.exec.lock() = Some(Arc::new(Exec {
                        core,
                        exclusive: Mutex::new(Some(exec)),
                        shared,
                    }));
                }
            }
            Start::Safe(exec, d) => {
                if let Some(s) = &exec.shared {
                    s.execute_shared(&exec.core, &d.kind);
                }
                self.state.lock().running_safe -= 1;
            }
            Start::Exclusive(exec, d) => {
                let finished = {
                    let mut ex = exec.exclusive.lock();
                    match ex.as_mut() {
                        Some(e) => e.execute(&exec.core, &d.kind),
                        None => false,
                    }
                };
                if finished {
                    // The agent is done: its executor goes, on this worker.
                    let gone = exec.exclusive.lock().take();
                    drop(gone);
                    *self.exec.lock() = None;
                }
                self.state.lock().running_exclusive = false;
            }
        }
        let mut st = self.state.lock();
        self.reschedule(&mut st);
    }
}

impl EventQueue for AgentQueue {
    fn push(&self, demand: Demand) {
        let mut st = self.state.lock();
        st.demands.push_back(demand);
        self.reschedule(&mut st);
    }
}

struct AdvBinder {
    core: Arc<Core>,
    stats: SourceReg,
}

impl BinderImpl for AdvBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(agent);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let ready = Arc::downgrade(&self.core.ready);
        let queue = Arc::new_cyclic(|me| AgentQueue {
            state: Mutex::new(State::default()),
            exec: Mutex::new(None),
            ready,
            me: me.clone(),
        });
        self.core
            .queues
            .lock()
            .insert(agent.id().as_u64(), queue.clone());
        (queue, AgentKey::single())
    }

    fn unbind(&self, agent: &AgentRef, _key: AgentKey) {
        self.core.queues.lock().remove(&agent.id().as_u64());
    }
}
