//! The demand: one queued execution for one agent.

#![allow(unsafe_code)]

use std::mem::ManuallyDrop;

use super::AgentKey;
use crate::agent::{AgentArc, ExecBox};
use crate::mbox::MboxId;
use crate::message::{InlineBits, Message};

/// One queued execution for one agent, named by its key on the queue's worker (no
/// reference count per message).
///
/// 24 bytes, the same for every kind: a message's mbox id and payload, or a reserved id for
/// a control demand and, for a `Bind`, the agent's core. A backlog of small messages is
/// mostly demands, so their size is what a queued message costs (an enum of the kinds was
/// 56 bytes: the compiler cannot fold the tag into a pointer when two variants carry
/// data). The kind is the mbox id, and the body a union that the id tells how to read.
///
/// A small message to the agent's own direct mbox may be queued *inline* (see
/// [`direct`](Self::direct)): the payload's bytes in the body, its type's table in the id
/// word, no allocation. Its message is made again when it runs.
pub(crate) struct Demand {
    pub(crate) key: AgentKey,
    /// The message's mbox; one of the reserved ids `BIND`, `BIND_START`, `START`,
    /// `FINISH`, `STOP_WORKER`; or, for an inline message, `INLINE` plus its payload
    /// type's table address.
    mbox: MboxId,
    /// The agent's core for a bind (`is_bind`); the payload's bytes for an inline message
    /// (`is_inline`); the message for any other demand (a placeholder signal for `Start`,
    /// `Finish` and the worker's stop).
    body: Body,
}

/// What a demand carries; its `mbox` says which field is there.
union Body {
    msg: ManuallyDrop<Message>,
    core: ManuallyDrop<AgentArc>,
    bits: std::mem::MaybeUninit<u64>,
}

