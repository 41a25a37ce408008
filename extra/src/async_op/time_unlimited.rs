//! Async operations without a timeout: completion handlers only.
//!
//! See [the module rules](super#the-rules).
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox_extra::async_op::time_unlimited;
//!
//! struct Ready;
//! struct Gone;
//! struct Waiter;
//!
//! impl Agent for Waiter {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         let me = ctx.direct_mbox();
//!         let s = ctx.default_state().clone();
//!         let _cancel = time_unlimited::make(ctx)
//!             .completed_on(&me, &s, |_: &mut Self, ctx, _: &Ready| {
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             })
//!             .completed_on(&me, &s, |_: &mut Self, _, _: &Gone| unreachable!("Ready won"))
//!             .activate(ctx)
//!             .unwrap();
//!         send(&me, Ready).unwrap();
//!         send(&me, Gone).unwrap(); // finds no handler: the operation has completed
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Waiter); }).unwrap();
//! })
//! .unwrap();
//! ```

use agentbox::{Agent, Context, Mbox, State};

use super::{subscribe_all, ActivateError, CancellationPoint, Completions, OpData};

/// Starts the definition of an operation of the agent whose context `ctx` is (so_5_extra's
/// `time_unlimited::make(agent)`). Nothing is subscribed until
/// [`activate`](Definition::activate).
pub fn make<A: Agent>(ctx: &Context<A>) -> Definition<A> {
    Definition {
        completions: Completions::new(ctx),
    }
}

/// A time-unlimited operation being defined; made by [`make`].
#[must_use = "nothing is subscribed until the definition is activated"]
pub struct Definition<A: Agent> {
    completions: Completions<A>,
}

impl<A: Agent> std::fmt::Debug for Definition<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("time_unlimited::Definition")
            .field("owner", &self.completions.owner)
            .field("completion_handlers", &self.completions.subs.len())
            .finish()
    }
}

impl<A: Agent> Definition<A> {
    /// Adds a completion handler: on an immutable `M` from `mbox` while the agent is in
    /// `state` (or a substate of it), the operation completes — every handler of it is
    /// unsubscribed — and then `handler` runs.
    pub fn completed_on<M, F>(mut self, mbox: &Mbox, state: &State, handler: F) -> Self
    where
        M: Send + Sync + 'static,
        F: FnMut(&mut A, &mut Context<A>, &M) + Send + 'static,
    {
        self.completions.add(mbox, state, handler);
        self
    }

    /// [`completed_on`](Self::completed_on) for a [`Mutable`](agentbox::Mutable) `M`
    /// (from a single-consumer mbox); the handler takes the value.
    pub fn completed_on_mutable<M, F>(mut self, mbox: &Mbox, state: &State, handler: F) -> Self
    where
        M: Send + 'static,
        F: FnMut(&mut A, &mut Context<A>, M) + Send + 'static,
    {
        self.completions.add_mutable(mbox, state, handler);
        self
    }

    /// Subscribes every completion handler and returns the operation's cancellation point.
    ///
    /// # Errors
    ///
    /// [`ActivateError::NoCompletionHandler`] without completion handlers;
    /// [`ActivateError::WrongAgent`] if `ctx` is not the context of the agent that made
    /// the definition; [`ActivateError::Subscribe`] if a handler cannot be subscribed. In
    /// each case nothing of the operation stays subscribed.
    pub fn activate(self, ctx: &mut Context<A>) -> Result<CancellationPoint<A>, ActivateError> {
        self.completions.check_owner(ctx)?;
        if self.completions.subs.is_empty() {
            return Err(ActivateError::NoCompletionHandler);
        }
        let op = OpData::new(self.completions.owner);
        let mut made = Vec::with_capacity(self.completions.subs.len());
        if let Err(e) = subscribe_all(ctx, &op, self.completions.subs, &mut made) {
            op.inner.lock().status = super::Status::Cancelled;
            return Err(e.into());
        }
        op.inner.lock().unsubscribe = made;
        Ok(CancellationPoint { op })
    }
}
