//! Agents' optional names (SObjectizer's `so_agent_name`): [`Context::set_name`] and
//! [`AgentRef::name`](crate::AgentRef::name).
//!
//! The names live in one table of the process, by agent id (ids are never reused), not in
//! the agents: most agents have no name, and an agent's core has a byte budget (see
//! `size_budget` in `agent/mod.rs`). A name is forgotten when the agent's core is dropped;
//! with no named agent alive, reading or forgetting a name is one relaxed atomic load.
//!
//! [`Context::set_name`]: crate::Context::set_name

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use thiserror::Error;

use super::AgentId;

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

/// How many entries [`NAMES`] holds (read without its lock).
static NAMED: AtomicUsize = AtomicUsize::new(0);
static NAMES: Mutex<BTreeMap<u64, Arc<str>>> = Mutex::new(BTreeMap::new());

/// Names agent `id` (once).
pub(crate) fn set(id: AgentId, name: String) -> Result<(), AgentNameError> {
    let mut names = NAMES.lock();
    if let Some(old) = names.get(&id.0) {
        return Err(AgentNameError::AlreadyNamed {
            name: old.to_string(),
        });
    }
    names.insert(id.0, Arc::from(name));
    NAMED.store(names.len(), Ordering::Relaxed);
    Ok(())
}

/// Agent `id`'s name, if it has one.
pub(crate) fn get(id: AgentId) -> Option<Arc<str>> {
    if NAMED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    NAMES.lock().get(&id.0).cloned()
}

/// Forgets agent `id`'s name (its core is being dropped).
#[inline]
pub(crate) fn forget(id: AgentId) {
    if NAMED.load(Ordering::Relaxed) != 0 {
        forget_slow(id);
    }
}

#[cold]
#[inline(never)]
fn forget_slow(id: AgentId) {
    let mut names = NAMES.lock();
    if names.remove(&id.0).is_some() {
        NAMED.store(names.len(), Ordering::Relaxed);
    }
}