/// The start of the ids of inline messages: `INLINE + table address` (at most
/// `InlineBits::MAX_TABLE_ADDR`, below the reserved ids; mbox ids count up from 1 and never
/// get near).
const INLINE: u64 = 1 << 63;

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

    /// A message demand for the agent's own direct mbox, `mbox`: inline if the message
    /// is small, unshared and plain (see `Message::into_inline`), else as
    /// [`message`](Self::message) makes it. For queues whose worker runs demands through
    /// an [`AgentTable`](super::AgentTable), which makes the message again on the way
    /// ([`run`](Self::run)).
    #[inline]
    pub(crate) fn direct(key: AgentKey, mbox: MboxId, msg: Message) -> Demand {
        match msg.into_inline() {
            Ok(inline) => {
                let (bits, table) = inline.into_raw();
                Demand {
                    key,
                    // `table` is at most `MAX_TABLE_ADDR` (< 2^62): the sum stays in the
                    // range.
                    mbox: MboxId(INLINE | table as u64),
                    body: Body { bits },
                }
            }
            Err(msg) => Demand::message(key, mbox, msg),
        }
    }

    /// This message demand inline (see [`direct`](Self::direct)) if it is from `direct`,
    /// the agent's own direct mbox, and its message may go inline; else as it is.
    #[inline]
    pub(crate) fn inline_if_to(self, direct: MboxId) -> Demand {
        if self.mbox != direct {
            return self;
        }
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the id is a direct mbox's, so the body is a message; taken once, and
        // `this` is never used nor dropped again.
        let msg = unsafe { ManuallyDrop::take(&mut this.body.msg) };
        Demand::direct(this.key, direct, msg)
    }

    /// Whether this is an inline message (see [`direct`](Self::direct)).
    #[inline]
    fn is_inline(&self) -> bool {
        self.mbox.0.wrapping_sub(INLINE) <= InlineBits::MAX_TABLE_ADDR
    }

    /// A message demand (what [`new`](Self::new) makes of `DemandKind::Message`).
    #[inline]
    pub(crate) fn message(key: AgentKey, mbox: MboxId, msg: Message) -> Demand {
        debug_assert!(mbox.0 < INLINE || (mbox.0 >= STOP_WORKER.0 && mbox.0 < BIND_START.0));
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

    /// The mbox of a message demand (`direct`, the agent's direct mbox, for an inline one,
    /// which keeps no id); `None` for a control demand. Off the message path: for demands
    /// that are dropped unrun.
    pub(crate) fn message_mbox(&self, direct: impl FnOnce() -> MboxId) -> Option<MboxId> {
        if self.mbox.0 < INLINE {
            Some(self.mbox)
        } else if self.is_inline() {
            Some(direct())
        } else {
            None
        }
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
    pub(crate) fn take_bind(&mut self) -> Option<(AgentArc, ExecBox)> {
        if !self.is_bind() {
            return None;
        }
        // SAFETY: a bind's body is its core: `bind` is the only maker of bind ids, as no
        // mbox id reaches them (ids count up from 1 and are never made from a number
        // outside the crate: see `MboxId`; `message` also checks it in debug builds).
        let core = AgentArc::clone(unsafe { &self.body.core });
        let exec = crate::agent::core::take_bound_exec(&core)?;
        Some((core, exec))
    }

    /// Done with the demand: its message's payload may be reused (see `Message::recycle`).
    /// Always inlined into the worker's loop (out of line: ~10 instructions per message
    /// more, callgrind).
    #[inline(always)]
    pub(crate) fn recycle(self) {
        if self.mbox.0 < INLINE {
            let mut this = ManuallyDrop::new(self);
            // SAFETY: neither a bind nor inline: the body is a message; taken once, and
            // `this` is never used nor dropped again.
            unsafe { ManuallyDrop::take(&mut this.body.msg) }.recycle();
        }
        // Any other kind: dropped.
    }

    /// What the demand asks the agent for. An inline message becomes a message again
    /// here, from `direct`, the agent's direct mbox (asked only then). The tests' view of
    /// the worker's two steps, [`message_parts`](Self::message_parts) then
    /// [`run_plain`](Self::run_plain).
    #[cfg(test)]
    pub(crate) fn run(&mut self, direct: impl FnOnce() -> MboxId) -> Run<'_> {
        let _ = self.message_parts(direct);
        self.run_plain()
    }

    /// The mbox and message of a message demand (an inline one made a message again, from
    /// `direct`, the agent's direct mbox, asked only then); `None` for a control demand
    /// (see [`run_plain`](Self::run_plain)). The worker's common case, without a `Run`
    /// built for it (ping-pong, callgrind: 8 instructions per message fewer than through
    /// a `Run`). A message costs the one comparison: inline and reserved ids are above.
    #[inline]
    pub(crate) fn message_parts(
        &mut self,
        direct: impl FnOnce() -> MboxId,
    ) -> Option<(MboxId, &Message)> {
        if self.mbox.0 >= INLINE {
            if !self.is_inline() {
                return None;
            }
            self.make_message(direct());
        }
        // SAFETY: neither a bind nor inline (made a message above): the body is a message.
        Some((self.mbox, unsafe { &self.body.msg }))
    }

    /// [`run`](Self::run) for a demand that is not inline: any demand of a queue that
    /// never holds inline messages (they are made only by [`direct`](Self::direct), for
    /// queues run through an `AgentTable`).
    #[inline]
    pub(crate) fn run_plain(&self) -> Run<'_> {
        debug_assert!(!self.is_inline());
        if self.mbox.0 < INLINE {
            return Run::Message {
                mbox: self.mbox,
                // SAFETY: neither a bind nor inline: the body is a message.
                msg: unsafe { &self.body.msg },
            };
        }
        match self.mbox {
            START => Run::Start,
            FINISH => Run::Finish,
            // Binds; and (never made for such a queue) an inline message: not run.
            _ => Run::Bind,
        }
    }

    /// Turns an inline message back into a message from `direct`.
    #[inline(never)]
    fn make_message(&mut self, direct: MboxId) {
        debug_assert!(self.is_inline() && direct.0 < INLINE);
        // SAFETY: an inline message's body is its payload's bytes, and its id word the
        // table address they came with: the parts of one `InlineBits` (`direct` is the
        // only maker of inline ids), made one again once (the body is overwritten next).
        let inline =
            unsafe { InlineBits::from_raw(self.body.bits, (self.mbox.0 - INLINE) as usize) };
        // The bytes are `Copy`: overwriting the union drops nothing.
        self.body = Body {
            msg: ManuallyDrop::new(Message::from_inline(inline)),
        };
        self.mbox = direct;
    }
}

