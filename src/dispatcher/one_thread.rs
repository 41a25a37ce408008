//! `one_thread`: one worker thread and one FIFO queue shared by all agents bound to it.
//!
//! The environment's default dispatcher is one of these.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::one_thread;
//! use std::time::Duration;
//!
//! let disp = one_thread::Builder::new()
//!     .name("net")
//!     .spin_threshold(Duration::from_micros(50))
//!     .build()
//!     .unwrap();
//! assert_eq!(disp.kind(), "one_thread");
//! assert_eq!(disp.name(), "net");
//! ```

use std::sync::Arc;

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
    doc: "Builds a `one_thread` dispatcher.",
    new: "A builder with the defaults: a generated name, no activity tracking."
);

impl Builder {
    /// Starts the worker thread.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if the thread cannot be started.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("one_thread");
        let worker = SerialWorker::spawn_spinning(
            name.to_string(),
            self.common.activity(),
            spin_threshold_or_default(self.spin),
        )
        .map_err(BuildError::Spawn)?;
        let core = Arc::new(Core {
            prefix: format!("disp/one_thread/{name}"),
            worker,
            keys: KeyAllocator::default(),
        });
        Ok(DispatcherHandle::new(
            "one_thread",
            name,
            Binder(Arc::new(OneThreadBinder {
                stats: SourceReg::new(core.clone()),
                core,
            })),
        ))
    }
}

/// Owns the thread (in its worker): dropped when the last handle, binder and bound agent
/// are gone.
struct Core {
    prefix: String,
    worker: SerialWorker,
    keys: KeyAllocator,
}

impl StatsSource for Core {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        out(quantity(&self.prefix, "agent.count", self.keys.live()));
        out(quantity(&self.prefix, "threads.count", 1));
        let wt = format!("{}/wt", self.prefix);
        out(quantity(&wt, "demands.count", self.worker.queue.waiting()));
        if let Some(a) = self.worker.queue.activity.as_ref() {
            a.distribute(&wt, out);
        }
    }
}

struct OneThreadBinder {
    core: Arc<Core>,
    stats: SourceReg,
}

impl BinderImpl for OneThreadBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        self.stats.register(&agent.0.env);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, _agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        (self.core.worker.queue.clone(), self.core.keys.allocate())
    }

    fn unbind(&self, _agent: &AgentRef, key: AgentKey) {
        self.core.keys.release(key);
    }

    /// Unbinding releases a key (and maybe a queue): never waits for a thread.
    fn unbinds_anywhere(&self) -> bool {
        true
    }
}
