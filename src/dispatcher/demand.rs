//! The demand: one queued execution for one agent.

#![allow(unsafe_code)]

use std::mem::ManuallyDrop;

use super::AgentKey;
use crate::agent::{AgentArc, AgentExec};
use crate::mbox::MboxId;
use crate::message::Message;

/// One queued execution for one agent, named by its key on the queue's worker (no
/// reference count per message).
///
/// 24 bytes, the same for every kind: a message's mbox id and payload, or a reserved id for
/// a control demand and, for a `Bind`, the agent's core. A backlog of small messages is
/// mostly demands, so their size is what a queued message costs (an enum of the kinds was
/// 56 bytes: the compiler cannot fold the tag into a pointer when two variants carry
/// data). The kind is the mbox id, and the body a union that the id tells how to read.
pub(crate) struct Demand {
    pub(crate) key: AgentKey,
    /// The message's mbox, or one of the reserved ids `BIND`, `BIND_START`, `START`,
    /// `FINISH`, `STOP_WORKER`.
    mbox: MboxId,
    /// The agent's core for a bind (`is_bind`); the message for any other demand (a
    /// placeholder signal for `Start`, `Finish` and the worker's stop).
    body: Body,
}

/// What a demand carries; its `mbox` says which field is there.
union Body {
    msg: ManuallyDrop<Message>,
    core: ManuallyDrop<AgentArc>,
}

/// Reserved mbox ids of the control demands (mbox ids count up from 1 and never get near).
/// The two binds are the two highest, so that `is_bind` is one comparison.
const BIND: MboxId = MboxId(u64::MAX);
/// A `Bind` whose worker runs the agent's `Start` right after taking it.
const BIND_START: MboxId = MboxId(u64::MAX - 1);
const START: MboxId = MboxId(u64::MAX - 2);
const FINISH: MboxId = MboxId(u64::MAX - 3);
/// The id of a demand for no agent that tells a serial worker to stop.
const STOP_WORKER: MboxId = MboxId(u64::MAX - 4);

/// What a demand asks for, to be queued. (An agent's first demand, the `Bind` that moves
/// its executor to the worker, is made by [`Demand::bind`].)
pub(crate) enum DemandKind {
    /// `on_start`: always the first demand an agent handles.
    Start,
    /// `on_finish`: always the last.
    Finish,
    /// A message from mbox `mbox`.
    Message { mbox: MboxId, msg: Message },
}

/// What a demand asks for, as the worker runs it (`Bind` is taken by the worker's table).
pub(crate) enum Run<'a> {
    /// Never run by an executor: the worker's table takes it.
    Bind,
    Start,
    Finish,
    Message {
        mbox: MboxId,
        msg: &'a Message,
    },
}

impl Demand {
    #[inline]
    pub(crate) fn new(key: AgentKey, kind: DemandKind) -> Demand {
        let (mbox, msg) = match kind {
            DemandKind::Message { mbox, msg } => return Demand::message(key, mbox, msg),
            DemandKind::Start => (START, Message::placeholder()),
            DemandKind::Finish => (FINISH, Message::placeholder()),
        };
        Demand::message(key, mbox, msg)
    }

    /// The `Bind` that moves an agent's executor to its worker, always the agent's first
    /// demand; with `starts`, a `BindStart`: the worker runs `Start` right after (for
    /// queues whose worker runs demands through an [`AgentTable`](super::AgentTable); see
    /// [`EventQueue::starts_on_bind`](super::EventQueue::starts_on_bind)).
    ///
    /// The executor waits in the core (left there by `agent::core::activate`), and the
    /// demand carries the core itself: binding allocates nothing. An executor whose `Bind`
    /// is dropped unrun goes with its coop, or with the core.
    pub(crate) fn bind(key: AgentKey, core: AgentArc, starts: bool) -> Demand {
        Demand {
            key,
            mbox: if starts { BIND_START } else { BIND },
            body: Body {
                core: ManuallyDrop::new(core),
            },
        }
    }

    /// A message demand (what [`new`](Self::new) makes of `DemandKind::Message`).
    #[inline]
    pub(crate) fn message(key: AgentKey, mbox: MboxId, msg: Message) -> Demand {
        debug_assert!(mbox.0 < BIND_START.0);
        Demand {
            key,
            mbox,
            body: Body {
                msg: ManuallyDrop::new(msg),
            },
        }
    }

    /// A demand for no agent that tells a serial worker to stop: its channel carries
    /// demands only, so that a channel slot is a demand's 24 bytes and no more (an enum of
    /// a demand and a stop command took more, a demand having no spare bit pattern).
    pub(crate) fn stop_worker() -> Demand {
        Demand::message(AgentKey::single(), STOP_WORKER, Message::placeholder())
    }

    #[inline]
    pub(crate) fn is_stop_worker(&self) -> bool {
        self.mbox == STOP_WORKER
    }

    /// A `Bind`, with or without the `Start` after it.
    #[inline]
    pub(crate) fn is_bind(&self) -> bool {
        self.mbox.0 >= BIND_START.0
    }

    /// A `Bind` whose worker runs `Start` right after it.
    pub(crate) fn starts_after_bind(&self) -> bool {
        self.mbox == BIND_START
    }

    /// The agent and executor of a `Bind` demand; `None` for any other demand, and once
    /// the executor was taken.
    pub(crate) fn take_bind(&mut self) -> Option<(AgentArc, Box<dyn AgentExec>)> {
        if !self.is_bind() {
            return None;
        }
        // SAFETY: a bind's body is its core (`bind` is the only maker of bind ids, and
        // `message` refuses them).
        let core = AgentArc::clone(unsafe { &self.body.core });
        let exec = core.take_over()?;
        Some((core, exec))
    }

