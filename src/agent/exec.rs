//! The typed half of an agent: runs its demands on the worker thread.

use std::panic::{catch_unwind, AssertUnwindSafe};

use std::sync::Arc;

use parking_lot::RwLock;
use smallvec::SmallVec;
use sync_wrapper::SyncWrapper;

use super::context::{TimeLimitExpired, TIME_LIMIT_MBOX};
use super::core::{AgentArc, AgentExec, ACTIVE, FINISHED};
use super::subscription::{Action, Handler};
use super::{Agent, AgentRef, Context, DefineError, State, StateError};
use crate::agent::{react, Failure};
use crate::dispatcher::Run;
use crate::drops::DropReason;
use crate::exception;
use crate::mbox::MboxId;
use crate::message::{Access, Message};
use crate::trace::{self, TraceEvent, TraceRecord};

pub(crate) struct Inner<A: Agent> {
    pub(crate) agent: A,
    pub(crate) ctx: Context<A>,
    /// Event handlers and hooks (`FnMut`: reached only through `&mut`, hence the wrapper).
    slab: SyncWrapper<SmallVec<[Option<Handler<A>>; 1]>>,
}

impl<A: Agent> Inner<A> {
    pub(crate) fn new(agent: A, ctx: Context<A>) -> Self {
        Inner {
            agent,
            ctx,
            slab: SyncWrapper::new(SmallVec::new()),
        }
    }

    /// Moves new handlers into the slab, empties freed slots, then applies requested state
    /// switches in order (whose hooks may subscribe again: hence the loop).
    #[inline(always)]
    fn apply_pending(&mut self) -> Result<(), StateError> {
        if !self.ctx.subs.has_pending() && !self.ctx.states.has_switch() {
            return Ok(());
        }
        self.apply_pending_slow()
    }

    #[inline(never)]
    fn apply_pending_slow(&mut self) -> Result<(), StateError> {
        while self.ctx.subs.has_pending() || self.ctx.states.has_switch() {
            let slab = self.slab.get_mut();
            // Taken, not drained: the list is freed (most agents subscribe once, in define).
            for (slot, h) in std::mem::take(self.ctx.subs.new_handlers.get_mut()) {
                match h {
                    Handler::Safe(f) => {
                        self.ctx.subs.set_safe_handler(slot, Some(f));
                    }
                    h => {
                        if slot >= slab.len() {
                            slab.reserve_exact(slot + 1 - slab.len());
                            slab.resize_with(slot + 1, || None);
                        }
                        slab[slot] = Some(h);
                    }
                }
            }
            let freed = self.ctx.subs.take_freed();
            for &slot in &freed {
                if let Some(h) = slab.get_mut(slot) {
                    *h = None;
                }
                self.ctx.subs.set_safe_handler(slot, None);
            }
            self.ctx.subs.recycle(freed);
            if let Some(target) = self.ctx.states.next_switch() {
                self.switch_to(&target)?;
            }
        }
        Ok(())
    }

    fn run_hook(&mut self, state: &State, enter: bool) {
        let Some(&(on_enter, on_exit)) = self
            .ctx
            .states
            .rare()
            .and_then(|r| r.hooks.get(&state.id()))
        else {
            return;
        };
        let Some(slot) = (if enter { on_enter } else { on_exit }) else {
            return;
        };
        let Inner {
            agent, ctx, slab, ..
        } = self;
        if let Some(Some(Handler::Hook(h))) = slab.get_mut().get_mut(slot) {
            h(agent, ctx);
        }
    }

    /// Leaves the current leaf and enters the leaf `target` resolves to.
    fn switch_to(&mut self, target: &State) -> Result<(), StateError> {
        let leaf = self.ctx.states.resolve(target)?;
        let old = self.ctx.states.current.clone();
        if leaf == old {
            return Ok(());
        }
        let old_path = old.path();
        let new_path = leaf.path();
        let common = old_path
            .iter()
            .zip(&new_path)
            .take_while(|(a, b)| a == b)
            .count();
        self.ctx.states.in_hook = true;
        for s in old_path[common..].iter().rev() {
            self.run_hook(s, false);
            self.ctx.disarm_time_limit(s.id());
            trace::emit(&self.ctx.trace, || {
                TraceRecord::new(TraceEvent::StateLeft)
                    .agent(self.ctx.id)
                    .state(s.name())
            });
        }
        #[cfg(feature = "monitor")]
        if let Some(core) = self.ctx.this.upgrade() {
            core.shown.set_state(&leaf);
        }
        self.ctx.states.current = leaf;
        self.ctx.subs.state_changed();
        self.ctx.states.record_history(&new_path);
        for s in &new_path[common..] {
            trace::emit(&self.ctx.trace, || {
                TraceRecord::new(TraceEvent::StateEntered)
                    .agent(self.ctx.id)
                    .state(s.name())
            });
            self.ctx.arm_time_limit(s.id());
            self.run_hook(s, true);
        }
        self.ctx.states.in_hook = false;
        Ok(())
    }

