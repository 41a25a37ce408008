//! What the thread pools share: a queue of ready agent queues and the worker threads that
//! serve it.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use super::BuildError;

/// The number of workers a builder asked for, or the available parallelism.
pub(crate) fn thread_count(requested: Option<usize>) -> Result<usize, BuildError> {
    let n = match requested {
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    if n == 0 {
        return Err(BuildError::InvalidParameter("threads must be at least 1"));
    }
    Ok(n)
}

enum Ready<Q> {
    Queue(Q),
    Stop,
}

/// Queues ready to be served; each is in it at most once (its owner keeps track).
pub(crate) struct ReadyQueue<Q> {
    tx: Sender<Ready<Q>>,
    rx: Receiver<Ready<Q>>,
}

impl<Q> ReadyQueue<Q> {
    pub(crate) fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        ReadyQueue { tx, rx }
    }

    pub(crate) fn push(&self, q: Q) {
        let _ = self.tx.send(Ready::Queue(q));
    }

    /// The next ready queue; `None` once the workers are told to stop.
    pub(crate) fn next(&self) -> Option<Q> {
        match self.rx.recv() {
            Ok(Ready::Queue(q)) => Some(q),
            Ok(Ready::Stop) | Err(_) => None,
        }
    }

    /// Whether another queue is waiting.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.rx.is_empty()
    }
}

/// The worker threads; dropping this stops and joins them (but the current thread, if the
/// last reference dies on a worker).
pub(crate) struct Workers<Q: Send + 'static> {
    ready: Arc<ReadyQueue<Q>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    count: usize,
}

impl<Q: Send + 'static> Workers<Q> {
    /// Starts `n` threads named `<name>-<i>`, each running `work(i)`.
    pub(crate) fn spawn<F>(
        name: &str,
        n: usize,
        ready: Arc<ReadyQueue<Q>>,
        work: F,
    ) -> Result<Self, BuildError>
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        let work = Arc::new(work);
        let workers = Workers {
            ready,
            handles: Mutex::new(Vec::with_capacity(n)),
            count: n,
        };
        for i in 0..n {
            let w = work.clone();
            let h = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || w(i))
                .map_err(BuildError::Spawn)?; // those started are stopped by Drop
            workers.handles.lock().push(h);
        }
        Ok(workers)
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

impl<Q: Send + 'static> Drop for Workers<Q> {
    fn drop(&mut self) {
        let handles = std::mem::take(&mut *self.handles.lock());
        for _ in &handles {
            let _ = self.ready.tx.send(Ready::Stop);
        }
        let me = std::thread::current().id();
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}
