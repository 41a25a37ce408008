//! YDB-style actors and async code: an actor runs a future and gets its result as an
//! event; async code asks an actor and awaits the answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use thiserror::Error;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use super::handle::Verdict;
use super::FutureHandle;
use crate::actors::{
    Actor, ActorContext, ActorSystem, Event, EventFlags, EventHandle, Handled, RegisterActorError,
    Undelivered, UndeliveredReason, Wakeup,
};
use crate::ActorId;

/// How often a running actor's future checks that its actor still lives.
///
/// An actor's end has no notification an outsider can wait on (YDB's actors have no
/// death watch), so the task looks at the actor system's table: a lookup, on the
/// runtime's timer, about every 20 ms of the future's life.
pub const LIVENESS_CHECK: Duration = Duration::from_millis(20);

/// Actors running futures (feature `tokio`): implemented for [`ActorContext`].
///
/// YDB has coroutine actors; here an actor stays a state machine whose handlers are
/// synchronous, and a future it starts runs on a tokio runtime, its output coming back
/// as an event from the actor to itself, handled by the current state function (or a
/// dead letter, as any event it leaves unhandled).
pub trait ActorAsyncExt {
    /// Runs `future` on `runtime`; its output `E` is sent to this actor (sender: the
    /// actor itself).
    ///
    /// The future is cancelled (dropped on its runtime, no event) once the actor has
    /// passed away: the task checks every [`LIVENESS_CHECK`], so within about that
    /// long, and at once if the actor is gone when the future is next woken. After
    /// [`FutureHandle::abort`] returned `true`, the event never comes.
    ///
    /// # Panics
    ///
    /// The task uses tokio's timer: the runtime must have its time driver enabled
    /// (`enable_time` or `enable_all`), or the task panics there (on the runtime, as
    /// `tokio::time::sleep` does; the actor is not affected and gets no event).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use agentbox::actors::*;
    /// use agentbox::tokio_interop::ActorAsyncExt;
    /// use agentbox::{ActorId, Environment};
    ///
    /// struct Computed(u64);
    /// impl Event for Computed { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
    ///
    /// struct Worker { rt: tokio::runtime::Handle }
    /// impl Actor for Worker {
    ///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
    ///         ctx.spawn_future(&self.rt, async {
    ///             tokio::time::sleep(Duration::from_millis(5)).await;
    ///             Computed(42)
    ///         });
    ///         ctx.become_state(Self::waiting);
    ///     }
    /// }
    /// impl Worker {
    ///     fn waiting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
    ///         match ev.get::<Computed>() {
    ///             Some(c) => {
    ///                 assert_eq!(c.0, 42);
    ///                 ctx.pass_away().unwrap();
    ///                 Handled::Yes
    ///             }
    ///             None => ev.unhandled(),
    ///         }
    ///     }
    /// }
    ///
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let handle = rt.handle().clone();
    /// Environment::launch(|env| {
    ///     let finished = env.finished();
    ///     std::thread::spawn(move || rt.block_on(finished));
    ///     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
    ///     system.register(Worker { rt: handle }).unwrap();
    /// }).unwrap(); // returns once the worker has passed away
    /// ```
    fn spawn_future<E, F>(&self, runtime: &Handle, future: F) -> FutureHandle
    where
        E: Event,
        F: Future<Output = E> + Send + 'static;
}

impl<A: Actor> ActorAsyncExt for ActorContext<A> {
    fn spawn_future<E, F>(&self, runtime: &Handle, future: F) -> FutureHandle
    where
        E: Event,
        F: Future<Output = E> + Send + 'static,
    {
        let system = self.system();
        let id = self.self_id();
        let verdict = Arc::new(Verdict::default());
        let task = runtime.spawn({
            let verdict = verdict.clone();
            async move {
                let watched = WhileAlive {
                    future: Box::pin(future),
                    system: system.clone(),
                    id,
                    tick: None,
                };
                // An abort that came while the future was being polled wins (see
                // `FutureHandle`).
                if let Some(event) = watched.await {
                    if verdict.claim_send() {
                        system.send_handle(EventHandle::new(id, id, event));
                    }
                }
            }
        });
        FutureHandle::new(task.abort_handle(), None, verdict)
    }
}

/// A future that resolves to `None` as soon as it sees the actor gone (at each wake-up
/// and each [`LIVENESS_CHECK`]), dropping the inner future then.
struct WhileAlive<F> {
    future: Pin<Box<F>>,
    system: ActorSystem,
    id: ActorId,
    tick: Option<Pin<Box<Sleep>>>,
}

impl<F: Future> Future for WhileAlive<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every field is `Unpin` (the inner future is boxed).
        let this = self.get_mut();
        if !this.system.is_registered(this.id) {
            return Poll::Ready(None);
        }
        if let Poll::Ready(v) = this.future.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let tick = this
            .tick
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(LIVENESS_CHECK)));
        while tick.as_mut().poll(cx).is_ready() {
            if !this.system.is_registered(this.id) {
                return Poll::Ready(None);
            }
            tick.as_mut().reset(Instant::now() + LIVENESS_CHECK);
        }
        Poll::Pending
    }
}

