//! Synchronous request/reply: a caller blocks until an agent answers.
//!
//! [`request_reply`] sends a [`Request<Req, Rep>`] to an mbox and blocks the calling thread
//! until one of:
//!
//! 1. a handler calls [`Request::reply`]: the value is returned;
//! 2. the timeout passes: [`RequestError::Timeout`];
//! 3. every copy of the request is dropped with no reply (nobody subscribed, a filter or
//!    a limit refused it, the handler returned without replying, the agent deregistered):
//!    [`RequestError::Dropped`], at once rather than at the timeout.
//!
//! Only the first reply counts; a second one is [`ReplyError::AlreadyReplied`].
//!
//! # Replying later, or from another agent
//!
//! A handler need not answer before it returns:
//!
//! - [`Request::take_reply_handle`] moves the right to answer into a [`ReplyHandle`], which
//!   can be kept (in the agent, in a timer's message) or sent to another agent, and answers
//!   with [`ReplyHandle::reply`];
//! - [`Request::forward`] hands the request itself to another mbox (a manager passing a
//!   client's request to a worker): the agent there answers it as if it had been sent to
//!   it directly.
//!
//! Rule 3 still holds: when the last holder of the right to answer (request copies, reply
//! handle) is dropped unanswered, the caller gets [`RequestError::Dropped`] at once.
//!
//! # A request the calling thread would have to answer
//!
//! A handler that asks an agent whose demands only its own thread can run (itself, an agent
//! on the same `one_thread`, `active_group`, `active_obj` or priority dispatcher thread, an
//! agent in the same `thread_pool` queue, or any agent of a pool with no other free worker:
//! one thread running, or every other one waiting in a request of its own) would wait for
//! an answer that can only come after it returns. [`request_reply`] sees this before it
//! sends and returns [`RequestError::WouldDeadlock`] at once, with nothing sent: it checks
//! that every receiver of the request at `to` is such an agent (through bindings to other
//! mboxes too). It cannot see through a custom mbox, an mchain or an `adv_thread_pool`
//! (whose thread-safe handlers may run beside the caller): there, such a call ends at
//! its timeout.
//!
//! A request from a worker of a pool (`thread_pool`, elastic or not) to an agent of
//! another queue of the same pool is answered when the pool runs a thread besides the
//! caller and every other worker so waiting, whatever the pool's minimum: while the caller
//! waits, the pool keeps that many threads running (a harmonizer's count included), and
//! lets the rest go only once the wait ends.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::request::{request_reply, Request, RequestError};
//!
//! struct Squarer;
//! impl Agent for Squarer {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         let service = ctx.environment().named_mbox("squarer");
//!         ctx.subscribe(&service).event(|_: &mut Self, _, r: &Request<u64, u64>| {
//!             r.reply(r.get() * r.get()).unwrap();
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Squarer); }).unwrap();
//!     let service = env.named_mbox("squarer");
//!     assert_eq!(request_reply::<u64, u64>(&service, Duration::from_secs(30), 7), Ok(49));
//!     // Nobody handles a `Request<u64, String>`: it fails fast.
//!     assert_eq!(
//!         request_reply::<u64, String>(&service, Duration::from_secs(30), 7),
//!         Err(RequestError::Dropped)
//!     );
//!     env.stop();
//! }).unwrap();
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use parking_lot::Mutex;
use thiserror::Error;

use crate::mbox::{Mbox, SendError};

/// A request carrying `Req` and waiting for one `Rep`; the message type agents subscribe to.
pub struct Request<Req, Rep> {
    request: Req,
    reply_to: Mutex<Option<ReplyTo<Rep>>>,
    /// When the caller stops waiting ([`request_reply`]'s timeout; `None`: never, or not
    /// known). The bridge frees a remote request's answer id then, and passes on nothing
    /// later.
    deadline: Option<Instant>,
}

/// Where a reply goes: the waiting caller's channel, or (a request that came from another
/// node through the bridge) an event back to the caller's node.
enum ReplyTo<Rep> {
    Local(Sender<Result<Rep, RequestError>>),
    Remote(Box<dyn RemoteReply<Rep>>),
}

