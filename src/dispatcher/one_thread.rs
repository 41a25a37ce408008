//! `one_thread`: one worker thread and one FIFO queue shared by all agents bound to it.
//!
//! The environment's default dispatcher is one of these.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::one_thread;
//! let disp = one_thread::Builder::new().name("net").build().unwrap();
//! assert_eq!(disp.kind(), "one_thread");
//! assert_eq!(disp.name(), "net");
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use parking_lot::Mutex;

use super::serial::SerialQueue;
use super::{
    AgentKey, BindError, Binder, BinderImpl, BuildError, DispatcherHandle, EventQueue, KeyAllocator,
};
use crate::agent::AgentRef;
use crate::stats::{self, Quantity, SourceRef, StatsSource};

/// Builds a `one_thread` dispatcher.
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

    /// The dispatcher's name, also its thread's name (default: `one_thread-N`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether the worker measures its working and waiting time for the stats controller
    /// (default: off, and then it never reads the clock).
    pub fn activity_tracking(mut self, on: bool) -> Self {
        self.activity = on;
        self
    }

    /// Starts the worker thread.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if the thread cannot be started.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        static SEQ: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = match self.name {
            Some(n) => n.into(),
            None => format!("one_thread-{}", SEQ.fetch_add(1, Ordering::Relaxed)).into(),
        };
        let queue = SerialQueue::with_activity(self.activity);
        let worker_queue = queue.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || worker_queue.run())
            .map_err(BuildError::Spawn)?;
        let core = Arc::new(Core {
            prefix: format!("disp/one_thread/{name}"),
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
            queue,
            keys: KeyAllocator::default(),
        });
        Ok(DispatcherHandle::new(
            "one_thread",
            name,
            Binder(Arc::new(OneThreadBinder {
                source: core.clone(),
                core,
            })),
        ))
    }
}

/// Owns the thread: dropped when the last handle, binder and bound agent are gone.
struct Core {
    prefix: String,
    queue: Arc<SerialQueue>,
    keys: KeyAllocator,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.queue.stop();
        if let Some(t) = self.thread.lock().take() {
            // The last reference may die on the worker itself (a handler dropping a handle):
            // it cannot join itself, and it stops right after this demand anyway.
            if std::thread::current().id() != self.thread_id {
                let _ = t.join();
            }
        }
    }
}

impl StatsSource for Core {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        out(quantity(&self.prefix, "agent.count", self.keys.live()));
        out(quantity(&self.prefix, "threads.count", 1));
        let wt = format!("{}/wt", self.prefix);
        out(quantity(&wt, "demands.count", self.queue.waiting()));
        if let Some(a) = &self.queue.activity {
            a.distribute(&wt, out);
        }
    }
}

pub(crate) fn quantity(prefix: &str, suffix: &'static str, value: usize) -> Quantity {
    Quantity {
        prefix: prefix.to_owned(),
        suffix,
        value,
    }
}

struct OneThreadBinder {
    core: Arc<Core>,
    source: SourceRef,
}

impl BinderImpl for OneThreadBinder {
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError> {
        stats::register_for(agent, &self.source);
        Ok(())
    }

    fn undo_preallocation(&self, _agent: &AgentRef) {}

    fn bind(&self, _agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
        (self.core.queue.clone(), self.core.keys.allocate())
    }

    fn unbind(&self, _agent: &AgentRef, key: AgentKey) {
        self.core.keys.release(key);
    }
}
