//! Who an agent is: its process-wide id and its priority.

use std::fmt;

/// Agent priorities, `P0` (lowest, the default) to `P7` (highest).
///
/// Multi-consumer mboxes deliver to higher-priority subscribers first; a coop binds its
/// agents in priority order; priority dispatchers schedule by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[allow(missing_docs)]
pub enum Priority {
    #[default]
    P0,
    P1,
    P2,
    P3,
    P4,
    P5,
    P6,
    P7,
}

impl Priority {
    /// All priorities, lowest first.
    pub const ALL: [Priority; 8] = [
        Priority::P0,
        Priority::P1,
        Priority::P2,
        Priority::P3,
        Priority::P4,
        Priority::P5,
        Priority::P6,
        Priority::P7,
    ];

    /// 0 for `P0` … 7 for `P7`.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The process-wide unique id of an agent.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct AgentId(pub(crate) u64);

impl AgentId {
    /// The raw number (also the id of the agent's direct mbox).
    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "agent:{}", self.0)
    }
}
