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

use std::sync::Arc;

use super::prio::{Core, Policy, PrioBinder};
use super::{common_builder_methods, Binder, BuildError, CommonParams, DispatcherHandle};

/// Builds a `strictly_ordered` dispatcher.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    common: CommonParams,
}

impl Builder {
    /// A builder with the defaults: a generated name, no activity tracking.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    /// Starts the thread.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if the thread cannot be started.
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let name = self.common.name("strictly_ordered");
        let core = Core::start(
            "strictly_ordered",
            &name,
            Policy::Strict,
            self.common.activity(),
        )
        .map_err(BuildError::Spawn)?;
        Ok(DispatcherHandle::new(
            "strictly_ordered",
            name,
            Binder(Arc::new(PrioBinder::new(core))),
        ))
    }
}