impl<Rep> ReplyTo<Rep> {
    fn send(self, reply: Rep) -> Result<(), ReplyError> {
        match self {
            ReplyTo::Local(tx) => tx.send(Ok(reply)).map_err(|_| ReplyError::RequesterGone),
            ReplyTo::Remote(r) => r.reply(reply),
        }
    }
}

/// The way back of a request whose caller is not a thread blocked in [`request_reply`]: a
/// request that came from another node (`crate::bridge`), or (hook of feature `tokio`) an
/// async caller waiting on a oneshot channel (`crate::tokio_interop`). Dropped
/// unanswered, it tells the caller at once. Requests answered through it cost what they
/// cost before: a blocking caller never goes through this trait.
pub(crate) trait RemoteReply<Rep>: Send {
    fn reply(self: Box<Self>, reply: Rep) -> Result<(), ReplyError>;

    /// Fails the caller with `error` ([`ReplyHandle::fail`]); by default the caller learns
    /// only that the request was dropped.
    fn fail(self: Box<Self>, error: RequestError) {
        let _ = error;
    }
}

impl<Req, Rep> Request<Req, Rep> {
    /// A request whose answer goes back over the bridge (or, feature `tokio`, to an async
    /// caller).
    pub(crate) fn remote(request: Req, reply_to: Box<dyn RemoteReply<Rep>>) -> Self {
        Request {
            request,
            reply_to: Mutex::new(Some(ReplyTo::Remote(reply_to))),
            deadline: None,
        }
    }

    /// The same request, with the instant its caller stops waiting (a bridge frees the
    /// request's answer id then, and drops a later answer).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// When the caller stops waiting, if known.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

impl<Req, Rep> Request<Req, Rep> {
    /// The request's payload.
    pub fn get(&self) -> &Req {
        &self.request
    }

    /// Answers the request.
    ///
    /// # Errors
    ///
    /// [`ReplyError::AlreadyReplied`] for a second reply; [`ReplyError::RequesterGone`]
    /// when the caller stopped waiting (timed out).
    pub fn reply(&self, reply: Rep) -> Result<(), ReplyError> {
        let to = self
            .reply_to
            .lock()
            .take()
            .ok_or(ReplyError::AlreadyReplied)?;
        to.send(reply)
    }

    /// Whether a reply was given already (or the right to give it was taken away by
    /// [`take_reply_handle`](Self::take_reply_handle) or [`forward`](Self::forward)).
    pub fn is_replied(&self) -> bool {
        self.reply_to.lock().is_none()
    }

    /// Takes the right to answer out of the request, to answer later or elsewhere.
    ///
    /// # Errors
    ///
    /// [`ReplyError::AlreadyReplied`] if the request was answered, or its handle taken,
    /// already.
    pub fn take_reply_handle(&self) -> Result<ReplyHandle<Rep>, ReplyError> {
        let to = self
            .reply_to
            .lock()
            .take()
            .ok_or(ReplyError::AlreadyReplied)?;
        Ok(ReplyHandle { to })
    }

    /// Sends the request on to `to` with the right to answer it: whoever handles it there
    /// answers the original caller. This request then counts as answered here.
    ///
    /// # Errors
    ///
    /// [`ForwardError::AlreadyReplied`]; [`ForwardError::Send`] if `to` refuses it (the
    /// caller then gets [`RequestError::Dropped`]).
    pub fn forward(&self, to: &Mbox) -> Result<(), ForwardError>
    where
        Req: Clone + Send + Sync + 'static,
        Rep: Send + 'static,
    {
        let handle = self
            .take_reply_handle()
            .map_err(|_| ForwardError::AlreadyReplied)?;
        to.send(Request {
            request: self.request.clone(),
            reply_to: Mutex::new(Some(handle.to)),
            deadline: self.deadline,
        })
        .map_err(ForwardError::Send)
    }
}

/// The right to answer one request, taken out of it with
/// [`Request::take_reply_handle`]: keep it, send it to another agent, answer with
/// [`reply`](Self::reply). Dropping it unanswered fails the caller with
/// [`RequestError::Dropped`] at once.
pub struct ReplyHandle<Rep> {
    to: ReplyTo<Rep>,
}

impl<Rep> ReplyHandle<Rep> {
    /// Answers the request.
    ///
    /// # Errors
    ///
    /// [`ReplyError::RequesterGone`] when the caller stopped waiting (timed out).
    pub fn reply(self, reply: Rep) -> Result<(), ReplyError> {
        self.to.send(reply)
    }

