//! Asynchronous one-time operations (so_5_extra's `async_op`): a set of completion
//! handlers — and, in the time-limited flavour, timeout handlers with a timeout message —
//! that are subscribed together and unsubscribed together.
//!
//! An agent starts something (sends a request, asks a service) and waits for one of several
//! possible outcomes: a reply from one mbox, a failure notice from another, or nothing at
//! all before a deadline. Writing that by hand means subscribing every handler, remembering
//! what was subscribed, and taking it all back in each handler and on timeout. An async
//! operation does that bookkeeping.
//!
//! Two flavours, as in so_5_extra:
//!
//! - [`time_unlimited`]: completion handlers only. [`time_unlimited::make`] →
//!   [`completed_on`](time_unlimited::Definition::completed_on) … →
//!   [`activate(ctx)`](time_unlimited::Definition::activate).
//! - [`time_limited`]: completion handlers, timeout handlers (one per state, plus an
//!   optional default one) and a timeout message sent after a delay.
//!   [`time_limited::make`] → [`completed_on`](time_limited::Definition::completed_on) … →
//!   [`timeout_handler`](time_limited::Definition::timeout_handler) … →
//!   [`activate(ctx, timeout, msg)`](time_limited::Definition::activate).
//!
//! # The rules
//!
//! 1. **Nothing is subscribed before activation.** A definition only collects handlers; a
//!    message handled before [`activate`](time_limited::Definition::activate) finds none
//!    of them. (Handlers are looked up when a message is handled, not when it is queued:
//!    a completion queued before `activate` but handled after it is the operation's.)
//!    Dropping a definition without activating it does nothing.
//! 2. **Activation subscribes everything or nothing.** Each completion handler is a
//!    subscription of the owner agent to (mbox, message type, state). If one cannot be made
//!    (a duplicate within the operation or with the agent's own subscriptions, a mutable
//!    type on a multi-consumer mbox, a type the agent's message limits do not cover…), the
//!    ones already made by this operation are taken back and
//!    [`ActivateError::Subscribe`] says why; subscriptions the agent made itself are left
//!    alone. Activation consumes the definition, so an operation cannot be activated twice
//!    (a compile-time error, where so_5_extra throws).
//! 3. **The first outcome wins.** When a completion handler of the operation is called, or
//!    its timeout message is handled, every handler of the operation is unsubscribed and the
//!    timer is cancelled *before* the user's handler runs. A second completion message —
//!    even one already queued — is then not handled by the operation (the agent's own
//!    subscriptions in parent states, or its dead-letter handlers, still see it, as for any
//!    unsubscribed message).
//! 4. **[`CancellationPoint::cancel`]** does the same without calling any handler.
//!    Cancelling an operation that has already finished does nothing. Dropping the
//!    cancellation point does *not* cancel: an activated operation lives in its
//!    subscriptions, like so_5_extra's.
//! 5. **The timeout** (time-limited flavour) is the message given to `activate`, sent after
//!    the delay to a fresh mbox of the operation's own, so it never collides with the
//!    agent's subscriptions or with another operation's timeout. It is handled by the
//!    timeout handler of the agent's current state (looked up through parent states as
//!    usual); in a state without one by the default timeout handler, if any; and in any case
//!    it ends the operation. Because finishing the operation cancels the timer, a timeout
//!    that was already queued when a completion won is not handled.
//! 6. **Only the owner agent uses an operation.** Handlers run on the owner's worker, one at
//!    a time, as ordinary (not thread-safe) handlers; the operation's bookkeeping is only
//!    touched from them and from the owner's `activate`/`cancel` calls, which need its
//!    [`Context`]. Activating with another agent's context is
//!    [`ActivateError::WrongAgent`]; cancelling with one panics.
//! 7. A completion message that arrives while the agent is in a state for which the
//!    operation has no handler is not handled by the operation, and the operation stays
//!    active (as in so_5_extra).
//!
//! # Examples
//!
//! A client asks a service and waits at most a second for the reply; a failure notice from
//! another mbox also ends the wait.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox_extra::async_op::{time_limited, CancellationPoint, Status};
//!
//! struct Ask { reply_to: Mbox }
//! struct Reply(u32);
//! struct Failed;
//! struct Timeout { request: u32 }
//!
//! struct Service;
//! impl Agent for Service {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         let requests = ctx.environment().named_mbox("service");
//!         ctx.subscribe(&requests).event(|_: &mut Self, _, ask: &Ask| {
//!             send(&ask.reply_to, Reply(42)).unwrap();
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! static ANSWER: AtomicU32 = AtomicU32::new(0);
//!
//! struct Client { op: Option<CancellationPoint<Self>> }
//! impl Agent for Client {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         let me = ctx.direct_mbox();
//!         let failures = ctx.environment().named_mbox("failures");
//!         let waiting = ctx.default_state().clone();
//!         // Nothing is subscribed yet...
//!         let op = time_limited::make(ctx)
//!             .completed_on(&me, &waiting, |a: &mut Self, ctx, r: &Reply| {
//!                 // The other handlers are gone and the timer is cancelled already.
//!                 assert_eq!(a.op.as_ref().unwrap().status(), Status::Completed);
//!                 ANSWER.store(r.0, Ordering::SeqCst);
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             })
//!             .completed_on(&failures, &waiting, |_: &mut Self, ctx, _: &Failed| {
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             })
//!             .timeout_handler(&waiting, |_: &mut Self, ctx, t: &Timeout| {
//!                 eprintln!("request {} timed out", t.request);
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             })
//!             // ...until here: three handlers, and a timer for `Timeout`.
//!             .activate(ctx, Duration::from_secs(1), Timeout { request: 1 })
//!             .unwrap();
//!         self.op = Some(op); // only needed to cancel it (or look at its status)
//!         send(&ctx.environment().named_mbox("service"), Ask { reply_to: me }).unwrap();
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| {
//!         coop.add_agent(Service);
//!         coop.add_agent(Client { op: None });
//!     })
//!     .unwrap();
//! })
//! .unwrap();
//! assert_eq!(ANSWER.load(Ordering::SeqCst), 42);
//! ```
//!
//! Activation consumes the definition: activating twice does not compile.
//!
//! ```compile_fail
//! use agentbox::prelude::*;
//! use agentbox_extra::async_op::time_unlimited;
//!
//! struct Done;
//! struct A;
//! impl Agent for A {
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         let me = ctx.direct_mbox();
//!         let s = ctx.default_state().clone();
//!         let op = time_unlimited::make(ctx).completed_on(&me, &s, |_: &mut Self, _, _: &Done| {});
//!         let _first = op.activate(ctx);
//!         let _second = op.activate(ctx); // error: use of moved value `op`
//!     }
//! }
//! ```

use std::sync::Arc;

use agentbox::{
    Agent, AgentId, Context, Mbox, Mutable, State, SubscribeError, TimerError, TimerHandle,
};
use parking_lot::Mutex;
use thiserror::Error;

pub mod time_limited;
pub mod time_unlimited;

/// Where an activated operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Its handlers are subscribed; no outcome yet.
    Activated,
    /// One of its completion handlers was called.
    Completed,
    /// Its timeout message was handled (time-limited operations only).
    TimedOut,
    /// [`CancellationPoint::cancel`] ended it.
    Cancelled,
}

