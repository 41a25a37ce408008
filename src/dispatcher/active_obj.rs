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

use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::Mutex;

use super::idle::spin_threshold_or_default;
use super::serial::SerialWorker;
use super::serial_builder;
use super::{
    AgentKey, BindError, Binder, BinderImpl, BuildError, DispatcherHandle, EventQueue, KeyAllocator,
};
use crate::agent::{AgentId, AgentRef};
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

serial_builder!(
    doc: "Builds an `active_obj` dispatcher.",
    new: "A builder with the defaults: a generated name, no activity tracking. Agent threads are named `<name>-<agent id>`."
);

impl Builder {
    /// Makes the dispatcher; threads start as agents are bound.
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps the builders of every kind alike.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("active_obj");
        let shared = Arc::new(Threads {
            activity: self.common.activity(),
            spin: spin_threshold_or_default(self.spin),
            name: name.clone(),
            prefix: format!("disp/active_obj/{name}"),
            map: Mutex::new(AHashMap::new()),
        });
        let binder = ActiveObjBinder {
            stats: SourceReg::new(shared.clone()),
            shared,
        };
        Ok(DispatcherHandle::new(
            "active_obj",
            name,
            Binder(Arc::new(binder)),
        ))
    }
}

/// One agent's thread. Dropping it stops and joins the thread: unbinding (and so the
/// drop) runs on the finalizer thread, never on the agent's own thread.
struct AgentThread {
    worker: SerialWorker,
    keys: KeyAllocator,
}

/// The agents' threads, shared by the binder and the stats source.
struct Threads {
    activity: bool,
    spin: Duration,
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
            out(quantity(&prefix, "demands.count", t.worker.queue.waiting()));
            if let Some(a) = t.worker.queue.activity.as_ref() {
                a.distribute(&prefix, out);
            }
        }
    }
}

struct ActiveObjBinder {
    shared: Arc<Threads>,
    stats: SourceReg,
}

impl BinderImpl for ActiveObjBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        let worker = SerialWorker::spawn_spinning(
            format!("{}-{}", self.shared.name, agent.id().as_u64()),
            self.shared.activity,
            self.shared.spin,
        )
        .map_err(BindError::Spawn)?;
        self.shared.map.lock().insert(
            agent.id(),
            AgentThread {
                worker,
                keys: KeyAllocator::default(),
            },
        );
        Ok(())
    }

    fn undo_preallocation(&self, agent: &AgentRef) {
        // Dropped (stopped and joined) outside the lock.
        let t = self.shared.map.lock().remove(&agent.id());
        drop(t);
    }

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let threads = self.shared.map.lock();
        let t = threads
            .get(&agent.id())
            .expect("registration preallocates before it binds");
        (t.worker.queue.clone(), t.keys.allocate())
    }

    fn unbind(&self, agent: &AgentRef, _key: AgentKey) {
        let t = self.shared.map.lock().remove(&agent.id());
        drop(t);
    }
}