    /// Done with the demand: its message's payload may be reused (see `Message::recycle`).
    #[inline]
    pub(crate) fn recycle(self) {
        let mut this = ManuallyDrop::new(self);
        if this.is_bind() {
            // SAFETY: a bind's body is its core; `this` is never used nor dropped again.
            unsafe { ManuallyDrop::drop(&mut this.body.core) }
        } else {
            // SAFETY: any other demand's body is a message; taken once, and `this` is
            // never used nor dropped again.
            unsafe { ManuallyDrop::take(&mut this.body.msg) }.recycle();
        }
    }

    /// What the demand asks the agent for.
    #[inline]
    pub(crate) fn run(&self) -> Run<'_> {
        // A message first, with one comparison: the reserved ids are the five highest.
        if self.mbox.0 < STOP_WORKER.0 {
            return Run::Message {
                mbox: self.mbox,
                // SAFETY: not a bind: the body is a message.
                msg: unsafe { &self.body.msg },
            };
        }
        match self.mbox {
            START => Run::Start,
            FINISH => Run::Finish,
            _ => Run::Bind,
        }
    }
}

impl Drop for Demand {
    #[inline]
    fn drop(&mut self) {
        if self.is_bind() {
            // SAFETY: a bind's body is its core, dropped here once.
            unsafe { ManuallyDrop::drop(&mut self.body.core) }
        } else {
            // SAFETY: any other demand's body is a message, dropped here once.
            unsafe { ManuallyDrop::drop(&mut self.body.msg) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A backlog of small messages is mostly demands: their size is the bytes per queued
    /// message the `queued_bytes_per_msg` benchmark measures.
    #[test]
    fn a_demand_is_24_bytes_whatever_its_kind() {
        assert_eq!(std::mem::size_of::<Demand>(), 24);
        let key = AgentKey::single();
        for kind in [DemandKind::Start, DemandKind::Finish] {
            let mut d = Demand::new(key, kind);
            assert!(!d.is_bind());
            assert!(d.take_bind().is_none());
        }
        assert!(matches!(
            Demand::new(key, DemandKind::Start).run(),
            Run::Start
        ));
        assert!(matches!(
            Demand::new(key, DemandKind::Finish).run(),
            Run::Finish
        ));
        let stop = Demand::stop_worker();
        assert!(stop.is_stop_worker() && !stop.is_bind());
        assert!(!stop.starts_after_bind());
        assert!(!Demand::new(key, DemandKind::Start).is_stop_worker());
        let msg = Message::new(7u32);
        let d = Demand::new(
            key,
            DemandKind::Message {
                mbox: MboxId(42),
                msg,
            },
        );
        match d.run() {
            Run::Message { mbox, msg } => {
                assert_eq!(mbox, MboxId(42));
                assert_eq!(msg.downcast_ref::<u32>(), Some(&7));
            }
            _ => panic!("a message demand runs as a message"),
        }
    }

    /// Every demand's body is dropped exactly once, whichever way the demand goes: run and
    /// recycled, or dropped unrun with its queue (a worker's shutdown).
    #[test]
    fn a_demand_drops_its_message_once_whether_recycled_or_dropped_unrun() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let key = AgentKey::single();
        let msg = || Message::new(Counted(drops.clone()));
        let shared = msg();
        let d = Demand::message(key, MboxId(1), shared.clone());
        d.recycle();
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "another copy still holds it"
        );
        Demand::message(key, MboxId(1), shared).recycle();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // A small payload without `Drop` is kept for the thread's next message of its type.
        Demand::message(key, MboxId(2), Message::new(5u64)).recycle();
        let refilled = Message::new(6u64);
        assert_eq!(refilled.downcast_ref::<u64>(), Some(&6));
        // A queue dropped with its demands: each body once.
        let mut queue: std::collections::VecDeque<Demand> = (0..5)
            .map(|i| Demand::message(key, MboxId(3 + i), msg()))
            .collect();
        queue.push_back(Demand::new(key, DemandKind::Start));
        queue.push_back(Demand::stop_worker());
        let first = queue.pop_front().unwrap();
        drop(queue);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        assert!(matches!(
            first.run(),
            Run::Message {
                mbox: MboxId(3),
                ..
            }
        ));
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 6);
    }

    /// A `Bind` that is never run (its worker is gone) leaves the executor waiting in the
    /// agent's core, which drops it with itself (its coop drops it earlier: see the test
    /// in `coop::protocol`); one that is run hands it over exactly once.
    #[test]
    fn an_unrun_bind_leaves_the_executor_in_the_core_and_a_run_one_hands_it_over_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Counted(Arc<AtomicUsize>);
        impl crate::agent::Agent for Counted {}
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        crate::Environment::launch(|env| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let bind = Demand::bind(AgentKey::single(), core.clone(), false);
            assert!(bind.is_bind() && !bind.starts_after_bind());
            assert!(matches!(bind.run(), Run::Bind));
            drop(bind);
            assert_eq!(drops.load(Ordering::SeqCst), 0, "waits in the core");
            drop(core);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with the core");

            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let mut bind = Demand::bind(AgentKey::single(), core, false);
            let (core, exec) = bind.take_bind().expect("the executor, once");
            assert!(bind.take_bind().is_none());
            drop(bind);
            drop(core);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "not dropped by the spent demand or the core"
            );
            drop(exec);
            assert_eq!(drops.load(Ordering::SeqCst), 2);

            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let mut bind = Demand::bind(AgentKey::single(), core, true);
            assert!(bind.is_bind() && bind.starts_after_bind());
            assert!(matches!(bind.run(), Run::Bind), "never run as a message");
            let (_core, exec) = bind.take_bind().expect("the executor, once");
            drop(exec);
            assert_eq!(drops.load(Ordering::SeqCst), 3);
        })
        .unwrap();
    }
}