/// Why an operation could not be activated. Nothing of the operation stays subscribed and
/// no timer is left running.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ActivateError {
    /// A time-unlimited operation needs at least one completion handler (it could never
    /// finish otherwise).
    #[error("an async operation without a completion handler cannot be activated")]
    NoCompletionHandler,
    /// The operation was made for another agent than the one activating it.
    #[error(
        "the async operation was made by agent {made_by:?} but activated by agent {activated_by:?}"
    )]
    WrongAgent {
        /// The agent whose context made the definition.
        made_by: AgentId,
        /// The agent whose context was given to `activate`.
        activated_by: AgentId,
    },
    /// One of the operation's handlers could not be subscribed (for instance
    /// [`SubscribeError::Duplicate`]: the same mbox, message type and state twice in the
    /// operation, or already subscribed by the agent).
    #[error("a handler of the async operation could not be subscribed: {0}")]
    Subscribe(#[from] SubscribeError),
    /// The timeout message could not be scheduled.
    #[error("the timeout of the async operation could not be scheduled: {0}")]
    Timer(#[from] TimerError),
}

/// Cancels an activated operation; returned by `activate`.
///
/// It may be kept (usually in the agent, as `Option<CancellationPoint<Self>>`) or dropped:
/// dropping it does not cancel the operation.
pub struct CancellationPoint<A: Agent> {
    op: Arc<OpData<A>>,
}

impl<A: Agent> std::fmt::Debug for CancellationPoint<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancellationPoint")
            .field("owner", &self.op.owner)
            .field("status", &self.status())
            .finish()
    }
}

impl<A: Agent> CancellationPoint<A> {
    /// The operation's status.
    pub fn status(&self) -> Status {
        self.op.inner.lock().status
    }

    /// Whether the operation is still waiting for an outcome (and so can be cancelled).
    pub fn is_cancellable(&self) -> bool {
        self.status() == Status::Activated
    }

    /// Cancels the operation: every handler of it is unsubscribed (messages already queued
    /// for them are not handled) and its timer is cancelled. Returns whether this call
    /// ended the operation; on an operation that has already completed, timed out or been
    /// cancelled it does nothing and returns `false`.
    ///
    /// # Panics
    ///
    /// If `ctx` is not the context of the agent that made the operation.
    pub fn cancel(&self, ctx: &mut Context<A>) -> bool {
        assert_eq!(
            ctx.agent_id(),
            self.op.owner,
            "an async operation can only be cancelled by the agent that made it"
        );
        self.op.finish(ctx, Status::Cancelled)
    }
}