    /// Calls a handler, if the message's envelope (if any) reveals the payload.
    #[inline]
    fn call_event(&mut self, slot: usize, mbox: MboxId, msg: &Message) {
        let Some(msg) = self.reveal(mbox, msg) else {
            return;
        };
        let Inner {
            agent, ctx, slab, ..
        } = self;
        if let Some(Some(Handler::Event(h))) = slab.get_mut().get_mut(slot) {
            h(agent, ctx, msg);
        }
    }

    /// The message for a handler that was found, and the trace records of that step.
    ///
    /// With tracing off the message goes to the handler as it is: the handler's typed
    /// closure looks inside an envelope only if the plain payload is not its type (see
    /// `Message::handler_payload`), so messages without envelopes pay nothing for them.
    #[inline(always)]
    fn reveal<'m>(&self, mbox: MboxId, msg: &'m Message) -> Option<&'m Message> {
        if self.ctx.trace.is_none() {
            return Some(msg);
        }
        self.reveal_traced(mbox, msg)
    }

    #[cold]
    #[inline(never)]
    fn reveal_traced<'m>(&self, mbox: MboxId, msg: &'m Message) -> Option<&'m Message> {
        let revealed = msg.reveal(Access::Handling);
        trace::emit(&self.ctx.trace, || {
            let event = match revealed {
                Some(_) => TraceEvent::HandlerCalled,
                None => TraceEvent::Hidden,
            };
            TraceRecord::new(event)
                .agent(self.ctx.id)
                .mbox(mbox)
                .msg(msg.message_type())
                .state(self.ctx.states.current.name())
        });
        revealed
    }

    /// A thread-safe handler, called with shared access (here exclusively held).
    fn call_safe(&self, slot: usize, mbox: MboxId, msg: &Message) {
        let Some(msg) = self.reveal(mbox, msg) else {
            return;
        };
        if let Some(f) = self.ctx.subs.safe_handler(slot) {
            f(&self.agent, &self.ctx.thread_safe_view(), msg);
        }
    }

    /// Looks the handler up in the current state, its parents, then the dead-letter
    /// handlers, and runs it.
    #[inline]
    fn handle_message(&mut self, mbox: MboxId, msg: &Message) -> Result<(), StateError> {
        // The common case: a handler in the current state or a parent (the last one found,
        // most often).
        // The last handler found for the own mbox first: it runs if the message is of its
        // type (see `Subscriptions::last`). Not while tracing (the records of the step
        // would be written twice on a miss), nor for an enveloped message: the handler's
        // type check would ask the envelope to reveal for handling before it knows it is
        // the message's handler, and a miss would ask again (`tests/envelope_reveals.rs`).
        let own = mbox.0 == self.ctx.id.0;
        if own && self.ctx.trace.is_none() && msg.plain_type_id().is_some() {
            if let Some(slot) = self.ctx.subs.last_handler() {
                let Inner {
                    agent, ctx, slab, ..
                } = self;
                if let Some(Some(Handler::Event(h))) = slab.get_mut().get_mut(slot) {
                    if h(agent, ctx, msg) {
                        return self.apply_pending();
                    }
                }
            }
        }
        let ctx = &mut self.ctx;
        if let Some(slot) = ctx
            .subs
            .find_handler(mbox.0, msg.type_id(), &ctx.states.current, own)
        {
            self.call_event(slot, mbox, msg);
            return self.apply_pending();
        }
        self.handle_message_slow(mbox, msg)
    }

    /// Everything but a plain handler: transfers (with loop detection), suppression,
    /// switches, dead letters.
    #[inline(never)]
    fn handle_message_slow(&mut self, mbox: MboxId, msg: &Message) -> Result<(), StateError> {
        if mbox == TIME_LIMIT_MBOX {
            return self.time_limit_expired(msg);
        }
        // A revoked (cancelled, expired) message switches no state either.
        if msg.is_enveloped() && msg.reveal(Access::Handling).is_none() {
            trace::emit(&self.ctx.trace, || {
                TraceRecord::new(TraceEvent::Hidden)
                    .agent(self.ctx.id)
                    .mbox(mbox)
                    .msg(msg.message_type())
                    .state(self.ctx.states.current.name())
            });
            return Ok(());
        }
        let ty = msg.message_type();
        let mut visited: SmallVec<[u64; 4]> = SmallVec::new();
        loop {
            let found = self
                .ctx
                .subs
                .find(mbox.0, ty.type_id(), &self.ctx.states.current);
            match found {
                Some(Action::Handler(slot)) => {
                    let slot = *slot;
                    self.call_event(slot, mbox, msg);
                    return self.apply_pending();
                }
                Some(Action::SafeHandler(slot)) => {
                    let slot = *slot;
                    self.call_safe(slot, mbox, msg);
                    return self.apply_pending();
                }
                Some(Action::Suppress) => return Ok(()),
                Some(Action::JustSwitchTo(st)) => {
                    let st = st.clone();
                    self.switch_to(&st)?;
                    return self.apply_pending();
                }
                Some(Action::TransferTo(st)) => {
                    let st = st.clone();
                    if visited.contains(&st.id()) {
                        return Err(StateError::TransferLoop {
                            type_name: ty.name(),
                            state: st.name().to_owned(),
                        });
                    }
                    visited.push(st.id());
                    self.switch_to(&st)?;
                    self.apply_pending()?;
                }
                None => {
                    if let Some(slot) = self.ctx.subs.dead_letter(mbox.0, ty.type_id()) {
                        self.call_event(slot, mbox, msg);
                        return self.apply_pending();
                    }
                    // No handler in this state: dropped.
                    self.ctx.env.0.drops.count(DropReason::NoHandler);
                    self.note_no_handler(ty);
                    trace::emit(&self.ctx.trace, || {
                        TraceRecord::new(TraceEvent::NoHandler)
                            .agent(self.ctx.id)
                            .mbox(mbox)
                            .msg(ty)
                            .state(self.ctx.states.current.name())
                    });
                    return Ok(());
                }
            }
        }
    }

    /// A state's time limit ran out: switches to its target, unless the expiry is stale
    /// (the state was left, or its limit re-armed, since).
    fn time_limit_expired(&mut self, msg: &Message) -> Result<(), StateError> {
        let Some(e) = msg
            .reveal(Access::Handling)
            .and_then(|m| m.downcast_ref::<TimeLimitExpired>())
        else {
            return Ok(());
        };
        if self.ctx.states.deactivated {
            return Ok(()); // a deactivated agent switches to nothing
        }
        let target = match self
            .ctx
            .states
            .rare()
            .and_then(|r| r.time_limits.get(&e.state))
        {
            Some(tl) if tl.generation == e.generation => tl.target.clone(),
            _ => return Ok(()),
        };
        let within = self
            .ctx
            .states
            .current
            .path()
            .iter()
            .any(|s| s.id() == e.state);
        if !within {
            return Ok(());
        }
        self.switch_to(&target)?;
        self.apply_pending()
    }

    /// After a failure, leaves the bookkeeping consistent: handlers added before the panic
    /// stay, state switches not yet applied are forgotten.
    fn recover(&mut self) {
        self.ctx.states.in_hook = false;
        self.ctx.states.clear_switches();
        if self.ctx.states.deactivated {
            // A deactivation asked for before the failure still happens.
            self.ctx
                .states
                .push_switch(super::state::awaiting_deregistration_state().clone());
        }
        let _ = self.apply_pending();
    }
}

