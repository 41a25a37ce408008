//! The agents a worker serves, owned by the worker and found by key.
//!
//! An agent's executor (its user value, context and handlers) arrives at the worker in a
//! `Bind` demand, the first demand of every agent, and is dropped there right after its
//! `Finish`. Demands name their agent by an [`AgentKey`]: a slot in the worker's table and
//! the generation of the slot's current occupant, so a stale demand (queued for an agent
//! that has finished) finds a different generation — or nothing — and is dropped.
//!
//! Keys are handed out by the dispatcher's [`KeyAllocator`] at binding and returned at
//! unbinding, which comes after the agent's `Finish` ran on the worker: so the worker has
//! always emptied a slot before it sees the `Bind` of the slot's next occupant.

use parking_lot::Mutex;

use super::{Demand, Run};
use crate::agent::{AgentArc, AgentExec};

/// Slot and generation of an agent on its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AgentKey {
    slot: u32,
    generation: u32,
}

impl AgentKey {
    /// The key of a queue that serves exactly one agent.
    pub(crate) fn single() -> AgentKey {
        AgentKey {
            slot: 0,
            generation: 0,
        }
    }
}

/// Hands out keys; shared by the binder (bind) and the finalizer (unbind).
#[derive(Default)]
pub(crate) struct KeyAllocator {
    state: Mutex<KeyState>,
}

#[derive(Default)]
struct KeyState {
    next_slot: u32,
    free: Vec<AgentKey>,
    live: usize,
}

impl KeyAllocator {
    pub(crate) fn allocate(&self) -> AgentKey {
        let mut s = self.state.lock();
        s.live += 1;
        match s.free.pop() {
            Some(k) => k,
            None => {
                let slot = s.next_slot;
                s.next_slot += 1;
                AgentKey {
                    slot,
                    generation: 0,
                }
            }
        }
    }

    pub(crate) fn release(&self, key: AgentKey) {
        let mut s = self.state.lock();
        s.live -= 1;
        s.free.push(AgentKey {
            slot: key.slot,
            generation: key.generation.wrapping_add(1),
        });
    }

    /// Slots handed out so far (the highest slot in use, plus one, at most).
    pub(crate) fn slots(&self) -> usize {
        self.state.lock().next_slot as usize
    }

    /// Agents bound now.
    pub(crate) fn live(&self) -> usize {
        self.state.lock().live
    }
}

type Entry = (u32, AgentArc, Box<dyn AgentExec>);

/// The worker's agents. Lives on the worker's stack; never shared.
#[derive(Default)]
pub(crate) struct AgentTable {
    slots: Vec<Option<Entry>>,
}

impl AgentTable {
    /// Makes room for `n` slots at once (a queue that knows how many agents were bound to
    /// it: one allocation instead of a growth per agent).
    pub(crate) fn reserve_slots(&mut self, n: usize) {
        if n > self.slots.capacity() {
            self.slots.reserve_exact(n - self.slots.len());
        }
    }

    /// Takes a `Bind` demand's agent into its slot, and runs its `Start` if the demand
    /// asks for it. Out of line: it runs once per agent, and the loop that runs every
    /// message is better without its code.
    #[cold]
    #[inline(never)]
    fn bind(&mut self, mut demand: Demand) {
        let key = demand.key;
        let slot = key.slot as usize;
        let starts = demand.starts_after_bind();
        let Some((core, exec)) = demand.take_bind() else {
            return;
        };
        if slot >= self.slots.len() {
            if slot >= self.slots.capacity() {
                // Grown by half, not doubled: a table per cooperation queue is common
                // (thread pools), and a million agents felt the doubling.
                let want = (slot + 1)
                    .max(self.slots.len() + self.slots.len() / 2)
                    .max(4);
                self.slots.reserve_exact(want - self.slots.len());
            }
            self.slots.resize_with(slot + 1, || None);
        }
        self.slots[slot] = Some((key.generation, core, exec));
        if starts {
            let finished = match &mut self.slots[slot] {
                Some((_, core, exec)) => exec.execute(core, Run::Start),
                None => false,
            };
            if finished {
                self.finish(slot);
            }
        }
    }

    /// The agent in `slot` handled its last demand: its executor (the user's agent) is
    /// dropped here, on its worker; then its coop learns that it is done. Once per agent:
    /// out of the loop that runs every message.
    #[cold]
    #[inline(never)]
    fn finish(&mut self, slot: usize) {
        if let Some((_, core, exec)) = self.slots[slot].take() {
            drop(exec);
            crate::agent::core::finished(&core);
        }
    }

    /// Runs one demand.
    #[inline]
    pub(crate) fn run(&mut self, mut demand: Demand) {
        let key = demand.key;
        let slot = key.slot as usize;
        if demand.is_bind() {
            return self.bind(demand);
        }
        let finished = match self.slots.get_mut(slot) {
            Some(Some((generation, core, exec))) if *generation == key.generation => {
                exec.execute(core, demand.run(|| core.mbox_id()))
            }
            // The agent has finished (or the slot has a new occupant): dropped.
            _ => false,
        };
        demand.recycle();
        if finished {
            self.finish(slot);
        }
    }
}
