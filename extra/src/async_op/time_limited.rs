//! Async operations with a timeout: completion handlers, timeout handlers and a timeout
//! message sent after a delay.
//!
//! See [the module rules](super#the-rules) and the [module example](super#examples).
//!
//! The timeout message `T` goes to a fresh multi-consumer mbox of the operation's own. The
//! timeout handler of the agent's current state handles it (parent states are looked up as
//! usual); in a state without one, the default timeout handler (a dead-letter handler on
//! that mbox) does. Either way the operation ends as [`Status::TimedOut`](super::Status)
//! before the handler runs; with no default timeout handler, a timeout in a state without a
//! timeout handler ends the operation silently.

use std::time::Duration;

use agentbox::{send_delayed, Agent, Context, Mbox, State};

use super::{
    subscribe_all, ActivateError, CancellationPoint, Completions, OpData, Status, Unsubscribe,
};

type TimeoutFn<A, T> = Box<dyn FnMut(&mut A, &mut Context<A>, &T) + Send>;

/// Starts the definition of an operation of the agent whose context `ctx` is, with timeout
/// message type `T` (so_5_extra's `time_limited::make<T>(agent)`; `T` is usually inferred
/// from the message given to [`activate`](Definition::activate), or written
/// `make::<T, _>(ctx)`). Nothing is subscribed until `activate`.
pub fn make<T, A>(ctx: &Context<A>) -> Definition<T, A>
where
    T: Send + Sync + 'static,
    A: Agent,
{
    Definition {
        completions: Completions::new(ctx),
        timeout_handlers: Vec::new(),
        default_timeout_handler: None,
    }
}

/// A time-limited operation being defined; made by [`make`].
#[must_use = "nothing is subscribed until the definition is activated"]
pub struct Definition<T, A: Agent> {
    completions: Completions<A>,
    timeout_handlers: Vec<(State, TimeoutFn<A, T>)>,
    default_timeout_handler: Option<TimeoutFn<A, T>>,
}

impl<T, A: Agent> std::fmt::Debug for Definition<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("time_limited::Definition")
            .field("owner", &self.completions.owner)
            .field("timeout_type", &std::any::type_name::<T>())
            .field("completion_handlers", &self.completions.subs.len())
            .field(
                "timeout_states",
                &self
                    .timeout_handlers
                    .iter()
                    .map(|(s, _)| s.name())
                    .collect::<Vec<_>>(),
            )
            .field(
                "default_timeout_handler",
                &self.default_timeout_handler.is_some(),
            )
            .finish()
    }
}

