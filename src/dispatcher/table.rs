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
//!
//! A slot whose agent finished keeps what the demands still queued for that agent need to
//! be counted as dropped (`DropCounts::receiver_finished`): a sender that saw the agent
//! alive may queue a message after its `Finish`.

use std::any::Any;

use parking_lot::Mutex;

use super::unwind::{self, Gone};
use super::{Demand, Run};
use crate::agent::{AgentArc, ExecBox};

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

/// One slot of a worker's table.
#[derive(Default)]
enum Slot {
    /// Never had an agent.
    #[default]
    Empty,
    /// Its agent, bound and not finished.
    Live {
        generation: u32,
        core: AgentArc,
        exec: ExecBox,
    },
    /// Its last agent finished: what a demand still queued for it needs to be counted
    /// (until the slot's next agent is bound).
    Finished(Gone),
}

/// The worker's agents. Lives on the worker's stack (or in the queue a thread pool's
/// workers take turns at); never shared.
pub(crate) struct AgentTable {
    slots: Vec<Slot>,
    /// The key of the demand run last: the agent whose message was being dropped when a
    /// panic escaped [`run`](Self::run) (see [`contain`](Self::contain)).
    current: AgentKey,
}

impl Default for AgentTable {
    fn default() -> Self {
        AgentTable {
            slots: Vec::new(),
            current: AgentKey::single(),
        }
    }
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
            self.slots.resize_with(slot + 1, Slot::default);
        }
        self.slots[slot] = Slot::Live {
            generation: key.generation,
            core,
            exec,
        };
        if starts {
            self.current = key;
            let finished = match &mut self.slots[slot] {
                Slot::Live { core, exec, .. } => exec.execute(core, Run::Start),
                _ => false,
            };
            if finished {
                self.finish(slot);
            }
        }
    }

    /// The agent in `slot` handled its last demand: its executor (the user's agent) is
    /// dropped here, on its worker (a panic in its `Drop` goes to its exception reaction);
    /// then its coop learns that it is done. Once per agent: out of the loop that runs
    /// every message.
    #[cold]
    #[inline(never)]
    fn finish(&mut self, slot: usize) {
        let Some(entry) = self.slots.get_mut(slot) else {
            return;
        };
        if !matches!(entry, Slot::Live { .. }) {
            return;
        }
        let Slot::Live { core, exec, .. } = std::mem::take(entry) else {
            return;
        };
        *entry = Slot::Finished(Gone::of(&core));
        unwind::drop_exec(&core, exec);
        crate::agent::core::finished(&core);
    }

    /// Runs one demand.
    ///
    /// A panic may escape only from dropping the message after its handler (a payload's
    /// `Drop`; the handler's own panics are caught around it): the worker's loop catches
    /// it, hands it to [`contain`](Self::contain) and goes on.
    ///
    /// Inlined into the workers' loops: a frame of its own cost each message its register
    /// saves and restores (~17 instructions per message, callgrind, ping-pong).
    #[inline(always)]
    pub(crate) fn run(&mut self, mut demand: Demand) {
        let key = demand.key;
        let slot = key.slot as usize;
        if demand.is_bind() {
            return self.bind(demand);
        }
        self.current = key;
        let finished = match self.slots.get_mut(slot) {
            Some(Slot::Live {
                generation,
                core,
                exec,
            }) if *generation == key.generation => match demand.message_parts(|| core.mbox_id()) {
                Some((mbox, msg)) => exec.execute_message(core, mbox, msg),
                None => exec.execute(core, demand.run_plain()),
            },
            // The agent has finished (or the slot has a new occupant): dropped, counted.
            _ => return self.drop_unrun(demand),
        };
        demand.recycle();
        if finished {
            self.finish(slot);
        }
    }

    /// Drops a demand that will not run: its agent finished, or its worker stops. A
    /// message is counted as dropped because its receiver finished, in the environment of
    /// the slot's agent (a later occupant's, if the slot has one by now: a dispatcher
    /// serving several environments may count such a drop in the wrong one).
    #[cold]
    #[inline(never)]
    pub(crate) fn drop_unrun(&self, demand: Demand) {
        let gone = match self.slots.get(demand.key.slot as usize) {
            Some(Slot::Live { core, .. }) => Some(Gone::of(core)),
            Some(Slot::Finished(g)) => Some(g.clone()),
            _ => None,
        };
        unwind::drop_unrun(demand, gone.as_ref());
    }

    /// Reports a panic that escaped [`run`](Self::run) (caught by the worker's loop): to
    /// the exception reaction of the agent whose demand ran, or to the error logger. An
    /// agent that had finished when it escaped (its `Finish` ran, but a panic cut it short
    /// before its executor was dropped) is finished now, so that its coop is not left
    /// waiting.
    #[cold]
    #[inline(never)]
    pub(crate) fn contain(&mut self, payload: Box<dyn Any + Send>) {
        let msg = unwind::message_of(payload);
        let slot = self.current.slot as usize;
        match self.slots.get(slot) {
            Some(Slot::Live {
                generation, core, ..
            }) if *generation == self.current.generation => {
                let core = core.clone();
                unwind::react(&core, msg, "dropping a message after its handler");
                if core.status() == crate::agent::core::FINISHED {
                    self.finish(slot);
                }
            }
            Some(Slot::Finished(g)) => unwind::log(Some(g.env()), &msg, "running a demand"),
            _ => unwind::log(None, &msg, "running a demand"),
        }
    }

    /// Lets the agents go when the worker stops (each has normally finished: a dispatcher
    /// stops when no agent is bound to it): executors still here are dropped, their
    /// panics contained; what is kept counts the demands still queued.
    pub(crate) fn retire(&mut self) {
        for entry in &mut self.slots {
            // Only a live slot is taken: a finished one keeps its `Gone`, which the demands
            // a sender queued after that agent's `Finish` still need to be counted.
            if !matches!(entry, Slot::Live { .. }) {
                continue;
            }
            if let Slot::Live { core, exec, .. } = std::mem::take(entry) {
                *entry = Slot::Finished(Gone::of(&core));
                unwind::drop_exec(&core, exec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// A slot is what an agent costs in its worker's table: keeping what a finished agent's
    /// stale demands need (issue 22) made it no larger than the live entry it was.
    #[test]
    fn a_slot_is_four_words_live_or_finished() {
        assert!(std::mem::size_of::<super::Slot>() <= 32);
    }

    /// A message queued after its agent's `Finish` and dropped once the worker has retired
    /// its table (a sender saw the agent alive, then the worker stopped: `active_obj`
    /// stops it right after) is still counted as `receiver_finished`: retiring keeps the
    /// slots of agents that had finished (it emptied them, and such a message went
    /// uncounted, 1 in ~10 runs of the dispatcher suite's churn test on `active_obj`).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "parking_lot_core's futex syscall is rejected by current miri"
    )]
    fn a_message_dropped_after_retirement_counts_for_an_agent_that_had_finished() {
        crate::test_support::within_patience(|| {
            use super::{AgentKey, AgentTable};
            use crate::dispatcher::{Demand, DemandKind};
            use crate::Message;
            struct Quiet;
            impl crate::agent::Agent for Quiet {}
            crate::Environment::launch(|env| {
                let (core, exec) = crate::agent::create(Quiet, env);
                exec.hand_over();
                let key = AgentKey::single();
                let late = || Demand::message(key, core.mbox_id(), Message::new(5u64));
                let mut table = AgentTable::default();
                table.run(Demand::bind(key, core.clone(), true));
                table.run(Demand::new(key, DemandKind::Finish));
                table.drop_unrun(late());
                assert_eq!(env.drop_counts().receiver_finished, 1, "before retiring");
                table.retire();
                table.drop_unrun(late());
                assert_eq!(env.drop_counts().receiver_finished, 2, "after retiring");
                assert_eq!(env.drop_counts().total(), 2);
            })
            .unwrap();
        });
    }
}
