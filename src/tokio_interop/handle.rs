//! The handle of a future started by an agent or an actor.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::task::AbortHandle;

use crate::coop::{CoopHandle, DeregReason};

/// A future started by [`AgentAsyncExt::spawn_future`](super::AgentAsyncExt::spawn_future)
/// or [`ActorAsyncExt::spawn_future`](super::ActorAsyncExt::spawn_future): lets its owner
/// cancel it early.
///
/// Dropping the handle does not cancel the future (the agent's or actor's end does).
///
/// # How the result and an abort are ordered
///
/// The task and [`abort`](Self::abort) race for one flag (shared by the task and the handle):
///
/// 1. The task, once the future has returned its output, claims the flag and sends the
///    output only if it got it first.
/// 2. `abort` claims the flag, then cancels the task.
///
/// Races: `abort` may be called while the future is being polled on a runtime thread
/// (tokio's own cancel cannot stop a poll under way, and the poll may return the
/// output): the task then finds the flag taken and drops the output. So once `abort`
/// has returned `true`, the result never comes, whatever the runtime is doing.
pub struct FutureHandle {
    abort: AbortHandle,
    /// An agent's future: the child coop that ties it to the agent's coop.
    watcher: Option<CoopHandle>,
    verdict: Arc<Verdict>,
}

/// Who decided the fate of a future's output first: its task (sent) or an abort (never
/// sent). Shared by the task and its [`FutureHandle`].
///
/// | value | meaning |
/// |-------|---------|
/// | 0 | open: the future runs, nobody decided |
/// | 1 | sent: the task took the output to send it |
/// | 2 | aborted: the output, if it ever comes, is dropped |
#[derive(Default)]
pub(super) struct Verdict(AtomicU8);

const OPEN: u8 = 0;
const SENT: u8 = 1;
const ABORTED: u8 = 2;

impl Verdict {
    /// The task's claim: `true` if the output may be sent (no abort came first).
    pub(super) fn claim_send(&self) -> bool {
        self.0
            .compare_exchange(OPEN, SENT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// An abort's claim: `true` if the output will never be sent.
    fn claim_abort(&self) -> bool {
        match self
            .0
            .compare_exchange(OPEN, ABORTED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now == ABORTED,
        }
    }
}

impl FutureHandle {
    pub(super) fn new(
        abort: AbortHandle,
        watcher: Option<CoopHandle>,
        verdict: Arc<Verdict>,
    ) -> Self {
        FutureHandle {
            abort,
            watcher,
            verdict,
        }
    }

    /// Cancels the future: it is dropped (on its runtime) without being polled again,
    /// and its result never comes, even when the future is being polled at this moment
    /// and returns its output.
    ///
    /// Returns `true` when the result will never come (this call or an earlier one
    /// cancelled it, or the future was dropped unfinished with its agent, actor or
    /// runtime); `false` when the future had finished and its result was sent before
    /// this call (the message may still be on its way, as any message already sent).
    pub fn abort(&self) -> bool {
        let never = self.verdict.claim_abort();
        self.abort.abort();
        if let Some(w) = &self.watcher {
            w.deregister(DeregReason::Normal);
        }
        never
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