impl<A: Agent> Inner<A> {
    /// Logs a message dropped for want of a handler (the first of its kind, with
    /// `EnvParams::log_drops`); see `DropCounters::note`.
    #[cold]
    #[inline(never)]
    fn note_no_handler(&self, ty: crate::MessageType) {
        let env = &self.ctx.env;
        let key = (DropReason::NoHandler, std::any::type_name::<A>(), ty.name());
        env.0.drops.note(
            |line| env.log_error(line),
            key,
            || {
                let name = env.0.names.get(self.ctx.id);
                format!(
                    "{}{} of type {} dropped a message of type {}: no handler in its \
                 current state `{}` nor in its parents. A subscription made in the default \
                 state is not seen while the agent is in a state of its own: subscribe in \
                 the state that must handle it, or in a parent of that state",
                    self.ctx.id,
                    name.map(|n| format!(" ({n})")).unwrap_or_default(),
                    key.1,
                    key.2,
                    self.ctx.states.current.name(),
                )
            },
        );
    }

    /// Runs `f` under the panic boundary; a panic or an error becomes a [`Failure`] for
    /// the exception reaction. Inlined into `execute`: a frame of its own cost the message
    /// path its register saves and restores (callgrind).
    #[inline(always)]
    fn guarded(
        &mut self,
        f: impl FnOnce(&mut Inner<A>) -> Result<(), StateError>,
    ) -> Result<(), Failure> {
        let result = match catch_unwind(AssertUnwindSafe(|| f(self))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::Error(e)),
            Err(payload) => Err(Failure::Panic(exception::panic_message(&payload))),
        };
        if result.is_err() {
            // A second panic here (in a hook re-run by recover) would escape: forget it.
            let _ = catch_unwind(AssertUnwindSafe(|| self.recover()));
        }
        result
    }
}