    /// Fails the caller with `error` at once (the bridge: the request could not reach its
    /// node, or the node was lost).
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn fail(self, error: RequestError) {
        match self.to {
            ReplyTo::Local(tx) => {
                let _ = tx.send(Err(error));
            }
            ReplyTo::Remote(r) => r.fail(error),
        }
    }
}

impl<Rep> fmt::Debug for ReplyHandle<Rep> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyHandle").finish_non_exhaustive()
    }
}

/// Why [`Request::forward`] failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardError {
    /// The request has been answered (or its handle taken) already.
    #[error("the request has been answered already")]
    AlreadyReplied,
    /// The mbox refused the forwarded request.
    #[error(transparent)]
    Send(SendError),
}

impl<Req: fmt::Debug, Rep> fmt::Debug for Request<Req, Rep> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("request", &self.request)
            .field("replied", &self.is_replied())
            .finish()
    }
}

/// Why [`request_reply`] returned no value.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// No reply within the timeout.
    #[error("no reply within the timeout")]
    Timeout,
    /// The request was dropped without a reply.
    #[error("the request was dropped without a reply")]
    Dropped,
    /// The mbox refused the request.
    #[error(transparent)]
    Send(#[from] SendError),
    /// The request went to another node (through a `bridge::RemoteMbox`) and nothing
    /// there has the id it was sent to. (A request dropped unanswered there is
    /// [`Dropped`](Self::Dropped), as here.)
    #[error("nothing on the other node has the request's id")]
    Undelivered,
    /// The request went to another node, and the session to that node ended before the
    /// answer came (the node stopped or could not be reached).
    #[error("node {node} was disconnected before it answered")]
    NodeDisconnected {
        /// The node.
        node: u32,
    },
    /// Every receiver of the request is an agent that only the calling thread can run, and
    /// it is busy waiting: nothing was sent (see the module docs).
    #[error("the request to {mbox} could only be answered by the thread that waits for it")]
    WouldDeadlock {
        /// The mbox the request was for.
        mbox: String,
    },
}

/// Why [`Request::reply`] failed.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// The request has been answered already.
    #[error("the request has been answered already")]
    AlreadyReplied,
    /// The caller no longer waits for the reply.
    #[error("the requester no longer waits for the reply")]
    RequesterGone,
}

/// Sends `request` to `to` and waits up to `timeout` for the reply (see the module docs).
///
/// # Errors
///
/// [`RequestError::Timeout`], [`RequestError::Dropped`] and [`RequestError::Send`] as the
/// module docs say; [`RequestError::WouldDeadlock`] when only the calling thread could
/// answer (nothing is sent then).
pub fn request_reply<Req, Rep>(
    to: &Mbox,
    timeout: Duration,
    request: Req,
) -> Result<Rep, RequestError>
where
    Req: Send + Sync + 'static,
    Rep: Send + 'static,
{
    crate::dispatcher::BlockedWorker::before_check();
    if to.only_blocked_receivers(std::any::TypeId::of::<Request<Req, Rep>>(), 0) {
        return Err(RequestError::WouldDeadlock { mbox: to.name() });
    }
    // On a pool's worker asking an agent of its own pool: counted as waiting until the
    // answer, so that the pool keeps a thread to answer it; refused if none is free.
    let Some(_waiting) = crate::dispatcher::BlockedWorker::enter() else {
        return Err(RequestError::WouldDeadlock { mbox: to.name() });
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    // One deadline for the wait and for the request (the bridge frees a remote request's
    // answer id at it): a timeout too long for an `Instant` never comes.
    let deadline = crate::timer::deadline_after(Instant::now(), timeout);
    to.send(Request {
        request,
        reply_to: Mutex::new(Some(ReplyTo::Local(tx))),
        deadline,
    })?;
    let got = match deadline {
        Some(d) => rx.recv_deadline(d),
        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
    };
    match got {
        Ok(reply) => reply,
        Err(RecvTimeoutError::Timeout) => Err(RequestError::Timeout),
        Err(RecvTimeoutError::Disconnected) => Err(RequestError::Dropped),
    }
}
