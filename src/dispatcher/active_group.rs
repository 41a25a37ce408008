//! `active_group`: one thread per named group, shared by the agents bound with that name.
//!
//! A group's thread starts when its first agent is preallocated and is joined (by the
//! environment's finalizer thread) when its last agent is unbound; a later agent of the
//! same name starts a new one.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::dispatcher::active_group;
//! use agentbox::BindParams;
//!
//! struct Io(&'static str);
//! impl Agent for Io {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         println!("{} on {:?}", self.0, std::thread::current().name());
//!         ctx.deregister_coop(DeregReason::Normal);
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let disp = active_group::Builder::new().name("groups").build().unwrap();
//!     env.introduce_coop(|coop| {
//!         // Both agents share the thread of group "disk".
//!         coop.add_agent_with_binder(Io("reader"), disp.binder_with(BindParams::new().group("disk")));
//!         coop.add_agent_with_binder(Io("writer"), disp.binder_with(BindParams::new().group("disk")));
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
use crate::agent::AgentRef;
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

serial_builder!(
    doc: "Builds an `active_group` dispatcher.",
    new: "A builder with the defaults: a generated name, no activity tracking. Group threads are named `<name>-<group>`."
);

impl Builder {
    /// Makes the dispatcher; threads start as groups get their first agent. Its
    /// [`binder`](DispatcherHandle::binder) binds to the group named `""`; use
    /// [`binder_with`](DispatcherHandle::binder_with) and
    /// [`BindParams::group`](super::BindParams::group) for others.
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps the builders of every kind alike.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("active_group");
        let groups = Arc::new(Groups {
            activity: self.common.activity(),
            spin: spin_threshold_or_default(self.spin),
            name: name.clone(),
            prefix: format!("disp/active_group/{name}"),
            map: Mutex::new(AHashMap::new()),
        });
        let binder_for = {
            let groups = groups.clone();
            move |group: Arc<str>| {
                Binder(Arc::new(GroupBinder {
                    stats: SourceReg::new(groups.clone()),
                    groups: groups.clone(),
                    group,
                }))
            }
        };
        let default = binder_for(Arc::from(""));
        Ok(DispatcherHandle::new("active_group", name, default)
            .with_params(move |p| binder_for(p.group_name())))
    }
}

/// One group's thread and the number of agents that hold it. Dropping it stops and joins
/// the thread: the last agent leaves on the finalizer thread (or the registering thread
/// when a registration fails), never on the group's own thread.
struct Group {
    worker: SerialWorker,
    keys: KeyAllocator,
    agents: usize,
}

struct Groups {
    activity: bool,
    spin: Duration,
    name: Arc<str>,
    prefix: String,
    map: Mutex<AHashMap<Arc<str>, Group>>,
}

impl StatsSource for Groups {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let map = self.map.lock();
        out(quantity(
            &self.prefix,
            "agent.count",
            map.values().map(|g| g.agents).sum(),
        ));
        out(quantity(&self.prefix, "threads.count", map.len()));
        for (name, g) in map.iter() {
            let prefix = format!("{}/ag-{name}", self.prefix);
            out(quantity(&prefix, "demands.count", g.worker.queue.waiting()));
            if let Some(a) = g.worker.queue.activity.as_ref() {
                a.distribute(&prefix, out);
            }
        }
    }
}

impl Groups {
    /// Drops one agent's hold on the group; the last one stops and joins its thread.
    fn release(&self, group: &str) {
        let ended = {
            let mut map = self.map.lock();
            match map.get_mut(group) {
                Some(g) => {
                    g.agents -= 1;
                    if g.agents == 0 {
                        map.remove(group)
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        drop(ended);
    }
}

struct GroupBinder {
    groups: Arc<Groups>,
    group: Arc<str>,
    stats: SourceReg,
}

impl BinderImpl for GroupBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        let mut map = self.groups.map.lock();
        if let Some(g) = map.get_mut(&self.group) {
            g.agents += 1;
            return Ok(());
        }
        let worker = SerialWorker::spawn_spinning(
            format!("{}-{}", self.groups.name, self.group),
            self.groups.activity,
            self.groups.spin,
        )
        .map_err(BindError::Spawn)?;
        map.insert(
            self.group.clone(),
            Group {
                worker,
                keys: KeyAllocator::default(),
                agents: 1,
            },
        );
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {
        self.groups.release(&self.group);
    }

    fn bind(&self, _agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let map = self.groups.map.lock();
        let g = map
            .get(&self.group)
            .expect("registration preallocates before it binds");
        (g.worker.queue.clone(), g.keys.allocate())
    }

    fn unbind(&self, _agent: &AgentRef, key: AgentKey) {
        if let Some(g) = self.groups.map.lock().get(&self.group) {
            g.keys.release(key);
        }
        self.groups.release(&self.group);
    }
}