impl<A: Agent> Inner<A> {
    /// A message for an agent that is deregistering or finished: dropped, counted, traced.
    #[cold]
    #[inline(never)]
    fn dropped_at_deregistration(core: &AgentArc, mbox: MboxId, msg: &Message) {
        core.drops.count(DropReason::AtDeregistration);
        trace::emit(&core.trace, || {
            TraceRecord::new(TraceEvent::DroppedAtDeregistration)
                .agent(core.id)
                .mbox(mbox)
                .msg(msg.message_type())
        });
    }

    /// The exception reaction to a handler's failure (out of the message path).
    #[cold]
    #[inline(never)]
    fn handler_failed(core: &AgentArc, failure: Failure) {
        react(core, failure, "a handler");
    }
}

impl<A: Agent> AgentExec for Inner<A> {
    /// The message path, apart from [`execute`](AgentExec::execute)'s control demands:
    /// called by the worker's table with the message's pieces in registers, it holds no
    /// code for `Start` or `Finish` (ping-pong, callgrind: 10.5 instructions per message
    /// fewer, between the table's call and this).
    #[inline]
    fn execute_message(&mut self, core: &AgentArc, mbox: MboxId, msg: &Message) -> bool {
        if let Some(limits) = core.limits.get() {
            limits.release(msg.type_id());
        }
        if core.status() != ACTIVE {
            Self::dropped_at_deregistration(core, mbox, msg);
            return false; // deregistering or finished: dropped
        }
        if let Err(failure) = self.guarded(|inner| inner.handle_message(mbox, msg)) {
            Self::handler_failed(core, failure);
        }
        false
    }

    #[inline]
    fn execute(&mut self, core: &AgentArc, demand: Run<'_>) -> bool {
        let result = match demand {
            Run::Message { mbox, msg } => return self.execute_message(core, mbox, msg),
            Run::Start => self.guarded(|inner| {
                let Inner { agent, ctx, .. } = inner;
                agent.on_start(ctx);
                inner.apply_pending()
            }),
            Run::Finish => {
                let result = self.guarded(|inner| {
                    let Inner { agent, ctx, .. } = inner;
                    agent.on_finish(ctx);
                    inner.apply_pending()
                });
                // On the way out the agent returns to the default state (SObjectizer since
                // 5.5.15): the `on_exit` hooks of its current state and of every parent run,
                // leaf first. Not after a panic: its state may be what broke. An agent in
                // the default state (flat: it has no substates) has nowhere to go, and its
                // coop is not asked why it goes (a lock and an upgrade, ~130 instructions
                // of a spawn and stop with the switch's own, callgrind).
                let left = if self.ctx.states.current == *super::state::default_state()
                    || self.ctx.states.deactivated
                    || core.coop().and_then(|c| c.dereg_reason())
                        == Some(crate::coop::DeregReason::Panic)
                {
                    Ok(())
                } else {
                    self.guarded(|inner| inner.switch_to(super::state::default_state()))
                };
                // Whatever on_finish did, the agent is done: it gets nothing more. Dropping
                // its subscriptions drops the user's filters (and what they captured): a
                // panic in a `Drop` there goes to the reaction too, and the agent still
                // finishes.
                let unsubscribed = catch_unwind(AssertUnwindSafe(|| {
                    self.ctx.subs.drop_all(&AgentRef(core.clone()));
                    core.direct_clear();
                }));
                core.set_status(FINISHED);
                if let Err(payload) = unsubscribed {
                    let failure = Failure::Panic(exception::panic_message(&payload));
                    react(core, failure, "dropping its subscriptions");
                }
                if let Err(failure) = result {
                    react(core, failure, "on_finish");
                }
                if let Err(failure) = left {
                    react(core, failure, "an on_exit hook on the way out");
                }
                // The coop hears of it from whoever drops the executor, right after
                // (`finished`): its last step, notices included, comes after the drop.
                return true;
            }
            // The worker's table takes `Bind` demands; nothing to run.
            Run::Bind => return false,
        };
        if let Err(failure) = result {
            let during = match demand {
                Run::Start => "on_start",
                _ => "a handler",
            };
            react(core, failure, during);
        }
        false
    }

