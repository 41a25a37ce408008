//! The one-thread priority worker shared by `strictly_ordered` and `quoted_round_robin`:
//! eight FIFOs (one per agent priority) under one lock, and a policy that picks the next
//! demand.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::activity::Activity;
use super::{AgentKey, AgentTable, BindError, BinderImpl, Demand, EventQueue, KeyAllocator};
use crate::agent::{AgentRef, Priority};
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

/// How the worker picks demands.
#[derive(Clone, Copy)]
pub(crate) enum Policy {
    /// Always the oldest demand of the highest non-empty priority.
    Strict,
    /// Sweeps P7 → P0, taking at most `quotas[p]` demands from each priority per sweep.
    Quoted([usize; 8]),
}

#[derive(Default)]
struct Queues {
    by_prio: [VecDeque<Demand>; 8],
    stop: bool,
}

thread_local! {
    /// Address of the `Shared` whose worker this thread is; 0 on any other thread.
    static SERVING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

pub(crate) struct Shared {
    queues: Mutex<Queues>,
    ready: Condvar,
    keys: KeyAllocator,
    activity: Option<Activity>,
    /// The worker's table once it has stopped: counts what is pushed after.
    retired: Mutex<Option<AgentTable>>,
}

impl Drop for Shared {
    /// Demands pushed after the worker stopped (by senders that saw their agent alive
    /// just before it finished) are dropped and counted through the worker's table.
    fn drop(&mut self) {
        let Some(agents) = self.retired.get_mut().take() else {
            return;
        };
        for d in self
            .queues
            .get_mut()
            .by_prio
            .iter_mut()
            .flat_map(std::mem::take)
        {
            agents.drop_unrun(d);
        }
    }
}

impl Shared {
    fn push(&self, prio: Priority, d: Demand) {
        let mut q = self.queues.lock();
        q.by_prio[prio.index()].push_back(d);
        drop(q);
        self.ready.notify_one();
    }

    /// Takes the next demand of priority `p`; waits while every FIFO is empty. `None` once
    /// stopped.
    fn take_from(&self, p: Option<usize>) -> Option<Option<Demand>> {
        let mut q = self.queues.lock();
        loop {
            if q.stop {
                return None;
            }
            match p {
                Some(p) => return Some(q.by_prio[p].pop_front()),
                None => {
                    if let Some(d) = q.by_prio.iter_mut().rev().find_map(VecDeque::pop_front) {
                        return Some(Some(d));
                    }
                    let waiting = self.activity.as_ref().map(|_| Instant::now());
                    self.ready.wait(&mut q);
                    if let (Some(a), Some(t)) = (&self.activity, waiting) {
                        a.waited_since(t);
                    }
                }
            }
        }
    }

    fn run_one(&self, agents: &mut AgentTable, d: Demand) {
        match &self.activity {
            None => agents.run(d),
            Some(a) => {
                let t = Instant::now();
                agents.run(d);
                a.worked_since(t);
            }
        }
    }

    fn all_empty(&self) -> bool {
        self.queues.lock().by_prio.iter().all(VecDeque::is_empty)
    }

    fn wait_for_work(&self) -> bool {
        let mut q = self.queues.lock();
        while !q.stop && q.by_prio.iter().all(VecDeque::is_empty) {
            let waiting = self.activity.as_ref().map(|_| Instant::now());
            self.ready.wait(&mut q);
            if let (Some(a), Some(t)) = (&self.activity, waiting) {
                a.waited_since(t);
            }
        }
        !q.stop
    }

    /// The worker: runs demands until stopped. A panic escaping a demand (a payload's
    /// `Drop`, see `dispatcher::unwind`) is reported and the loop resumes; when stopped,
    /// the table keeps what counts the demands left (see `Drop`).
    fn run(&self, policy: Policy) {
        SERVING.set(self as *const Shared as usize);
        let mut agents = AgentTable::default();
        while let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.serve(policy, &mut agents)))
        {
            agents.contain(payload);
        }
        let left: Vec<Demand> = {
            let mut q = self.queues.lock();
            q.by_prio.iter_mut().flat_map(std::mem::take).collect()
        };
        for d in left {
            agents.drop_unrun(d);
        }
        agents.retire();
        *self.retired.lock() = Some(agents);
    }

    fn serve(&self, policy: Policy, agents: &mut AgentTable) {
        match policy {
            Policy::Strict => {
                while let Some(Some(d)) = self.take_from(None) {
                    self.run_one(agents, d);
                }
            }
            Policy::Quoted(quotas) => loop {
                if self.all_empty() && !self.wait_for_work() {
                    return;
                }
                // One sweep: demands arriving meanwhile at a priority already passed wait
                // for the next sweep.
                for p in (0..8).rev() {
                    for _ in 0..quotas[p] {
                        match self.take_from(Some(p)) {
                            None => return,
                            Some(None) => break,
                            Some(Some(d)) => self.run_one(agents, d),
                        }
                    }
                }
            },
        }
    }
}

