//! The agent's view of the runtime: its mbox, subscriptions, states and coop.

use std::any::TypeId;
use std::sync::Arc;
use std::time::Duration;

use super::core::AgentWeak;
use super::subscription::{Handler, Subscriptions};
use super::{Agent, AgentId, AgentRef, State, StateError, SubscriptionBuilder};
use crate::coop::{CoopHandle, DeregReason};
use crate::environment::Environment;
use crate::limits::{Declared, LimitError, Overflow, Spec, TransformFn, Transformed};
use crate::mbox::{DeliveryFilter, Mbox, MboxId, Repr, SubscribeError};
use crate::message::{Message, MessageType};
use crate::small_map::SmallMap;
use crate::timer::{Target, TimerHandle};
use crate::trace::Trace;

mod limits;
mod thread_safe;
pub use thread_safe::ThreadSafeContext;

/// Current state, history and pending switches of one agent.
pub(crate) struct States {
    /// The current leaf state. (The default state, where every agent starts, is the
    /// process's one `state::default_state()`: not kept per agent.)
    pub(crate) current: State,
    /// State switches are waiting in `rare` (read for every message: a flag, where the
    /// list itself would take 24 bytes in every agent).
    switching: bool,
    pub(crate) in_hook: bool,
    /// Set by `deactivate_agent`: the agent stays awaiting deregistration.
    pub(crate) deactivated: bool,
    /// What only agents with states of their own use, allocated on first use: most agents
    /// live in the default state, and a million of them felt four empty maps each.
    rare: Option<Box<StatesRare>>,
}

/// The parts of [`States`] an agent that never leaves its default state does not need.
#[derive(Default)]
pub(crate) struct StatesRare {
    /// Requested state switches, applied in order when the running handler returns.
    pending: Vec<State>,
    /// Per composite state with history: the child (shallow) or leaf (deep) last active.
    history: SmallMap<u64, State>,
    /// Per state: slots of its `on_enter` and `on_exit` hooks.
    pub(crate) hooks: SmallMap<u64, (Option<usize>, Option<usize>)>,
    /// Every state the agent has named to its context, with parents and initial chains:
    /// a parent holds its initial substate weakly, so the context keeps them alive even if
    /// the user's own handles are dropped.
    known: SmallMap<u64, State>,
    /// Per state with a time limit: the limit and its timer while the state is active.
    pub(crate) time_limits: SmallMap<u64, TimeLimit>,
}

/// A state's time limit.
pub(crate) struct TimeLimit {
    limit: Duration,
    pub(crate) target: State,
    timer: Option<TimerHandle>,
    /// Bumped at each arming and disarming: an expiry of an older arming is stale.
    pub(crate) generation: u64,
}

/// The message a state's time-limit timer sends the agent (from [`TIME_LIMIT_MBOX`]).
pub(crate) struct TimeLimitExpired {
    pub(crate) state: u64,
    pub(crate) generation: u64,
}

/// The pseudo-mbox time-limit expiries come from (real mbox ids start at 1).
pub(crate) const TIME_LIMIT_MBOX: MboxId = MboxId(0);

impl States {
    fn new() -> Self {
        States {
            current: super::state::default_state().clone(),
            switching: false,
            in_hook: false,
            deactivated: false,
            rare: None,
        }
    }

    /// Whether state switches wait to be applied.
    #[inline]
    pub(crate) fn has_switch(&self) -> bool {
        self.switching
    }

    /// Asks for a switch to `target` after the running handler.
    pub(crate) fn push_switch(&mut self, target: State) {
        self.rare_mut().pending.push(target);
        self.switching = true;
    }

    /// The first requested switch, taken from the list.
    pub(crate) fn next_switch(&mut self) -> Option<State> {
        let r = self.rare.as_mut()?;
        if r.pending.is_empty() {
            return None;
        }
        let next = r.pending.remove(0);
        self.switching = !r.pending.is_empty();
        Some(next)
    }

    /// Forgets the requested switches.
    pub(crate) fn clear_switches(&mut self) {
        if let Some(r) = self.rare.as_mut() {
            r.pending.clear();
        }
        self.switching = false;
    }

    pub(crate) fn rare(&self) -> Option<&StatesRare> {
        self.rare.as_deref()
    }

    pub(crate) fn rare_mut(&mut self) -> &mut StatesRare {
        self.rare.get_or_insert_default()
    }

