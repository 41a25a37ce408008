//! `one_per_prio`: a dedicated thread (and FIFO) per agent priority.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::one_per_prio;
//! let disp = one_per_prio::Builder::new().name("lanes").build().unwrap();
//! assert_eq!(disp.kind(), "one_per_prio");
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use parking_lot::Mutex;

use super::one_thread::quantity;
use super::serial::SerialQueue;
use super::{
    AgentKey, BindError, Binder, BinderImpl, BuildError, DispatcherHandle, EventQueue, KeyAllocator,
};
use crate::agent::AgentRef;
use crate::stats::{self, Quantity, SourceRef, StatsSource};

/// Builds a `one_per_prio` dispatcher.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    name: Option<String>,
    activity: bool,
}

impl Builder {
    /// A builder with the defaults: a generated name.
    pub fn new() -> Self {
        Builder::default()
    }

    /// The dispatcher's name; threads are named `<name>-p<priority>` (default
    /// `one_per_prio-N`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether the threads measure their working and waiting time for the stats controller
    /// (default: off).
    pub fn activity_tracking(mut self, on: bool) -> Self {
        self.activity = on;
        self
    }

    /// Starts the eight threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if a thread cannot be started (those started are stopped).
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        static SEQ: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = match self.name {
            Some(n) => n.into(),
            None => format!("one_per_prio-{}", SEQ.fetch_add(1, Ordering::Relaxed)).into(),
        };
        let mut lanes = Vec::with_capacity(8);
        for p in 0..8 {
            let queue = SerialQueue::with_activity(self.activity);
            let worker = queue.clone();
            match std::thread::Builder::new()
                .name(format!("{name}-p{p}"))
                .spawn(move || worker.run())
            {
                Ok(thread) => lanes.push(Lane {
                    thread_id: thread.thread().id(),
                    thread: Mutex::new(Some(thread)),
                    queue,
                    keys: KeyAllocator::default(),
                }),
                Err(e) => {
                    drop(lanes); // stops and joins the lanes started
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        let lanes = Arc::new(Lanes {
            prefix: format!("disp/one_per_prio/{name}"),
            lanes,
        });
        Ok(DispatcherHandle::new(
            "one_per_prio",
            name,
            Binder(Arc::new(LaneBinder {
                source: lanes.clone(),
                lanes,
            })),
        ))
    }
}

struct Lane {
    queue: Arc<SerialQueue>,
    keys: KeyAllocator,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.queue.stop();
        if let Some(t) = self.thread.lock().take() {
            if std::thread::current().id() != self.thread_id {
                let _ = t.join();
            }
        }
    }
}

struct Lanes {
    prefix: String,
    lanes: Vec<Lane>,
}

impl StatsSource for Lanes {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let agents = self.lanes.iter().map(|l| l.keys.live()).sum();
        out(quantity(&self.prefix, "agent.count", agents));
        out(quantity(&self.prefix, "threads.count", self.lanes.len()));
        for (p, lane) in self.lanes.iter().enumerate() {
            let prefix = format!("{}/p{p}", self.prefix);
            out(quantity(&prefix, "demands.count", lane.queue.waiting()));
            if let Some(a) = &lane.queue.activity {
                a.distribute(&prefix, out);
            }
        }
    }
}

struct LaneBinder {
    lanes: Arc<Lanes>,
    source: SourceRef,
}

impl BinderImpl for LaneBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        stats::register_for(agent, &self.source);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let lane = &self.lanes.lanes[agent.priority().index()];
        (lane.queue.clone(), lane.keys.allocate())
    }

    fn unbind(&self, agent: &AgentRef, key: AgentKey) {
        self.lanes.lanes[agent.priority().index()].keys.release(key);
    }
}
