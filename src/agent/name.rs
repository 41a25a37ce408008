//! Agents' optional names (SObjectizer's `so_agent_name`): [`Context::set_name`] and
//! [`AgentRef::name`](crate::AgentRef::name).
//!
//! The names live in a table of the agent's environment (no process-wide table: many
//! environments run side by side), by agent id, not in the agents: most agents have no
//! name, and an agent's core has a byte budget (see `size_budget` in `agent/mod.rs`). A
//! name is forgotten when the agent has finished (its context is dropped); with no named
//! agent alive, reading or forgetting a name is one relaxed atomic load.
//!
//! [`Context::set_name`]: crate::Context::set_name

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use thiserror::Error;

use super::id::AgentId;

/// Why [`Context::set_name`](crate::Context::set_name) refused a name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AgentNameError {
    /// The agent has a name already; names are set once.
    #[error("the agent is named {name:?} already")]
    AlreadyNamed {
        /// The name it keeps.
        name: String,
    },
}

/// The names of one environment's agents, by agent id (ids are never reused). Most
/// agents have no name: with none named, reading or forgetting one is a relaxed load.
#[derive(Default)]
pub(crate) struct AgentNames {
    /// How many entries `names` holds (read without its lock).
    named: AtomicUsize,
    names: Mutex<BTreeMap<u64, Arc<str>>>,
}

impl AgentNames {
    /// Names agent `id` (once).
    pub(crate) fn set(&self, id: AgentId, name: String) -> Result<(), AgentNameError> {
        let mut names = self.names.lock();
        if let Some(old) = names.get(&id.0) {
            return Err(AgentNameError::AlreadyNamed {
                name: old.to_string(),
            });
        }
        names.insert(id.0, Arc::from(name));
        self.named.store(names.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Agent `id`'s name, if it has one.
    pub(crate) fn get(&self, id: AgentId) -> Option<Arc<str>> {
        if self.named.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.names.lock().get(&id.0).cloned()
    }

    /// Forgets agent `id`'s name (it has finished).
    #[inline]
    pub(crate) fn forget(&self, id: AgentId) {
        if self.named.load(Ordering::Relaxed) != 0 {
            self.forget_slow(id);
        }
    }

    #[cold]
    #[inline(never)]
    fn forget_slow(&self, id: AgentId) {
        let mut names = self.names.lock();
        if names.remove(&id.0).is_some() {
            self.named.store(names.len(), Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for AgentNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentNames")
            .field("named", &self.named.load(Ordering::Relaxed))
            .finish()
    }
}