    pub(crate) fn keep(&mut self, state: &State) {
        // The default state lives for the whole process; most agents name no other.
        if state == super::state::default_state()
            || self
                .rare()
                .is_some_and(|r| r.known.contains_key(&state.id()))
        {
            return;
        }
        let mut s = Some(state.clone());
        while let Some(st) = s {
            if self.rare_mut().known.insert(st.id(), st.clone()).is_some() {
                break;
            }
            s = st.parent().cloned();
        }
        if let Some(initial) = state.initial() {
            self.keep(&initial);
        }
    }

    /// The leaf state entered when `target` is entered.
    pub(crate) fn resolve(&self, target: &State) -> Result<State, StateError> {
        let mut s = target.clone();
        while s.has_substates() {
            let remembered = self.rare().and_then(|r| r.history.get(&s.id())).cloned();
            s = match (s.history(), remembered) {
                (super::History::Deep, Some(leaf)) => return Ok(leaf),
                (super::History::Shallow, Some(child)) => child,
                _ => s.initial().ok_or_else(|| StateError::NoInitialSubstate {
                    name: s.name().to_owned(),
                })?,
            };
        }
        Ok(s)
    }

    /// Remembers, for every ancestor with history on the new path, what it must return to.
    pub(crate) fn record_history(&mut self, path: &[State]) {
        let Some(leaf) = path.last() else { return };
        for (i, p) in path.iter().enumerate().take(path.len() - 1) {
            match p.history() {
                super::History::None => {}
                super::History::Shallow => {
                    self.rare_mut().history.insert(p.id(), path[i + 1].clone());
                }
                super::History::Deep => {
                    self.rare_mut().history.insert(p.id(), leaf.clone());
                }
            }
        }
    }
}

/// An agent's handle to the runtime, passed to every hook and handler.
///
/// Subscription changes take effect immediately for later demands. State changes requested
/// with [`change_state`](Self::change_state) are applied when the running handler returns
/// (its `on_exit`/`on_enter` hooks need the agent, which the handler is borrowing), before
/// the agent's next demand.
pub struct Context<A: Agent> {
    pub(crate) this: AgentWeak,
    pub(crate) id: AgentId,
    pub(crate) env: Environment,
    pub(crate) subs: Subscriptions<A>,
    pub(crate) states: States,
    /// The environment's tracer, if tracing is on.
    pub(crate) trace: Trace,
    /// Limits being declared (boxed at the first declaration); fixed at the first
    /// subscription or after `define`.
    limits: Option<Box<Declared>>,
}

impl<A: Agent> Drop for Context<A> {
    /// The agent has finished (or never started): its name goes.
    fn drop(&mut self) {
        self.env.0.names.forget(self.id);
    }
}

impl<A: Agent> std::fmt::Debug for Context<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("agent", &self.id)
            .finish_non_exhaustive()
    }
}

impl<A: Agent> Context<A> {
    pub(crate) fn new(this: AgentWeak, id: AgentId, env: Environment) -> Self {
        Context {
            this,
            id,
            trace: env.0.trace.clone(),
            env,
            subs: Subscriptions::default(),
            states: States::new(),
            limits: None,
        }
    }

    pub(crate) fn me(&self) -> Result<AgentRef, SubscribeError> {
        self.this
            .upgrade()
            .map(AgentRef)
            .ok_or(SubscribeError::AgentFinished)
    }

    /// The agent's id.
    pub fn agent_id(&self) -> AgentId {
        self.id
    }

    /// The agent's own direct (single-consumer) mbox.
    pub fn direct_mbox(&self) -> Mbox {
        Mbox(Repr::Direct(
            self.this
                .upgrade()
                .expect("a running agent's cell is alive"),
        ))
    }

