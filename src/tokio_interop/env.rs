//! The environment's end as a future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use crate::environment::{Environment, FinishHooks};

impl Environment {
    /// A future that resolves once the environment has finished (feature `tokio`): it
    /// was stopped (by [`stop`](Self::stop) or autoshutdown) and every coop is gone —
    /// what [`launch`](Self::launch) waits for before it returns. Already finished: it
    /// resolves at once.
    ///
    /// It holds no reference to the environment and needs no particular runtime. Dropping it before it resolves leaves nothing behind in the
    /// environment.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    ///
    /// let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
    /// let finished = wrapped.environment().finished();
    /// wrapped.environment().stop();
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// rt.block_on(finished);
    /// wrapped.stop_then_join().unwrap();
    /// ```
    pub fn finished(&self) -> EnvFinished {
        let (tx, rx) = oneshot::channel();
        let hook = self.on_finished(Box::new(move || {
            let _ = tx.send(());
        }));
        EnvFinished { rx, hook }
    }
}

/// The future of [`Environment::finished`].
#[must_use = "a future does nothing unless awaited"]
pub struct EnvFinished {
    rx: oneshot::Receiver<()>,
    /// The environment's hook that completes `rx` (its table and key), taken back on
    /// drop.
    hook: Option<(Arc<FinishHooks>, u64)>,
}

impl Drop for EnvFinished {
    fn drop(&mut self) {
        if let Some((hooks, key)) = self.hook.take() {
            hooks.cancel(key);
        }
    }
}

impl Future for EnvFinished {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A closed channel means the environment went without running its hooks, which
        // is also an end.
        Pin::new(&mut self.rx).poll(cx).map(|_| ())
    }
}

impl fmt::Debug for EnvFinished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvFinished").finish_non_exhaustive()
    }
}
