//! What the unit tests share.

use std::sync::mpsc;
use std::time::Duration;

/// Generous bound for anything that should finish at once: the machine may be shared and
/// slow.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread and fails the test if it does not return within
/// [`PATIENCE`]: a test that launches an environment would otherwise hang, not fail, when a
/// worker's stop or finish path breaks.
pub(crate) fn within_patience<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {PATIENCE:?}"),
    }
}
