//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod suite;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// A shared, ordered log of what agents did.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn new() -> Self {
        Log::default()
    }
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().push(s.into());
    }
    pub fn get(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }
}

/// Generous bound for anything that should finish at once: the machine is shared and slow.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread and fails the test (instead of hanging CI) if it does not
/// return within [`PATIENCE`].
pub fn within_patience<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(()) => t.join().expect("test body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {PATIENCE:?}"),
    }
}
