//! `one_per_prio`: a dedicated thread (and FIFO) per agent priority.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::one_per_prio;
//! let disp = one_per_prio::Builder::new().name("lanes").build().unwrap();
//! assert_eq!(disp.kind(), "one_per_prio");
//! ```

use std::sync::Arc;

use super::serial::SerialWorker;
use super::{
    common_builder_methods, AgentKey, BindError, Binder, BinderImpl, BuildError, CommonParams,
    DispatcherHandle, EventQueue, KeyAllocator,
};
use crate::agent::AgentRef;
use crate::stats::source::quantity;
use crate::stats::{Quantity, SourceReg, StatsSource};

/// Builds a `one_per_prio` dispatcher.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    common: CommonParams,
}

impl Builder {
    /// A builder with the defaults: a generated name, no activity tracking. Threads are
    /// named `<name>-p<priority>`.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    /// Starts the eight threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if a thread cannot be started (those started are stopped).
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("one_per_prio");
        let mut lanes = Vec::with_capacity(8);
        for p in 0..8 {
            // On error, the lanes started so far are dropped: stopped and joined.
            let worker = SerialWorker::spawn(format!("{name}-p{p}"), self.common.activity())
                .map_err(BuildError::Spawn)?;
            lanes.push(Lane {
                worker,
                keys: KeyAllocator::default(),
            });
        }
        let lanes = Arc::new(Lanes {
            prefix: format!("disp/one_per_prio/{name}"),
            lanes,
        });
        Ok(DispatcherHandle::new(
            "one_per_prio",
            name,
            Binder(Arc::new(LaneBinder {
                stats: SourceReg::new(lanes.clone()),
                lanes,
            })),
        ))
    }
}

struct Lane {
    worker: SerialWorker,
    keys: KeyAllocator,
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
            out(quantity(
                &prefix,
                "demands.count",
                lane.worker.queue.waiting(),
            ));
            if let Some(a) = lane.worker.queue.activity.as_ref() {
                a.distribute(&prefix, out);
            }
        }
    }
}

struct LaneBinder {
    lanes: Arc<Lanes>,
    stats: SourceReg,
}

impl BinderImpl for LaneBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        let lane = &self.lanes.lanes[agent.priority().index()];
        (lane.worker.queue.clone(), lane.keys.allocate())
    }

    fn unbind(&self, agent: &AgentRef, key: AgentKey) {
        self.lanes.lanes[agent.priority().index()].keys.release(key);
    }

    /// Unbinding releases a key (and maybe a queue): never waits for a thread.
    fn unbinds_anywhere(&self) -> bool {
        true
    }
}
