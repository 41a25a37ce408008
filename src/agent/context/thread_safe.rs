//! [`ThreadSafeContext`]: what a thread-safe handler (`adv_thread_pool`) may do.

use super::*;

/// What a thread-safe handler may do: read, send, look around — but not change the
/// agent's state or subscriptions (other handlers of the agent may be running).
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::{StateError, ThreadSafeContext};
///
/// struct Lookup { table: Vec<u32> }
/// impl Agent for Lookup {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         ctx.subscribe_self().event_thread_safe(|a: &Self, ctx: &ThreadSafeContext, i: &usize| {
///             assert_eq!(ctx.change_state(&State::new("x")), Err(StateError::InThreadSafeHandler));
///             let _value = a.table.get(*i);
///             ctx.deregister_coop(DeregReason::Normal);
///         })?;
///         Ok(())
///     }
///     fn on_start(&mut self, ctx: &mut Context<Self>) {
///         send(&ctx.direct_mbox(), 1usize).unwrap();
///     }
///     fn exception_reaction(&self) -> ExceptionReaction { ExceptionReaction::Ignore }
/// }
///
/// Environment::launch(|env| {
///     env.introduce_coop(|coop| { coop.add_thread_safe_agent(Lookup { table: vec![1, 2] }); }).unwrap();
/// }).unwrap();
/// ```
pub struct ThreadSafeContext<'a> {
    pub(super) this: &'a AgentWeak,
    pub(super) id: AgentId,
    pub(super) env: &'a Environment,
    pub(super) state: &'a State,
}

impl std::fmt::Debug for ThreadSafeContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadSafeContext")
            .field("agent", &self.id)
            .finish_non_exhaustive()
    }
}

impl ThreadSafeContext<'_> {
    /// The agent's id.
    pub fn agent_id(&self) -> AgentId {
        self.id
    }

    /// The agent's own direct mbox.
    pub fn direct_mbox(&self) -> Mbox {
        Mbox(Repr::Direct(
            self.this
                .upgrade()
                .expect("a running agent's core is alive"),
        ))
    }

    /// The environment the agent lives in.
    pub fn environment(&self) -> &Environment {
        self.env
    }

    /// The agent's current state.
    pub fn current_state(&self) -> &State {
        self.state
    }

    /// Starts deregistering the agent's coop.
    pub fn deregister_coop(&self, reason: DeregReason) {
        if let Some(coop) = self.this.upgrade().and_then(|c| c.coop()) {
            coop.deregister(reason);
        }
    }

    /// Always refused: the state cannot change while other handlers may be running.
    ///
    /// # Errors
    ///
    /// Always [`StateError::InThreadSafeHandler`].
    pub fn change_state(&self, _target: &State) -> Result<(), StateError> {
        Err(StateError::InThreadSafeHandler)
    }

    /// Always refused: subscriptions cannot change while other handlers may be running.
    ///
    /// # Errors
    ///
    /// Always [`SubscribeError::InThreadSafeHandler`].
    pub fn unsubscribe<M: 'static>(
        &self,
        _mbox: &Mbox,
        _state: &State,
    ) -> Result<bool, SubscribeError> {
        Err(SubscribeError::InThreadSafeHandler)
    }
}
