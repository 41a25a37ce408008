//! `strictly_ordered`: one thread; a demand of a higher-priority agent always runs before
//! any queued demand of a lower one; FIFO within a priority.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::strictly_ordered;
//! let disp = strictly_ordered::Builder::new().name("prio").build().unwrap();
//! assert_eq!(disp.kind(), "strictly_ordered");
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::prio::{Core, Policy, PrioBinder};
use super::{Binder, BuildError, DispatcherHandle};

/// Builds a `strictly_ordered` dispatcher.
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

    /// The dispatcher's name, also its thread's (default `strictly_ordered-N`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether the thread measures its working and waiting time for the stats controller
    /// (default: off).
    pub fn activity_tracking(mut self, on: bool) -> Self {
        self.activity = on;
        self
    }

    /// Starts the thread.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if the thread cannot be started.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        static SEQ: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = match self.name {
            Some(n) => n.into(),
            None => format!("strictly_ordered-{}", SEQ.fetch_add(1, Ordering::Relaxed)).into(),
        };
        let core = Core::start("strictly_ordered", &name, Policy::Strict, self.activity)
            .map_err(BuildError::Spawn)?;
        Ok(DispatcherHandle::new(
            "strictly_ordered",
            name,
            Binder(Arc::new(PrioBinder::new(core))),
        ))
    }
}