impl Drop for Demand {
    #[inline]
    fn drop(&mut self) {
        if self.is_inline() {
            // Bytes of a payload without `Drop`: nothing to drop.
        } else if self.is_bind() {
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

    /// The direct mbox of demands that are not inline: never asked for.
    fn no_mbox() -> MboxId {
        panic!("asked for the direct mbox of a demand that is not inline")
    }

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
            Demand::new(key, DemandKind::Start).run(no_mbox),
            Run::Start
        ));
        assert!(matches!(
            Demand::new(key, DemandKind::Finish).run(no_mbox),
            Run::Finish
        ));
        let stop = Demand::stop_worker();
        assert!(stop.is_stop_worker() && !stop.is_bind());
        assert!(!stop.starts_after_bind());
        assert!(!Demand::new(key, DemandKind::Start).is_stop_worker());
        let msg = Message::new(7u32);
        let mut d = Demand::new(
            key,
            DemandKind::Message {
                mbox: MboxId(42),
                msg,
            },
        );
        match d.run(no_mbox) {
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
        let mut first = queue.pop_front().unwrap();
        drop(queue);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        assert!(matches!(
            first.run(no_mbox),
            Run::Message {
                mbox: MboxId(3),
                ..
            }
        ));
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 6);
    }

    /// A small, unshared, plain message to the agent's own mbox waits as its bytes and
    /// comes back as the same value, from the agent's direct mbox, whatever its layout:
    /// padding, a reference, a float, an enum with a niche.
    #[test]
    fn a_small_direct_message_waits_inline_and_runs_as_the_same_value() {
        fn round_trip<T: Send + Sync + PartialEq + std::fmt::Debug + Clone + 'static>(v: T) {
            let key = AgentKey::single();
            // From another mbox than the agent's own: as it is.
            let other = Demand::message(key, MboxId(8), Message::new(v.clone()));
            assert!(!other.inline_if_to(MboxId(9)).is_inline());
            let mut d = Demand::message(key, MboxId(9), Message::new(v.clone()));
            d = d.inline_if_to(MboxId(9));
            assert!(d.is_inline(), "{}", std::any::type_name::<T>());
            assert!(!d.is_bind() && !d.is_stop_worker());
            match d.run(|| MboxId(9)) {
                Run::Message { mbox, msg } => {
                    assert_eq!(mbox, MboxId(9));
                    assert_eq!(msg.type_id(), std::any::TypeId::of::<T>());
                    assert_eq!(msg.downcast_ref::<T>(), Some(&v));
                }
                _ => panic!("an inline message runs as a message"),
            }
            // Run twice (a thread pool asks first whether it is thread-safe): the same.
            assert!(matches!(
                d.run(no_mbox),
                Run::Message {
                    mbox: MboxId(9),
                    ..
                }
            ));
            d.recycle();
            // Run on another thread, which has no spent payload of the type to refill.
            let d = Demand::direct(key, MboxId(9), Message::new(v.clone()));
            assert!(d.is_inline());
            std::thread::spawn(move || {
                let mut d = d;
                match d.run(|| MboxId(9)) {
                    Run::Message { msg, .. } => assert_eq!(msg.downcast_ref::<T>(), Some(&v)),
                    _ => panic!("an inline message runs as a message"),
                }
            })
            .join()
            .unwrap();
        }
        static TARGET: u64 = 77;
        round_trip(7u64);
        round_trip(200u8);
        round_trip((3u8, 70_000u32)); // three bytes of padding
        round_trip([1u16, 2, 3]);
        round_trip(&TARGET); // a pointer: its provenance travels with its bytes
        round_trip(-2.5f64);
        round_trip(Some('x'));
        round_trip(std::num::NonZeroU32::new(5));
        round_trip(true);
        // Dropped unrun (its worker gone): nothing to free.
        drop(Demand::direct(
            AgentKey::single(),
            MboxId(9),
            Message::new(1u32),
        ));
    }

    /// What may not wait as bytes does not: a large payload, one with `Drop`, a shared
    /// one (another copy could see it), an envelope, a mutable message, a signal.
    #[test]
    fn a_message_that_is_large_shared_dropped_or_wrapped_waits_as_a_message() {
        struct Open;
        impl crate::Envelope for Open {
            fn reveal(&self, _: crate::Access) -> bool {
                true
            }
        }
        struct Tick;
        let key = AgentKey::single();
        let shared = Message::new(5u64);
        let copy = shared.clone();
        for msg in [
            Message::new(1u128),
            Message::new(String::from("x")),
            shared,
            Message::enveloped(Message::new(2u32), Open),
            Message::new_mutable(3u32),
            Message::new(Tick),
        ] {
            let ty = msg.type_id();
            let mut d = Demand::direct(key, MboxId(4), msg);
            assert!(!d.is_inline());
            match d.run(no_mbox) {
                Run::Message { mbox, msg } => {
                    assert_eq!((mbox, msg.type_id()), (MboxId(4), ty));
                }
                _ => panic!("runs as a message"),
            }
        }
        assert_eq!(copy.downcast_ref::<u64>(), Some(&5));
    }

    /// A `Bind` that is never run (its worker is gone) leaves the executor waiting in the
    /// agent's core, which drops it with itself (its coop drops it earlier: see the test
    /// in `coop::protocol`); one that is run hands it over exactly once.
    #[test]
    // It launches an environment, whose threads park through parking_lot's futex call,
    // which current miri rejects (a variadic argument's type, in parking_lot_core): not
    // this crate's code. The demand's other tests run under miri.
    #[cfg_attr(
        miri,
        ignore = "parking_lot_core's futex syscall is rejected by current miri"
    )]
    fn an_unrun_bind_leaves_the_executor_in_the_core_and_a_run_one_hands_it_over_once() {
        crate::test_support::within_patience(unrun_and_run_binds);
    }

    fn unrun_and_run_binds() {
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
            exec.hand_over();
            let mut bind = Demand::bind(AgentKey::single(), core.clone(), false);
            assert!(bind.is_bind() && !bind.starts_after_bind());
            assert!(matches!(bind.run(no_mbox), Run::Bind));
            drop(bind);
            assert_eq!(drops.load(Ordering::SeqCst), 0, "waits in the core");
            drop(core);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with the core");

            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            exec.hand_over();
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
            exec.hand_over();
            let mut bind = Demand::bind(AgentKey::single(), core, true);
            assert!(bind.is_bind() && bind.starts_after_bind());
            assert!(
                matches!(bind.run(no_mbox), Run::Bind),
                "never run as a message"
            );
            let (_core, exec) = bind.take_bind().expect("the executor, once");
            drop(exec);
            assert_eq!(drops.load(Ordering::SeqCst), 3);
        })
        .unwrap();
    }
}
