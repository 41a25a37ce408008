//! An agent runs a future on a tokio runtime and gets its result as a message.
//!
//! The protocol that ties a future to its agent is in [`AgentAsyncExt`]'s docs.

use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use thiserror::Error;
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use super::handle::Verdict;
use super::FutureHandle;
use crate::agent::{Agent, Context};
use crate::coop::{CoopHandle, DeregReason, RegisterError};
use crate::mbox::send;

/// Agents running futures (feature `tokio`): implemented for [`Context`].
///
/// The agent's handlers stay synchronous: the future runs on a tokio runtime and its
/// output comes back as an ordinary message to the agent's direct mbox, handled by a
/// subscription in the agent's states like any other (a state with no handler for it
/// drops it, as it drops any message).
///
/// # How the future is tied to the agent
///
/// An agent lives as long as its coop, so the future is tied to the coop:
///
/// 1. `spawn_future` registers a child coop of the agent's coop holding one agent with no
///    subscriptions (the *watcher*), which owns the right to cancel the task.
/// 2. It spawns the task on the runtime: the future, then a send of its output to the
///    agent's direct mbox, then the watcher's coop is deregistered (also when the task is
///    dropped unfinished: cancelled, or its runtime shut down).
/// 3. When the agent's coop deregisters, its children go first: the watcher is dropped
///    and cancels the task, and tokio drops the future on its runtime.
///
/// Races: the watcher may be dropped before the task's cancel handle reaches it (the
/// coop deregistered during the spawn): the handle is then used at once. A future that
/// completes as the coop deregisters may still send its message; the agent's direct
/// mbox refuses it once the agent is gone, and such a send is ignored. An early cancel
/// by [`FutureHandle::abort`] that returned `true` is never followed by the message (see
/// [`FutureHandle`] for how).
pub trait AgentAsyncExt {
    /// Runs `future` on `runtime`; its output `M` is sent to this agent's direct mbox.
    ///
    /// The future is cancelled (dropped on its runtime, never polled again, no message)
    /// when the agent's coop deregisters; see the trait docs for how. Each call
    /// costs a spawned task and a small child coop (one agent without subscriptions).
    ///
    /// # Errors
    ///
    /// [`SpawnFutureError::NotRegistered`] before the agent's coop is registered (in
    /// `define`) and once it deregisters (in `on_finish`); [`SpawnFutureError::Register`]
    /// when the environment refuses the watcher coop (it is stopping). The future is
    /// dropped unpolled then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use agentbox::prelude::*;
    /// use agentbox::tokio_interop::AgentAsyncExt;
    ///
    /// struct Fetched(u32);
    /// struct Fetcher { rt: tokio::runtime::Handle }
    /// impl Agent for Fetcher {
    ///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
    ///         ctx.subscribe_self().event(|_: &mut Self, ctx, f: &Fetched| {
    ///             assert_eq!(f.0, 7);
    ///             ctx.deregister_coop(DeregReason::Normal);
    ///         })?;
    ///         Ok(())
    ///     }
    ///     fn on_start(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.spawn_future(&self.rt, async {
    ///             tokio::time::sleep(Duration::from_millis(5)).await;
    ///             Fetched(7)
    ///         }).unwrap();
    ///     }
    /// }
    ///
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let handle = rt.handle().clone();
    /// Environment::launch(|env| {
    ///     // A thread drives the runtime until the environment has finished.
    ///     let finished = env.finished();
    ///     std::thread::spawn(move || rt.block_on(finished));
    ///     env.introduce_coop(|c| { c.add_agent(Fetcher { rt: handle }); }).unwrap();
    /// }).unwrap(); // autoshutdown: returns once the fetcher's coop is gone
    /// ```
    fn spawn_future<M, F>(
        &mut self,
        runtime: &Handle,
        future: F,
    ) -> Result<FutureHandle, SpawnFutureError>
    where
        F: Future<Output = M> + Send + 'static,
        M: Send + Sync + 'static;
}

/// Why [`AgentAsyncExt::spawn_future`] did not start the future.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SpawnFutureError {
    /// The agent's coop is not registered: not yet (the call came from `define`), or no
    /// longer (it is deregistering).
    #[error("the agent's coop is not registered")]
    NotRegistered,
    /// The watcher coop could not be registered (the environment is stopping, or the
    /// agent's coop began deregistering during the call).
    #[error("the watcher coop could not be registered: {0}")]
    Register(#[from] RegisterError),
}

impl<A: Agent> AgentAsyncExt for Context<A> {
    fn spawn_future<M, F>(
        &mut self,
        runtime: &Handle,
        future: F,
    ) -> Result<FutureHandle, SpawnFutureError>
    where
        F: Future<Output = M> + Send + 'static,
        M: Send + Sync + 'static,
    {
        let parent = self
            .coop()
            .filter(CoopHandle::is_registered)
            .ok_or(SpawnFutureError::NotRegistered)?;
        let link = Arc::new(Link::default());
        let env = self.environment().clone();
        let mut coop = env.make_child_coop(&parent);
        coop.add_agent(Watcher(link.clone()));
        // Step 1.
        let watcher = env.register_coop(coop)?;
        // Step 2.
        let to = self.direct_mbox();
        let ends_watcher = DeregOnDrop(watcher.clone());
        let verdict = Arc::new(Verdict::default());
        let task = runtime.spawn({
            let verdict = verdict.clone();
            async move {
                let _ends_watcher = ends_watcher;
                let message = future.await;
                // An abort that came while the future was being polled wins (see
                // `FutureHandle`); the agent may be gone (see the races above).
                if verdict.claim_send() {
                    let _ = send(&to, message);
                }
            }
        });
        let abort = task.abort_handle();
        link.attach(abort.clone());
        Ok(FutureHandle::new(abort, Some(watcher), verdict))
    }
}

/// The right to cancel one task, shared by the watcher and the spawner.
#[derive(Default)]
struct Link {
    /// (the watcher is gone, the task's cancel handle).
    slot: Mutex<(bool, Option<AbortHandle>)>,
}

impl Link {
    fn attach(&self, abort: AbortHandle) {
        let mut slot = self.slot.lock();
        if slot.0 {
            drop(slot);
            abort.abort();
        } else {
            slot.1 = Some(abort);
        }
    }

    fn cancel(&self) {
        let abort = {
            let mut slot = self.slot.lock();
            slot.0 = true;
            slot.1.take()
        };
        if let Some(a) = abort {
            a.abort();
        }
    }
}

/// The agent of the watcher coop (step 1): no subscriptions; its drop cancels the task.
struct Watcher(Arc<Link>);

impl Agent for Watcher {}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Deregisters the watcher coop however the task ends (step 2).
struct DeregOnDrop(CoopHandle);

impl Drop for DeregOnDrop {
    fn drop(&mut self) {
        self.0.deregister(DeregReason::Normal);
    }
}
