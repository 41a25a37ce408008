//! `quoted_round_robin`: one thread sweeping priorities P7 → P0, taking at most a quota of
//! demands from each non-empty priority per sweep; demands arriving during a sweep do not
//! preempt it.
//!
//! # Examples
//!
//! ```
//! use agentbox::dispatcher::quoted_round_robin;
//! use agentbox::Priority;
//! let disp = quoted_round_robin::Builder::new()
//!     .default_quota(2)
//!     .quota(Priority::P7, 10)
//!     .build()
//!     .unwrap();
//! assert_eq!(disp.kind(), "quoted_round_robin");
//! ```

use std::sync::Arc;

use super::prio::{Core, Policy, PrioBinder};
use super::{common_builder_methods, Binder, BuildError, CommonParams, DispatcherHandle};
use crate::agent::Priority;

/// Builds a `quoted_round_robin` dispatcher.
#[derive(Debug, Clone)]
pub struct Builder {
    common: CommonParams,
    quotas: [Option<usize>; 8],
    default_quota: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            common: CommonParams::default(),
            quotas: [None; 8],
            default_quota: 1,
        }
    }
}

impl Builder {
    /// A builder with the defaults: quota 1 for every priority, a generated name, no
    /// activity tracking.
    pub fn new() -> Self {
        Builder::default()
    }

    common_builder_methods!();

    /// The quota of priorities without one of their own (default 1).
    pub fn default_quota(mut self, n: usize) -> Self {
        self.default_quota = n;
        self
    }

    /// The quota of one priority: demands taken from it per sweep.
    pub fn quota(mut self, priority: Priority, n: usize) -> Self {
        self.quotas[priority.index()] = Some(n);
        self
    }

    /// Starts the thread.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidParameter`] for a quota of 0; [`BuildError::Spawn`].
    pub fn build(self) -> Result<DispatcherHandle, BuildError> {
        let quotas = self.quotas.map(|q| q.unwrap_or(self.default_quota));
        if quotas.contains(&0) {
            return Err(BuildError::InvalidParameter("quotas must be at least 1"));
        }
        let name = self.common.name("quoted_round_robin");
        let core = Core::start(
            "quoted_round_robin",
            &name,
            Policy::Quoted(quotas),
            self.common.activity(),
        )
        .map_err(BuildError::Spawn)?;
        Ok(DispatcherHandle::new(
            "quoted_round_robin",
            name,
            Binder(Arc::new(PrioBinder::new(core))),
        ))
    }
}
