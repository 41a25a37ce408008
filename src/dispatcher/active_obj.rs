//! `active_obj`: a thread and a queue of its own for every agent bound to it.
//!
//! The thread is started when the agent's coop is being registered (before any agent of
//! the coop is bound, so a failure to start one fails the registration cleanly) and joined
//! after the agent's `on_finish`, by the environment's finalizer thread.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::dispatcher::active_obj;
//!
//! struct Worker;
//! impl Agent for Worker {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         println!("running on {:?}", std::thread::current().name());
//!         ctx.deregister_coop(DeregReason::Normal);
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let disp = active_obj::Builder::new().name("workers").build().unwrap();
//!     env.introduce_coop(|coop| {
//!         coop.set_binder(disp.binder());
//!         coop.add_agent(Worker);
//!         coop.add_agent(Worker);
//!     }).unwrap();
//! }).unwrap();
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use ahash::AHashMap;
use parking_lot::Mutex;

use super::one_thread::quantity;
use super::serial::SerialQueue;
use super::{
    AgentKey, BindError, Binder, BinderImpl, BuildError, DispatcherHandle, EventQueue, KeyAllocator,
};
use crate::agent::{AgentId, AgentRef};
use crate::stats::{self, Quantity, SourceRef, StatsSource};

/// Builds an `active_obj` dispatcher.
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

    /// The dispatcher's name; agent threads are named `<name>-<agent id>` (default name:
    /// `active_obj-N`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether agent threads measure their working and waiting time for the stats
    /// controller (default: off).
    pub fn activity_tracking(mut self, on: bool) -> Self {
        self.activity = on;
        self
    }

    /// Makes the dispatcher; threads start as agents are bound.
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps the builders of every kind alike.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        static SEQ: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = match self.name {
            Some(n) => n.into(),
            None => format!("active_obj-{}", SEQ.fetch_add(1, Ordering::Relaxed)).into(),
        };
        let shared = Arc::new(Threads {
            activity: self.activity,
            name: name.clone(),
            prefix: format!("disp/active_obj/{name}"),
            map: Mutex::new(AHashMap::new()),
        });
        let binder = ActiveObjBinder {
            source: shared.clone(),
            shared,
        };
        Ok(DispatcherHandle::new(
            "active_obj",
            name,
            Binder(Arc::new(binder)),
        ))
    }
}

/// One agent's thread.
struct AgentThread {
    queue: Arc<SerialQueue>,
    keys: KeyAllocator,
    thread: JoinHandle<()>,
}

impl AgentThread {
    fn stop_and_join(self) {
        self.queue.stop();
        // Unbinding runs on the finalizer thread, never on this agent's own thread.
        let _ = self.thread.join();
    }
}

/// The agents' threads, shared by the binder and the stats source.
struct Threads {
    activity: bool,
    name: Arc<str>,
    prefix: String,
    map: Mutex<AHashMap<AgentId, AgentThread>>,
}

impl StatsSource for Threads {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let map = self.map.lock();
        out(quantity(&self.prefix, "agent.count", map.len()));
        out(quantity(&self.prefix, "threads.count", map.len()));
        for (id, t) in map.iter() {
            let prefix = format!("{}/ao-{}", self.prefix, id.as_u64());
            out(quantity(&prefix, "demands.count", t.queue.waiting()));
            if let Some(a) = &t.queue.activity {
                a.distribute(&prefix, out);
            }
        }
    }
}

struct ActiveObjBinder {
    shared: Arc<Threads>,
    source: SourceRef,
}

impl BinderImpl for ActiveObjBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        stats::register_for(agent, &self.source);
        let queue = SerialQueue::with_activity(self.shared.activity);
        let worker = queue.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}-{}", self.shared.name, agent.id().as_u64()))
            .spawn(move || worker.run())
            .map_err(BindError::Spawn)?;
        self.shared.map.lock().insert(
            agent.id(),
            AgentThread {
                queue,
                keys: KeyAllocator::default(),
                thread,
            },
        );
        Ok(())
    }

    fn undo_preallocation(&self, agent: &AgentRef) {
        let t = self.shared.map.lock().remove(&agent.id());
        if let Some(t) = t {
            t.stop_and_join();
        }
    }

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let threads = self.shared.map.lock();
        let t = threads
            .get(&agent.id())
            .expect("registration preallocates before it binds");
        (t.queue.clone(), t.keys.allocate())
    }

    fn unbind(&self, agent: &AgentRef, _key: AgentKey) {
        let t = self.shared.map.lock().remove(&agent.id());
        if let Some(t) = t {
            t.stop_and_join();
        }
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        // Agents still bound keep the binder alive, so only unused threads are left here.
        for (_, t) in self.map.get_mut().drain() {
            t.stop_and_join();
        }
    }
}