    fn define(&mut self) -> Result<(), DefineError> {
        let Inner { agent, ctx, .. } = self;
        let result = agent.define(ctx);
        self.ctx.freeze_limits();
        let applied = self.apply_pending();
        result.and(applied.map_err(DefineError::from))
    }

    fn discard(&mut self) {
        if let Ok(me) = self.ctx.me() {
            self.ctx.subs.drop_all(&me);
            me.0.direct_clear();
        }
    }
}

/// The executor of an agent added with `add_thread_safe_agent`: its thread-safe handlers may
/// run in parallel (read lock), everything else alone (write lock).
pub(crate) struct ThreadSafeExec<A: Agent + Sync>(pub(crate) Arc<RwLock<Inner<A>>>);

impl<A: Agent + Sync> AgentExec for ThreadSafeExec<A> {
    fn execute(&mut self, core: &AgentArc, demand: Run<'_>) -> bool {
        self.0.write().execute(core, demand)
    }

    fn execute_message(&mut self, core: &AgentArc, mbox: MboxId, msg: &Message) -> bool {
        self.0.write().execute_message(core, mbox, msg)
    }

    fn define(&mut self) -> Result<(), DefineError> {
        self.0.write().define()
    }

    fn discard(&mut self) {
        self.0.write().discard()
    }

    fn shared(&self) -> Option<Arc<dyn SharedExec>> {
        Some(Arc::new(SharedView(self.0.clone())))
    }
}

/// Shared execution of thread-safe handlers (by `adv_thread_pool`).
pub(crate) trait SharedExec: Send + Sync {
    /// Whether the demand would run a thread-safe handler. Only asked while no exclusive
    /// demand of the agent runs, so the answer holds until the demand starts.
    fn is_thread_safe(&self, core: &AgentArc, demand: Run<'_>) -> bool;
    /// Runs a demand `is_thread_safe` said yes to, in parallel with others like it.
    fn execute_shared(&self, core: &AgentArc, demand: Run<'_>);
}

struct SharedView<A: Agent + Sync>(Arc<RwLock<Inner<A>>>);

impl<A: Agent + Sync> Inner<A> {
    fn safe_slot(&self, core: &AgentArc, demand: &Run<'_>) -> Option<usize> {
        let Run::Message { mbox, msg } = demand else {
            return None;
        };
        if core.status() != ACTIVE {
            return None;
        }
        match self
            .ctx
            .subs
            .find(mbox.0, msg.type_id(), &self.ctx.states.current)
        {
            Some(Action::SafeHandler(slot)) => Some(*slot),
            _ => None,
        }
    }
}

impl<A: Agent + Sync> SharedExec for SharedView<A> {
    fn is_thread_safe(&self, core: &AgentArc, demand: Run<'_>) -> bool {
        // Recursive: a thread-safe handler sending to its own agent asks this while it
        // holds a read lock itself.
        self.0.read_recursive().safe_slot(core, &demand).is_some()
    }

    fn execute_shared(&self, core: &AgentArc, demand: Run<'_>) {
        if let (Some(limits), Run::Message { msg, .. }) = (core.limits.get(), &demand) {
            limits.release(msg.type_id());
        }
        let inner = self.0.read_recursive();
        let Run::Message { msg, mbox } = demand else {
            return;
        };
        let Some(slot) = inner.safe_slot(core, &demand) else {
            // Classified as thread-safe while the agent was active; its coop began to
            // deregister since: dropped, as an exclusive demand is.
            if core.status() != ACTIVE {
                Inner::<A>::dropped_at_deregistration(core, mbox, msg);
            }
            return;
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| inner.call_safe(slot, mbox, msg)));
        drop(inner);
        if let Err(payload) = outcome {
            react(
                core,
                Failure::Panic(exception::panic_message(&payload)),
                "a thread-safe handler",
            );
        }
    }
}