impl<T, A> Definition<T, A>
where
    T: Send + Sync + 'static,
    A: Agent,
{
    /// Adds a completion handler: on an immutable `M` from `mbox` while the agent is in
    /// `state` (or a substate of it), the operation completes — every handler of it is
    /// unsubscribed and the timer cancelled — and then `handler` runs.
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

    /// Adds the timeout handler for `state` (and its substates without their own): when
    /// the timeout message comes while the agent is there, the operation times out — every
    /// handler of it is unsubscribed — and then `handler` runs with the message.
    /// A second handler for the same state is [`ActivateError::Subscribe`] at activation.
    pub fn timeout_handler<F>(mut self, state: &State, handler: F) -> Self
    where
        F: FnMut(&mut A, &mut Context<A>, &T) + Send + 'static,
    {
        self.timeout_handlers
            .push((state.clone(), Box::new(handler)));
        self
    }

    /// Sets the handler for a timeout that comes while the agent is in a state without a
    /// timeout handler; replaces an earlier one (as in so_5_extra).
    pub fn default_timeout_handler<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&mut A, &mut Context<A>, &T) + Send + 'static,
    {
        self.default_timeout_handler = Some(Box::new(handler));
        self
    }

    /// Subscribes every completion and timeout handler, then sends `msg` as the timeout
    /// message after `timeout` (timers never fire early; [`Duration::MAX`] means never),
    /// and returns the operation's cancellation point.
    ///
    /// An operation without completion handlers is allowed (as in so_5_extra): it is a
    /// cancellable timeout with per-state handlers.
    ///
    /// # Errors
    ///
    /// [`ActivateError::WrongAgent`] if `ctx` is not the context of the agent that made the
    /// definition; [`ActivateError::Subscribe`] if a handler cannot be subscribed;
    /// [`ActivateError::Timer`] if the timeout cannot be scheduled. In each case nothing of
    /// the operation stays subscribed and no timer runs.
    pub fn activate(
        self,
        ctx: &mut Context<A>,
        timeout: Duration,
        msg: T,
    ) -> Result<CancellationPoint<A>, ActivateError> {
        let Definition {
            completions,
            timeout_handlers,
            default_timeout_handler,
        } = self;
        completions.check_owner(ctx)?;
        let op = OpData::new(completions.owner);
        let timeout_mbox = ctx.environment().create_mbox();
        let mut made: Vec<Unsubscribe<A>> =
            Vec::with_capacity(completions.subs.len() + timeout_handlers.len() + 1);
        let subscribed = subscribe_all(ctx, &op, completions.subs, &mut made).and_then(|()| {
            let mut subs: Vec<super::Subscribe<A>> = timeout_handlers
                .into_iter()
                .map(|(state, h)| timeout_in_state(&timeout_mbox, state, h))
                .collect();
            subs.push(default_timeout(&timeout_mbox, default_timeout_handler));
            subscribe_all(ctx, &op, subs, &mut made)
        });
        let scheduled = subscribed
            .map_err(ActivateError::from)
            .and_then(|()| send_delayed(&timeout_mbox, timeout, msg).map_err(Into::into));
        match scheduled {
            Ok(timer) => {
                let mut inner = op.inner.lock();
                inner.unsubscribe = made;
                inner.timer = Some(timer);
            }
            Err(e) => {
                // After a subscription failure `made` is already empty; after a timer
                // failure it holds every subscription.
                for u in made.into_iter().rev() {
                    u(ctx);
                }
                op.inner.lock().status = Status::Cancelled;
                return Err(e);
            }
        }
        Ok(CancellationPoint { op })
    }
}

fn timeout_in_state<A, T>(
    timeout_mbox: &Mbox,
    state: State,
    mut handler: TimeoutFn<A, T>,
) -> super::Subscribe<A>
where
    A: Agent,
    T: Send + Sync + 'static,
{
    let mbox = timeout_mbox.clone();
    Box::new(move |ctx, op| {
        let op = std::sync::Arc::clone(op);
        ctx.subscribe(&mbox).in_state(&state).event(
            move |a: &mut A, ctx: &mut Context<A>, t: &T| {
                if op.finish(ctx, Status::TimedOut) {
                    handler(a, ctx, t);
                }
            },
        )?;
        Ok(Box::new(move |ctx: &mut Context<A>| {
            ctx.unsubscribe::<T>(&mbox, &state);
        }))
    })
}

fn default_timeout<A, T>(
    timeout_mbox: &Mbox,
    mut handler: Option<TimeoutFn<A, T>>,
) -> super::Subscribe<A>
where
    A: Agent,
    T: Send + Sync + 'static,
{
    let mbox = timeout_mbox.clone();
    Box::new(move |ctx, op| {
        let op = std::sync::Arc::clone(op);
        ctx.subscribe(&mbox)
            .dead_letter(move |a: &mut A, ctx: &mut Context<A>, t: &T| {
                if op.finish(ctx, Status::TimedOut) {
                    if let Some(h) = handler.as_mut() {
                        h(a, ctx, t);
                    }
                }
            })?;
        Ok(Box::new(move |ctx: &mut Context<A>| {
            ctx.unsubscribe_dead_letter::<T>(&mbox);
        }))
    })
}