/// Takes one subscription of an operation back.
type Unsubscribe<A> = Box<dyn FnOnce(&mut Context<A>) + Send>;

/// Makes one subscription of an operation (its handler wrapped to finish `op` first);
/// returns how to take it back.
type Subscribe<A> = Box<
    dyn FnOnce(&mut Context<A>, &Arc<OpData<A>>) -> Result<Unsubscribe<A>, SubscribeError> + Send,
>;

/// The shared state of an activated operation: held by its wrapped handlers (through the
/// agent's subscriptions) and by its cancellation point. Only the owner agent's handlers
/// touch it, one at a time; the mutex is never contended and is never held while an
/// agentbox call or a user handler runs.
struct OpData<A: Agent> {
    owner: AgentId,
    inner: Mutex<Inner<A>>,
}

struct Inner<A: Agent> {
    status: Status,
    unsubscribe: Vec<Unsubscribe<A>>,
    timer: Option<TimerHandle>,
}

impl<A: Agent> OpData<A> {
    fn new(owner: AgentId) -> Arc<Self> {
        Arc::new(OpData {
            owner,
            inner: Mutex::new(Inner {
                status: Status::Activated,
                unsubscribe: Vec::new(),
                timer: None,
            }),
        })
    }

    /// Ends an active operation with `status`: cancels the timer and takes back every
    /// subscription. False (and nothing done) if it had already ended.
    fn finish(&self, ctx: &mut Context<A>, status: Status) -> bool {
        let (unsubscribe, timer) = {
            let mut inner = self.inner.lock();
            if inner.status != Status::Activated {
                return false;
            }
            inner.status = status;
            (std::mem::take(&mut inner.unsubscribe), inner.timer.take())
        };
        if let Some(timer) = timer {
            timer.cancel();
        }
        for u in unsubscribe {
            u(ctx);
        }
        true
    }
}

/// Subscribes `subs` for `op` in order; on the first failure takes back the ones made and
/// returns the error.
fn subscribe_all<A: Agent>(
    ctx: &mut Context<A>,
    op: &Arc<OpData<A>>,
    subs: Vec<Subscribe<A>>,
    made: &mut Vec<Unsubscribe<A>>,
) -> Result<(), SubscribeError> {
    for s in subs {
        match s(ctx, op) {
            Ok(u) => made.push(u),
            Err(e) => {
                for u in made.drain(..).rev() {
                    u(ctx);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The completion handlers of a definition, not subscribed yet; shared by both flavours.
struct Completions<A: Agent> {
    owner: AgentId,
    subs: Vec<Subscribe<A>>,
}

impl<A: Agent> Completions<A> {
    fn new(ctx: &Context<A>) -> Self {
        Completions {
            owner: ctx.agent_id(),
            subs: Vec::new(),
        }
    }

    fn check_owner(&self, ctx: &Context<A>) -> Result<(), ActivateError> {
        if ctx.agent_id() == self.owner {
            Ok(())
        } else {
            Err(ActivateError::WrongAgent {
                made_by: self.owner,
                activated_by: ctx.agent_id(),
            })
        }
    }

    fn add<M, F>(&mut self, mbox: &Mbox, state: &State, mut handler: F)
    where
        M: Send + Sync + 'static,
        F: FnMut(&mut A, &mut Context<A>, &M) + Send + 'static,
    {
        let (mbox, state) = (mbox.clone(), state.clone());
        self.subs.push(Box::new(move |ctx, op| {
            let op = Arc::clone(op);
            ctx.subscribe(&mbox).in_state(&state).event(
                move |a: &mut A, ctx: &mut Context<A>, m: &M| {
                    if op.finish(ctx, Status::Completed) {
                        handler(a, ctx, m);
                    }
                },
            )?;
            Ok(Box::new(move |ctx: &mut Context<A>| {
                ctx.unsubscribe::<M>(&mbox, &state);
            }))
        }));
    }

    fn add_mutable<M, F>(&mut self, mbox: &Mbox, state: &State, mut handler: F)
    where
        M: Send + 'static,
        F: FnMut(&mut A, &mut Context<A>, M) + Send + 'static,
    {
        let (mbox, state) = (mbox.clone(), state.clone());
        self.subs.push(Box::new(move |ctx, op| {
            let op = Arc::clone(op);
            ctx.subscribe(&mbox).in_state(&state).event_mutable(
                move |a: &mut A, ctx: &mut Context<A>, m: M| {
                    if op.finish(ctx, Status::Completed) {
                        handler(a, ctx, m);
                    }
                },
            )?;
            Ok(Box::new(move |ctx: &mut Context<A>| {
                ctx.unsubscribe::<Mutable<M>>(&mbox, &state);
            }))
        }));
    }
}