    /// The environment the agent lives in.
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    /// Gives the agent a name (SObjectizer's `so_agent_name`), shown with its id in the
    /// error logger's lines about it and readable by anyone holding its
    /// [`AgentRef`](crate::AgentRef) ([`AgentRef::name`](crate::AgentRef::name)). Names are
    /// free text and need not be unique. Call it in `define` to have the name from
    /// registration on. The name is kept by the agent's environment (each environment
    /// has its own table) until the agent has finished: after its `on_finish`,
    /// [`AgentRef::name`](crate::AgentRef::name) returns `None`.
    ///
    /// # Errors
    ///
    /// [`AgentNameError::AlreadyNamed`](super::AgentNameError::AlreadyNamed) if the agent
    /// has a name already (a name is set once; the first one stays).
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    ///
    /// struct Worker(u32);
    /// impl Agent for Worker {
    ///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
    ///         ctx.set_name(format!("worker-{}", self.0)).unwrap();
    ///         assert!(ctx.set_name("again").is_err());
    ///         Ok(())
    ///     }
    ///     fn on_start(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.deregister_coop(DeregReason::Normal);
    ///     }
    /// }
    /// Environment::launch(|env| {
    ///     env.introduce_coop(|coop| { coop.add_agent(Worker(7)); }).unwrap();
    /// })
    /// .unwrap();
    /// ```
    pub fn set_name(&mut self, name: impl Into<String>) -> Result<(), super::AgentNameError> {
        self.env.0.names.set(self.id, name.into())
    }

    /// The agent's coop; `None` before registration.
    pub fn coop(&self) -> Option<CoopHandle> {
        let core = self.this.upgrade()?;
        let coop = core.coop()?;
        Some(CoopHandle::from_inner(&coop))
    }

    /// Starts deregistering the agent's coop with `reason`.
    pub fn deregister_coop(&self, reason: DeregReason) {
        if let Some(coop) = self.this.upgrade().and_then(|c| c.coop()) {
            coop.deregister(reason);
        }
    }

