//! `request_reply` as a future: an async caller asks an agent without blocking a thread.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use crate::mbox::Mbox;
use crate::request::{RemoteReply, ReplyError, Request, RequestError};

/// The reply of one async request: `Ok(reply)`, or the error the handler side gave
/// (a bridge's lost node).
type Answer<Rep> = Result<Rep, RequestError>;

/// The way back to an async caller: a oneshot sender. Dropped unanswered, the receiver
/// sees the channel closed, which the caller reads as [`RequestError::Dropped`].
struct OneshotReply<Rep>(oneshot::Sender<Answer<Rep>>);

impl<Rep: Send> RemoteReply<Rep> for OneshotReply<Rep> {
    fn reply(self: Box<Self>, reply: Rep) -> Result<(), ReplyError> {
        self.0
            .send(Ok(reply))
            .map_err(|_| ReplyError::RequesterGone)
    }

    fn fail(self: Box<Self>, error: RequestError) {
        let _ = self.0.send(Err(error));
    }
}

/// Sends a [`Request<Req, Rep>`] to `to` now and returns a future of its reply, which
/// waits up to `timeout` without blocking the thread that polls it.
///
/// The same request as [`crate::request::request_reply`] (agents handle it with the same
/// `Request<Req, Rep>` subscription and answer it the same ways: at once, later through a
/// [`ReplyHandle`](crate::request::ReplyHandle), or by forwarding it), and the same
/// outcomes: the first reply; [`RequestError::Timeout`]; [`RequestError::Dropped`] at
/// once when every copy of the request is dropped unanswered; [`RequestError::Send`]
/// when `to` refuses it (the future then resolves at its first poll). There is no
/// [`RequestError::WouldDeadlock`]: an async caller blocks no agent's thread.
///
/// The request is sent when this function is called, not when the future is first
/// polled. Dropping the future gives up the request: a later reply fails with
/// [`ReplyError::RequesterGone`].
///
/// # Panics
///
/// The future, polled with a finite `timeout`, uses tokio's timer: polling it outside a
/// tokio runtime with the time driver enabled (`enable_time` or `enable_all`) panics, as
/// `tokio::time::sleep` does. A `timeout` too long for an `Instant` (such as
/// `Duration::MAX`) is no timeout and needs no timer.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use agentbox::prelude::*;
/// use agentbox::request::Request;
/// use agentbox::tokio_interop;
///
/// struct Squarer;
/// impl Agent for Squarer {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         ctx.subscribe_self().event(|_: &mut Self, _, r: &Request<u64, u64>| {
///             r.reply(r.get() * r.get()).unwrap();
///         })?;
///         Ok(())
///     }
/// }
///
/// let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
/// let squarer = wrapped.environment().introduce_coop(|c| c.add_agent(Squarer)).unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let answer = rt.block_on(async {
///     tokio_interop::request_reply::<u64, u64>(&squarer, Duration::from_secs(30), 7).await
/// });
/// assert_eq!(answer, Ok(49));
/// wrapped.stop_then_join().unwrap();
/// ```
pub fn request_reply<Req, Rep>(to: &Mbox, timeout: Duration, request: Req) -> ReplyFuture<Rep>
where
    Req: Send + Sync + 'static,
    Rep: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let deadline = Instant::now().checked_add(timeout);
    // The deadline travels with the request: across nodes the bridge frees its answer id
    // at that instant and drops a later answer (nothing reaches the caller after it).
    let sent = to.send(
        Request::remote(request, Box::new(OneshotReply(tx)))
            .with_deadline(deadline.map(Instant::into_std)),
    );
    let inner = match sent {
        Ok(()) => Inner::Waiting {
            rx,
            deadline,
            sleep: None,
        },
        Err(e) => Inner::Failed(Some(RequestError::Send(e))),
    };
    ReplyFuture { inner }
}

/// The future of [`request_reply`]: resolves to the reply or a [`RequestError`].
///
/// It is `Send`, `'static` and `Unpin`: spawn it, select on it, or drop it to give up.
#[must_use = "a reply future does nothing unless awaited; dropping it gives up the request"]
pub struct ReplyFuture<Rep> {
    inner: Inner<Rep>,
}

enum Inner<Rep> {
    Failed(Option<RequestError>),
    Waiting {
        rx: oneshot::Receiver<Answer<Rep>>,
        deadline: Option<Instant>,
        /// Made at the first poll that must wait, so that building the future needs no
        /// runtime.
        sleep: Option<Pin<Box<Sleep>>>,
    },
}

impl<Rep> Future for ReplyFuture<Rep> {
    type Output = Result<Rep, RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Failed(e) => Poll::Ready(Err(e.take().unwrap_or(RequestError::Dropped))),
            Inner::Waiting {
                rx,
                deadline,
                sleep,
            } => {
                // A reply that is there wins over a timeout that passed with it.
                if let Poll::Ready(answer) = Pin::new(rx).poll(cx) {
                    return Poll::Ready(answer.unwrap_or(Err(RequestError::Dropped)));
                }
                let Some(deadline) = *deadline else {
                    return Poll::Pending;
                };
                let sleep =
                    sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(RequestError::Timeout)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<Rep> fmt::Debug for ReplyFuture<Rep> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.inner {
            Inner::Failed(_) => "failed",
            Inner::Waiting { .. } => "waiting",
        };
        f.debug_struct("ReplyFuture")
            .field("state", &state)
            .finish()
    }
}