/// Owns the thread; dropped with the last handle, binder and bound agent.
pub(crate) struct Core {
    prefix: String,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl Core {
    pub(crate) fn start(
        kind: &str,
        name: &str,
        policy: Policy,
        activity: bool,
    ) -> std::io::Result<Arc<Core>> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
            keys: KeyAllocator::default(),
            activity: activity.then(Activity::default),
            retired: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || s.run(policy))?;
        Ok(Arc::new(Core {
            prefix: format!("disp/{kind}/{name}"),
            shared,
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
        }))
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.shared.queues.lock().stop = true;
        self.shared.ready.notify_all();
        if let Some(t) = self.thread.lock().take() {
            if std::thread::current().id() != self.thread_id {
                let _ = t.join();
            }
        }
    }
}

impl StatsSource for Core {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        out(quantity(
            &self.prefix,
            "agent.count",
            self.shared.keys.live(),
        ));
        out(quantity(&self.prefix, "threads.count", 1));
        let lens: Vec<usize> = self
            .shared
            .queues
            .lock()
            .by_prio
            .iter()
            .map(VecDeque::len)
            .collect();
        for (p, n) in lens.into_iter().enumerate() {
            out(quantity(
                &format!("{}/p{p}", self.prefix),
                "demands.count",
                n,
            ));
        }
        if let Some(a) = &self.shared.activity {
            a.distribute(&format!("{}/wt", self.prefix), out);
        }
    }
}

/// The queue an agent of priority `prio` is given.
struct PrioQueue {
    shared: Arc<Shared>,
    prio: Priority,
}

impl EventQueue for PrioQueue {
    /// The worker runs demands through an `AgentTable`.
    fn starts_on_bind(&self) -> bool {
        true
    }

    /// One thread serves every priority: this one, if it is the worker.
    fn blocked_by_current_thread(&self) -> bool {
        SERVING.get() == Arc::as_ptr(&self.shared) as usize
    }

    fn push(&self, demand: Demand) {
        self.shared.push(self.prio, demand);
    }
}

pub(crate) struct PrioBinder {
    core: Arc<Core>,
    stats: SourceReg,
}

impl PrioBinder {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        PrioBinder {
            stats: SourceReg::new(core.clone()),
            core,
        }
    }
}

impl BinderImpl for PrioBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let queue = PrioQueue {
            shared: self.core.shared.clone(),
            prio: agent.priority(),
        };
        (Arc::new(queue), self.core.shared.keys.allocate())
    }

    fn unbind(&self, _agent: &AgentRef, key: AgentKey) {
        self.core.shared.keys.release(key);
    }

    /// Unbinding releases a key (and maybe a queue): never waits for a thread.
    fn unbinds_anywhere(&self) -> bool {
        true
    }
}
