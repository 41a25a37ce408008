//! [`SubscriptionBuilder`]: how a handler declares its subscriptions (mbox, states,
//! message type, handler or fixed action). The index it fills is
//! [`Subscriptions`](super::subscription::Subscriptions).

use std::sync::Arc;

use smallvec::SmallVec;

use super::subscription::{Action, EventFn, NewAction, SafeFn};
use super::{Agent, AgentRef, Context, State, ThreadSafeContext};
use crate::exception::ExceptionReaction;
use crate::mbox::{Mbox, SubscribeError};
use crate::message::MessageType;

/// Declares subscriptions to one mbox, in one or more states.
///
/// Made by [`Context::subscribe`] and [`Context::subscribe_self`]. With no
/// [`in_state`](Self::in_state) the subscription is made in the agent's default state.
/// Each finishing method subscribes one message type.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
///
/// struct Tick;
/// struct Counter { ticks: u32, paused: State }
///
/// impl Agent for Counter {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         let default = ctx.default_state().clone();
///         ctx.subscribe_self().in_state(&default).event(|a: &mut Self, ctx, _: &Tick| {
///             a.ticks += 1;
///             if a.ticks == 3 {
///                 ctx.deregister_coop(DeregReason::Normal);
///             }
///         })?;
///         // In `paused`, ticks are dropped without looking at the parent states.
///         ctx.subscribe_self().in_state(&self.paused).suppress::<Tick>()?;
///         Ok(())
///     }
///     fn on_start(&mut self, ctx: &mut Context<Self>) {
///         for _ in 0..3 {
///             send(&ctx.direct_mbox(), Tick).unwrap();
///         }
///     }
/// }
///
/// Environment::launch(|env| {
///     env.introduce_coop(|coop| {
///         coop.add_agent(Counter { ticks: 0, paused: State::new("paused") });
///     }).unwrap();
/// }).unwrap();
/// ```
pub struct SubscriptionBuilder<'c, A: Agent> {
    ctx: &'c mut Context<A>,
    mbox: Mbox,
    states: SmallVec<[State; 1]>,
}

impl<A: Agent> std::fmt::Debug for SubscriptionBuilder<'_, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionBuilder")
            .field("mbox", &self.mbox)
            .finish_non_exhaustive()
    }
}

impl<'c, A: Agent> SubscriptionBuilder<'c, A> {
    pub(crate) fn new(ctx: &'c mut Context<A>, mbox: Mbox) -> Self {
        SubscriptionBuilder {
            ctx,
            mbox,
            states: SmallVec::new(),
        }
    }

    /// Adds a state the subscription is made in (may be called several times).
    pub fn in_state(mut self, state: &State) -> Self {
        self.states.push(state.clone());
        self
    }

    fn add(self, ty: MessageType, action: NewAction<A>) -> Result<(), SubscribeError> {
        let SubscriptionBuilder {
            ctx,
            mbox,
            mut states,
        } = self;
        if states.is_empty() {
            states.push(super::state::default_state().clone());
        }
        for s in &states {
            ctx.states.keep(s);
        }
        if let NewAction::Action(Action::TransferTo(t) | Action::JustSwitchTo(t)) = &action {
            ctx.states.keep(t);
        }
        let me = ctx.me()?;
        ctx.freeze_limits();
        check_limit(&me, ty)?;
        ctx.subs.add(&me, &mbox, ty, &states, action)
    }

    /// Handles immutable messages of type `M` with `handler(agent, ctx, &msg)`.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::Duplicate`] if a handler exists for `M` from this mbox in one of
    /// the states; whatever the mbox refuses.
    pub fn event<M, F>(self, mut handler: F) -> Result<(), SubscribeError>
    where
        M: Send + Sync + 'static,
        F: FnMut(&mut A, &mut Context<A>, &M) + Send + 'static,
    {
        self.add(
            MessageType::of::<M>(),
            NewAction::Handler(Box::new(move |a, ctx, msg| {
                match msg.handler_payload::<M>() {
                    Some(m) => {
                        handler(a, ctx, m);
                        true
                    }
                    None => false,
                }
            })),
        )
    }