/// Sends `event` to `recipient` from a temporary actor and returns a future of the first
/// event of type `R` that comes back to it (YDB's ask pattern, awaited).
///
/// The temporary actor sends with [`EventFlags::TRACK_DELIVERY`], so a recipient that
/// does not exist answers [`AskError::Undelivered`] at once; it waits up to `timeout`
/// on the actor system's own timer (no tokio timer: the future runs on any runtime),
/// then passes away. The answer is any event of type `R` sent to the sender of the
/// request (reply with `ctx.send(ev.sender(), ...)`).
///
/// Nothing is registered until the call returns. Dropping the future gives up the
/// answer; the temporary actor still passes away at its answer or its timeout.
///
/// # Errors
///
/// The future resolves to [`AskError::Timeout`], [`AskError::Undelivered`],
/// [`AskError::Dropped`] (the system stopped, or the temporary actor was poisoned), or
/// [`AskError::Register`] (the system refused the temporary actor).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use agentbox::actors::*;
/// use agentbox::tokio_interop::{ask, AskError};
/// use agentbox::{ActorId, WrappedEnv};
///
/// const EVENTS: u32 = event_space_begin(ES_USERSPACE);
/// struct Question(u64);
/// impl Event for Question { const EVENT_TYPE: u32 = EVENTS + 1; }
/// struct Answer(u64);
/// impl Event for Answer { const EVENT_TYPE: u32 = EVENTS + 2; }
///
/// struct Doubler;
/// impl Actor for Doubler {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
///         ctx.become_state(Self::working);
///     }
/// }
/// impl Doubler {
///     fn working(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
///         match ev.take::<Question>() {
///             Some(Question(n)) => { ctx.send(ev.sender(), Answer(2 * n)); Handled::Yes }
///             None => ev.unhandled(),
///         }
///     }
/// }
///
/// let wrapped = WrappedEnv::new(|_| {}).unwrap();
/// let system = ActorSystem::start(wrapped.environment(), SystemSetup::new(1)).unwrap();
/// let doubler = system.register(Doubler).unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(async {
///     let answer = ask::<_, Answer>(&system, doubler, Question(21), Duration::from_secs(30));
///     assert_eq!(answer.await.map(|a| a.0), Ok(42));
///     let nobody = ActorId::new(1, 12345, 7);
///     let lost = ask::<_, Answer>(&system, nobody, Question(1), Duration::from_secs(30));
///     assert!(matches!(lost.await, Err(AskError::Undelivered { .. })));
/// });
/// system.stop();
/// wrapped.stop_then_join().unwrap();
/// ```
pub fn ask<E, R>(
    system: &ActorSystem,
    recipient: ActorId,
    event: E,
    timeout: Duration,
) -> AskFuture<R>
where
    E: Event,
    R: Event,
{
    let (tx, rx) = oneshot::channel();
    let asker = Asker {
        recipient,
        event: Some(event),
        timeout,
        tx: Some(tx),
    };
    let inner = match system.register(asker) {
        Ok(_) => Ok(rx),
        Err(e) => Err(Some(AskError::Register(e))),
    };
    AskFuture { inner }
}

/// Why [`ask`] gave no answer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AskError {
    /// No answer within the timeout.
    #[error("no answer within the timeout")]
    Timeout,
    /// The request could not be delivered (YDB's `TEvUndelivered`).
    #[error("the request was not delivered: {reason:?}")]
    Undelivered {
        /// Why.
        reason: UndeliveredReason,
    },
    /// The temporary actor went without an answer: the system stopped, or it was
    /// poisoned.
    #[error("the asking actor went without an answer")]
    Dropped,
    /// The system refused to register the temporary actor.
    #[error(transparent)]
    Register(RegisterActorError),
}

impl PartialEq for AskError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AskError::Timeout, AskError::Timeout) | (AskError::Dropped, AskError::Dropped) => true,
            (AskError::Undelivered { reason: a }, AskError::Undelivered { reason: b }) => a == b,
            _ => false,
        }
    }
}

/// The future of [`ask`].
#[must_use = "a future does nothing unless awaited"]
pub struct AskFuture<R> {
    inner: Result<oneshot::Receiver<Result<R, AskError>>, Option<AskError>>,
}

impl<R> Future for AskFuture<R> {
    type Output = Result<R, AskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Ok(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(AskError::Dropped))),
            Err(e) => Poll::Ready(Err(e.take().unwrap_or(AskError::Dropped))),
        }
    }
}

impl<R> fmt::Debug for AskFuture<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AskFuture").finish_non_exhaustive()
    }
}

/// The temporary actor of [`ask`].
struct Asker<E, R> {
    recipient: ActorId,
    event: Option<E>,
    timeout: Duration,
    tx: Option<oneshot::Sender<Result<R, AskError>>>,
}

impl<E: Event, R: Event> Actor for Asker<E, R> {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        if let Some(event) = self.event.take() {
            ctx.send_with(self.recipient, event, EventFlags::TRACK_DELIVERY, 0);
        }
        // A timeout too long for an `Instant` is no timeout.
        if std::time::Instant::now()
            .checked_add(self.timeout)
            .is_some()
        {
            ctx.schedule(self.timeout, Wakeup { tag: 0 });
        }
        ctx.become_state(Self::waiting);
    }
}

impl<E: Event, R: Event> Asker<E, R> {
    fn waiting(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
        let outcome = if let Some(answer) = ev.take::<R>() {
            Ok(answer)
        } else if let Some(u) = ev.get::<Undelivered>() {
            Err(AskError::Undelivered { reason: u.reason })
        } else if ev.is::<Wakeup>() {
            Err(AskError::Timeout)
        } else {
            return ev.unhandled();
        };
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(outcome);
        }
        let _ = ctx.pass_away();
        Handled::Yes
    }
}
