//! The handle of a future started by an agent or an actor.

use std::fmt;

use tokio::task::AbortHandle;

use crate::coop::{CoopHandle, DeregReason};

/// A future started by [`AgentAsyncExt::spawn_future`](super::AgentAsyncExt::spawn_future)
/// or [`ActorAsyncExt::spawn_future`](super::ActorAsyncExt::spawn_future): lets its owner
/// cancel it early.
///
/// Dropping the handle does not cancel the future (the agent's or actor's end does).
pub struct FutureHandle {
    abort: AbortHandle,
    /// An agent's future: the child coop that ties it to the agent's coop.
    watcher: Option<CoopHandle>,
}

impl FutureHandle {
    pub(super) fn new(abort: AbortHandle, watcher: Option<CoopHandle>) -> Self {
        FutureHandle { abort, watcher }
    }

    /// Cancels the future: it is dropped (on its runtime) without being polled again,
    /// and its result message never comes. A future that has finished already is not
    /// affected (its message may be on its way).
    pub fn abort(&self) {
        self.abort.abort();
        if let Some(w) = &self.watcher {
            w.deregister(DeregReason::Normal);
        }
    }

    /// Whether the future has finished: completed (its message sent), cancelled, or
    /// dropped with its runtime.
    pub fn is_finished(&self) -> bool {
        self.abort.is_finished()
    }
}

impl fmt::Debug for FutureHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FutureHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