    /// Declares subscriptions to `mbox`.
    pub fn subscribe(&mut self, mbox: &Mbox) -> SubscriptionBuilder<'_, A> {
        SubscriptionBuilder::new(self, mbox.clone())
    }

    /// Declares subscriptions to the agent's own direct mbox.
    pub fn subscribe_self(&mut self) -> SubscriptionBuilder<'_, A> {
        let mbox = self.direct_mbox();
        SubscriptionBuilder::new(self, mbox)
    }

    /// Drops the subscription to `M` from `mbox` in `state`; returns whether there was one.
    /// Demands for it that are already queued are not handled (unless a parent state or a
    /// dead-letter handler takes them).
    pub fn unsubscribe<M: 'static>(&mut self, mbox: &Mbox, state: &State) -> bool {
        match self.me() {
            Ok(me) => self.subs.remove(&me, mbox.id().0, TypeId::of::<M>(), state),
            Err(_) => false,
        }
    }

    /// Drops the subscriptions to `M` from `mbox` in every state; returns how many.
    pub fn unsubscribe_all_states<M: 'static>(&mut self, mbox: &Mbox) -> usize {
        match self.me() {
            Ok(me) => self
                .subs
                .remove_all_states(&me, mbox.id().0, TypeId::of::<M>()),
            Err(_) => 0,
        }
    }

    /// Drops the dead-letter handler for `M` from `mbox`; returns whether there was one.
    pub fn unsubscribe_dead_letter<M: 'static>(&mut self, mbox: &Mbox) -> bool {
        match self.me() {
            Ok(me) => self
                .subs
                .remove_dead_letter(&me, mbox.id().0, TypeId::of::<M>()),
            Err(_) => false,
        }
    }

    /// Whether a subscription to `M` from `mbox` exists in exactly `state`.
    pub fn has_subscription<M: 'static>(&self, mbox: &Mbox, state: &State) -> bool {
        self.subs.has(mbox.id().0, TypeId::of::<M>(), state)
    }

    /// Sets or replaces the agent's delivery filter for `M` on `mbox`: only messages for
    /// which `filter` returns `true` are delivered to this agent. It runs on the sender's
    /// thread before anything is queued; a change affects only later sends.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::FiltersUnsupported`] on mboxes that cannot filter,
    /// [`SubscribeError::NotOwner`] on another agent's direct mbox.
    pub fn set_delivery_filter<M, F>(
        &mut self,
        mbox: &Mbox,
        filter: F,
    ) -> Result<(), SubscribeError>
    where
        M: Send + Sync + 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        let me = self.me()?;
        self.freeze_limits();
        self.subs.set_filter(
            &me,
            mbox,
            MessageType::of::<M>(),
            super::failure::owned_filter(DeliveryFilter::new(filter), &me.0),
        )
    }

    /// Sets a delivery filter built beforehand (such as a cluster mbox's shippable filter,
    /// `bridge::ShippableFilter`) as the agent's filter for `M` on `mbox`; the rules of
    /// [`set_delivery_filter`](Self::set_delivery_filter) apply. `filter` should be a
    /// filter over `M`: one over another type refuses every message.
    ///
    /// # Errors
    ///
    /// As [`set_delivery_filter`](Self::set_delivery_filter).
    pub fn set_built_delivery_filter<M: Send + Sync + 'static>(
        &mut self,
        mbox: &Mbox,
        filter: DeliveryFilter,
    ) -> Result<(), SubscribeError> {
        let me = self.me()?;
        self.freeze_limits();
        self.subs.set_filter(
            &me,
            mbox,
            MessageType::of::<M>(),
            super::failure::owned_filter(filter, &me.0),
        )
    }

    /// Removes the agent's delivery filter for `M` on `mbox`: every message is delivered
    /// again (if subscribed).
    pub fn drop_delivery_filter<M: 'static>(&mut self, mbox: &Mbox) {
        if let Ok(me) = self.me() {
            self.subs.drop_filter(&me, mbox, MessageType::named::<M>());
        }
    }

    /// The state every agent starts in.
    pub fn default_state(&self) -> &State {
        super::state::default_state()
    }

    /// The current leaf state (switches requested by the running handler are not applied
    /// yet).
    pub fn current_state(&self) -> &State {
        &self.states.current
    }

    /// Whether the current state is `state` or one of its substates.
    pub fn is_in_state(&self, state: &State) -> bool {
        self.states.current.is_within(state)
    }

    /// Switches to `target` (its initial or remembered substate if it is composite) when
    /// the running handler returns: `on_exit` hooks run from the old leaf up to the common
    /// ancestor, then `on_enter` hooks from below it down to the new leaf. Several calls in
    /// one handler are applied in order. Switching to the current state does nothing.
    ///
    /// # Errors
    ///
    /// [`StateError::SwitchInsideHook`] from an `on_enter`/`on_exit` hook;
    /// [`StateError::NoInitialSubstate`] for a composite state that cannot be entered.
    pub fn change_state(&mut self, target: &State) -> Result<(), StateError> {
        if self.states.in_hook {
            return Err(StateError::SwitchInsideHook);
        }
        if self.states.deactivated {
            return Err(StateError::AgentDeactivated);
        }
        self.states.resolve(target)?;
        self.states.keep(target);
        self.states.push_switch(target.clone());
        Ok(())
    }

    /// Deactivates the agent (SObjectizer's `so_deactivate_agent`): it switches to a state
    /// in which it handles nothing, and stays there until its coop is deregistered.
    ///
    /// - Every subscription and delivery filter goes now; messages already queued are
    ///   never handled (they find no handler).
    /// - When the running handler returns, the agent leaves its current state (its
    ///   `on_exit` hooks run, leaf first, and its time limits are disarmed) for the state
    ///   awaiting deregistration; state changes asked for earlier in the same handler are
    ///   dropped.
    /// - Later subscriptions fail with [`SubscribeError::AgentDeactivated`], state changes
    ///   with [`StateError::AgentDeactivated`].
    /// - The coop deregisters as usual (by whoever deregisters it): `on_finish` runs.
    ///
    /// Calling it again does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    ///
    /// struct Done;
    /// impl Agent for Done {
    ///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
    ///         ctx.subscribe_self().event(|_: &mut Self, _, _: &u32| unreachable!())?;
    ///         Ok(())
    ///     }
    ///     fn on_start(&mut self, ctx: &mut Context<Self>) {
    ///         send(&ctx.direct_mbox(), 1u32).unwrap(); // queued, never handled
    ///         ctx.deactivate_agent();
    ///         assert!(ctx.change_state(&State::new("x")).is_err());
    ///         ctx.deregister_coop(DeregReason::Normal);
    ///     }
    /// }
    ///
    /// Environment::launch(|env| {
    ///     env.introduce_coop(|coop| { coop.add_agent(Done); }).unwrap();
    /// }).unwrap();
    /// ```
    pub fn deactivate_agent(&mut self) {
        if self.states.deactivated {
            return;
        }
        self.states.clear_switches();
        self.states
            .push_switch(super::state::awaiting_deregistration_state().clone());
        self.states.deactivated = true;
        if let Ok(me) = self.me() {
            self.subs.deactivate(&me);
            me.0.direct_clear();
        }
    }

    /// Sets the hook run each time `state` is entered (replacing any previous one).
    pub fn on_enter<F>(&mut self, state: &State, hook: F)
    where
        F: FnMut(&mut A, &mut Context<A>) + Send + 'static,
    {
        self.set_hook(state, Box::new(hook), true);
    }

    /// Sets the hook run each time `state` is left (replacing any previous one).
    pub fn on_exit<F>(&mut self, state: &State, hook: F)
    where
        F: FnMut(&mut A, &mut Context<A>) + Send + 'static,
    {
        self.set_hook(state, Box::new(hook), false);
    }

    /// Limits the time the agent stays in `state` (or its substates): `limit` after each
    /// entry it switches to `target`, unless it left `state` before. Setting it again while
    /// the agent is in `state` restarts the countdown from zero.
    ///
    /// # Errors
    ///
    /// [`StateError::NoInitialSubstate`] if `target` cannot be entered.
    pub fn time_limit(
        &mut self,
        state: &State,
        limit: Duration,
        target: &State,
    ) -> Result<(), StateError> {
        self.states.resolve(target)?;
        self.states.keep(state);
        self.states.keep(target);
        let entry = self
            .states
            .rare_mut()
            .time_limits
            .entry_or_insert_with(state.id(), || TimeLimit {
                limit,
                target: target.clone(),
                timer: None,
                generation: 0,
            });
        entry.limit = limit;
        entry.target = target.clone();
        if self.states.current.is_within(state) {
            self.arm_time_limit(state.id());
        }
        Ok(())
    }

    /// Removes `state`'s time limit (a running countdown is cancelled).
    pub fn drop_time_limit(&mut self, state: &State) {
        self.disarm_time_limit(state.id());
        if let Some(r) = self.states.rare.as_mut() {
            r.time_limits.remove(&state.id());
        }
    }

    /// Starts (or restarts) the countdown of `state`'s time limit, if it has one.
    pub(crate) fn arm_time_limit(&mut self, state: u64) {
        let Ok(me) = self.me() else { return };
        let Some(tl) = self
            .states
            .rare
            .as_mut()
            .and_then(|r| r.time_limits.get_mut(&state))
        else {
            return;
        };
        tl.generation += 1;
        let msg = Message::new(TimeLimitExpired {
            state,
            generation: tl.generation,
        });
        tl.timer =
            self.env
                .0
                .timers
                .schedule(Target::Agent(me, TIME_LIMIT_MBOX), msg, tl.limit, None);
    }

    /// Stops the countdown of `state`'s time limit (its expiry, even if queued, is ignored).
    pub(crate) fn disarm_time_limit(&mut self, state: u64) {
        if let Some(tl) = self
            .states
            .rare
            .as_mut()
            .and_then(|r| r.time_limits.get_mut(&state))
        {
            tl.generation += 1;
            tl.timer = None;
        }
    }

    fn set_hook(&mut self, state: &State, hook: super::subscription::HookFn<A>, enter: bool) {
        self.states.keep(state);
        let slot = self.subs.alloc(1, Handler::Hook(hook));
        let entry = self
            .states
            .rare_mut()
            .hooks
            .entry_or_insert_with(state.id(), || (None, None));
        let old = if enter {
            entry.0.replace(slot)
        } else {
            entry.1.replace(slot)
        };
        if let Some(old) = old {
            self.subs.release(old);
        }
    }
}

impl<A: Agent> Context<A> {
    /// The reaction that applies to this agent: its own, else its coop's (and parents'),
    /// else the environment's.
    pub(crate) fn effective_reaction(&self) -> crate::exception::ExceptionReaction {
        use crate::exception::ExceptionReaction as R;
        let core = self.this.upgrade();
        let mut r = core.as_ref().map_or(R::Inherit, |c| c.reaction);
        if r == R::Inherit {
            if let Some(coop) = core.as_ref().and_then(|c| c.coop()) {
                r = coop.exception_reaction();
            }
        }
        if r == R::Inherit {
            r = self.env.exception_reaction();
        }
        r
    }

    pub(crate) fn thread_safe_view(&self) -> ThreadSafeContext<'_> {
        ThreadSafeContext {
            this: &self.this,
            id: self.id,
            env: &self.env,
            state: &self.states.current,
        }
    }
}