    /// Handles [`Mutable`](crate::Mutable) messages of type `M`; the handler takes the value.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::MutableFromMultiConsumer`] on a multi-consumer mbox; as
    /// [`event`](Self::event) otherwise.
    pub fn event_mutable<M, F>(self, mut handler: F) -> Result<(), SubscribeError>
    where
        M: Send + 'static,
        F: FnMut(&mut A, &mut Context<A>, M) + Send + 'static,
    {
        self.add(
            MessageType::of_mutable::<M>(),
            NewAction::Handler(Box::new(move |a, ctx, msg| match msg.handler_take::<M>() {
                Some(m) => {
                    handler(a, ctx, m);
                    true
                }
                None => false,
            })),
        )
    }

    /// Handles immutable messages of type `M` with a *thread-safe* handler: it gets the
    /// agent by shared reference and a [`ThreadSafeContext`], so on `adv_thread_pool` it
    /// may run in parallel with other thread-safe handlers of the same agent (elsewhere it
    /// runs like any handler). Its agent must be added with
    /// [`Coop::add_thread_safe_agent`](crate::Coop::add_thread_safe_agent) for that.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::ReactionNotAllowed`] unless the agent's effective exception
    /// reaction is `Ignore` or `Abort` (a panic in a parallel handler cannot deregister or
    /// shut down anything safely); as [`event`](Self::event) otherwise.
    pub fn event_thread_safe<M, F>(self, handler: F) -> Result<(), SubscribeError>
    where
        A: Sync,
        M: Send + Sync + 'static,
        F: Fn(&A, &ThreadSafeContext<'_>, &M) + Send + Sync + 'static,
    {
        let reaction = self.ctx.effective_reaction();
        if !matches!(
            reaction,
            ExceptionReaction::Ignore | ExceptionReaction::Abort
        ) {
            return Err(SubscribeError::ReactionNotAllowed {
                reaction: format!("{reaction:?}"),
            });
        }
        let f: SafeFn<A> = Arc::new(move |a, ctx, msg| {
            if let Some(m) = msg.handler_payload::<M>() {
                handler(a, ctx, m)
            }
        });
        self.add(MessageType::of::<M>(), NewAction::Safe(f))
    }

    /// On `M`, switches to `target` and handles the same message there (SObjectizer's
    /// `transfer_to_state`). Coming back to a state already passed for the message is a
    /// [`StateError::TransferLoop`](crate::StateError::TransferLoop), handled as a failure
    /// of the agent by its exception reaction.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn transfer_to_state<M: 'static>(self, target: &State) -> Result<(), SubscribeError> {
        let a = Action::TransferTo(target.clone());
        self.add(MessageType::named::<M>(), NewAction::Action(a))
    }

    /// On `M`, switches to `target`; the message is consumed.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn just_switch_to<M: 'static>(self, target: &State) -> Result<(), SubscribeError> {
        let a = Action::JustSwitchTo(target.clone());
        self.add(MessageType::named::<M>(), NewAction::Action(a))
    }

    /// Drops `M` in these states without looking in their parent states.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn suppress<M: 'static>(self) -> Result<(), SubscribeError> {
        self.add(
            MessageType::named::<M>(),
            NewAction::Action(Action::Suppress),
        )
    }

    /// Handles `M` from this mbox when no state on the current path has a subscription for
    /// it (the states given with `in_state` are ignored).
    ///
    /// # Errors
    ///
    /// [`SubscribeError::Duplicate`] if a dead-letter handler exists for `M` from this mbox.
    pub fn dead_letter<M, F>(self, mut handler: F) -> Result<(), SubscribeError>
    where
        M: Send + Sync + 'static,
        F: FnMut(&mut A, &mut Context<A>, &M) + Send + 'static,
    {
        let SubscriptionBuilder { ctx, mbox, .. } = self;
        let me = ctx.me()?;
        ctx.freeze_limits();
        check_limit(&me, MessageType::of::<M>())?;
        let h: EventFn<A> = Box::new(move |a, ctx, msg| match msg.handler_payload::<M>() {
            Some(m) => {
                handler(a, ctx, m);
                true
            }
            None => false,
        });
        ctx.subs
            .add_dead_letter(&me, &mbox, MessageType::of::<M>(), h)
    }
}

/// Rule 5 of [`crate::limits`]: an agent with limits subscribes only to limited types.
fn check_limit(me: &AgentRef, ty: MessageType) -> Result<(), SubscribeError> {
    match me.0.limits.get() {
        Some(table) if !table.cover(ty) => Err(SubscribeError::NoLimit {
            type_name: ty.name(),
        }),
        _ => Ok(()),
    }
}
