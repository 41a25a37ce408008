//! What the thread pools share: a queue of ready agent queues and the worker threads that
//! serve it (their number may change while the pool runs: `dispatcher::elastic`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use parking_lot::Mutex;

use super::elastic::{ThreadCtl, ThreadLimits};
use super::idle::{spin_threshold_or_default, Spin};
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

/// A pool's thread control and its workers' spin threshold: elastic within `limits`
/// (the builder's spin threshold, if it set one, replaces theirs), or fixed at `threads`
/// (the builder's spin threshold, or the serial workers' default).
pub(crate) fn pool_threads(
    name: &str,
    limits: Option<ThreadLimits>,
    threads: usize,
    spin: Option<Duration>,
) -> (Arc<ThreadCtl>, Duration) {
    match limits {
        Some(mut l) => {
            if let Some(s) = spin {
                l.spin_threshold = s;
            }
            let s = l.spin_threshold;
            (ThreadCtl::elastic(name, l), s)
        }
        None => (
            ThreadCtl::fixed(name, threads),
            spin_threshold_or_default(spin),
        ),
    }
}

/// The `spin_threshold` setter of the thread pools' builders (a `spin: Option<Duration>`
/// field, read by [`pool_threads`]).
macro_rules! pool_spin_threshold_method {
    () => {
        /// How long an idle worker thread spins, watching the pool's ready queues, before
        /// it blocks (default: 20 µs for a fixed pool; an elastic pool's
        /// [`ThreadLimits::spin_threshold`](crate::dispatcher::elastic::ThreadLimits),
        /// 100 µs by default, which this replaces).
        ///
        /// A queue made ready while a worker spins is taken with no wake-up (no unpark
        /// syscall for the sender, no scheduler latency for the worker). A spinning worker
        /// is not counted as waiting by the channel the workers block in, so a sender still
        /// wakes a blocked worker when there is one; whichever worker comes first serves
        /// the queue, and the other waits again. `Duration::ZERO` blocks at once. A worker
        /// that finds itself preempted while it spins (more runnable threads than cores)
        /// spins less until its spins pay off again. Spinning counts as busy time in an
        /// elastic pool's figures, as in YDB's.
        pub fn spin_threshold(mut self, spin: std::time::Duration) -> Self {
            self.spin = Some(spin);
            self
        }
    };
}
pub(crate) use pool_spin_threshold_method;

/// The size setters of a thread pool's builder with `threads: Option<usize>` and
/// `limits: Option<ThreadLimits>` fields (`thread_pool`, `adv_thread_pool`): a fixed count,
/// or elastic bounds a harmonizer may move the count within. `$example` is the doc example
/// of `thread_limits` for the kind, `$limits` the doc line of `limits`.
macro_rules! pool_size_methods {
    (example: $example:literal, limits: $limits:literal) => {
        /// Number of worker threads (default: `std::thread::available_parallelism`); a fixed
        /// count (clears [`thread_limits`](Self::thread_limits)).
        pub fn threads(mut self, n: usize) -> Self {
            self.threads = Some(n);
            self.limits = None;
            self
        }

        /// Makes the pool elastic with these thread bounds (see
        /// [`ThreadLimits::new`](crate::dispatcher::elastic::ThreadLimits::new) for the
        /// clamping): it starts `default` threads, measures them, and its
        /// [`DispatcherHandle::elastic`](crate::dispatcher::DispatcherHandle::elastic) lets a
        /// harmonizer change the count within `[min, max]` while it runs.
        ///
        /// # Examples
        ///
        #[doc = $example]
        pub fn thread_limits(self, min: usize, default: usize, max: usize) -> Self {
            self.limits($crate::dispatcher::elastic::ThreadLimits::new(
                min, default, max,
            ))
        }

        #[doc = $limits]
        pub fn limits(mut self, limits: $crate::dispatcher::elastic::ThreadLimits) -> Self {
            self.limits = Some(limits.normalized());
            self
        }
    };
}
pub(crate) use pool_size_methods;

/// The longest a measured worker parks: then it asks for work again (brings its figures
/// up to date and runs the tick, so that a harmonizer runs even when every thread idles).
pub(crate) const IDLE_WAKE: Duration = Duration::from_secs(1);

/// What a worker takes from the ready queue. Two variants, so that it is one word (the
/// queue's pointer, its niche the signal): the channel's slots stay as small as before
/// elastic pools came.
enum Item<Q> {
    /// A queue to serve.
    Queue(Q),
    /// Look at the pool's state: it stops ([`ReadyQueue::is_stopping`]), or it shrank and
    /// a thread above the count should stop (whichever takes this checks).
    Signal,
}

/// What a measured worker gets.
pub(crate) enum Ready<Q> {
    /// A queue to serve.
    Queue(Q),
    /// A signal (or a timeout) while the pool runs: check the count.
    Wake,
    /// The pool stops.
    Stop,
}

/// Queues ready to be served; each is in it at most once (its owner keeps track).
pub(crate) struct ReadyQueue<Q> {
    tx: Sender<Item<Q>>,
    rx: Receiver<Item<Q>>,
    stopping: AtomicBool,
    /// How long an idle worker of a fixed pool spins before it blocks.
    spin: Duration,
}

impl<Q> ReadyQueue<Q> {
    /// A queue whose idle workers (of a fixed pool: see [`next`](Self::next)) spin up to
    /// `spin` before they block.
    pub(crate) fn new(spin: Duration) -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        ReadyQueue {
            tx,
            rx,
            stopping: AtomicBool::new(false),
            spin,
        }
    }

    /// A worker's spin budget, for [`next`](Self::next).
    pub(crate) fn spinner(&self) -> Spin {
        Spin::new(self.spin)
    }

    pub(crate) fn push(&self, q: Q) {
        let _ = self.tx.send(Item::Queue(q));
    }

    /// The next ready queue; `None` once the workers are told to stop. For pools of a
    /// fixed size (they are sent a signal only to stop).
    ///
    /// With nothing ready, the worker spins with `spin`'s budget (watching the channel's
    /// length, a load of its two ends) before it blocks in the channel: a queue made ready
    /// within that time is taken with no wake-up. A spinner is not registered with the
    /// channel, so a producer still wakes a blocked worker if there is one (the channel's
    /// protocol, unchanged: no lost wake-up); whichever takes the queue first serves it.
    ///
    /// Not inlined: so the channel's `recv` is inlined here, as it was before the worker
    /// loops grew the elastic branch (callgrind: ~70 instructions more per call when
    /// `recv` stayed out of line in a bigger caller).
    #[inline(never)]
    pub(crate) fn next(&self, spin: &mut Spin) -> Option<Q> {
        if self.rx.is_empty() {
            // Whether it found something or not, `recv` takes it or blocks.
            spin.spin_until(|| !self.rx.is_empty());
        }
        match self.rx.recv() {
            Ok(Item::Queue(q)) => Some(q),
            Ok(Item::Signal) if !self.is_stopping() => self.next_after_wake(),
            Ok(Item::Signal) | Err(_) => None,
        }
    }

    /// `next` after a stray wake-up (kept out of `next`'s hot path; `recv` is called
    /// from `next` alone, so that it is inlined there as before elastic pools came).
    #[cold]
    #[inline(never)]
    fn next_after_wake(&self) -> Option<Q> {
        loop {
            match self.recv_within(IDLE_WAKE) {
                Ok(Item::Queue(q)) => return Some(q),
                Ok(Item::Signal) if !self.is_stopping() => {}
                Err(RecvTimeoutError::Timeout) => {}
                Ok(Item::Signal) | Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// `recv_timeout` through a `Select`: the channel's own blocking `recv` then has one
    /// caller, `next`, and stays inlined there (a second caller made it out of line and
    /// cost the fixed pools' loop ~70 instructions per queue taken; callgrind).
    fn recv_within(&self, timeout: Duration) -> Result<Item<Q>, RecvTimeoutError> {
        let mut sel = crossbeam_channel::Select::new();
        sel.recv(&self.rx);
        match sel.select_timeout(timeout) {
            Ok(op) => op
                .recv(&self.rx)
                .map_err(|_| RecvTimeoutError::Disconnected),
            Err(_) => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Whether the pool stops.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    fn ready(&self, item: Result<Item<Q>, ()>) -> Ready<Q> {
        match item {
            Ok(Item::Queue(q)) => Ready::Queue(q),
            Ok(Item::Signal) if !self.is_stopping() => Ready::Wake,
            Ok(Item::Signal) | Err(()) => Ready::Stop,
        }
    }

    /// The next item if one is there now.
    pub(crate) fn try_next(&self) -> Option<Ready<Q>> {
        match self.rx.try_recv() {
            Ok(r) => Some(self.ready(Ok(r))),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Ready::Stop),
        }
    }

    /// The next item, waiting at most `timeout` (at most [`IDLE_WAKE`] if `None`);
    /// `Wake` on timeout.
    pub(crate) fn next_within(&self, timeout: Option<Duration>) -> Ready<Q> {
        match self.recv_within(timeout.unwrap_or(IDLE_WAKE)) {
            Ok(r) => self.ready(Ok(r)),
            Err(RecvTimeoutError::Timeout) => Ready::Wake,
            Err(RecvTimeoutError::Disconnected) => Ready::Stop,
        }
    }

    /// A ready queue for a thread of another pool, if one is there now: a signal is
    /// meant for the pool's own threads and goes back.
    pub(crate) fn take_for_foreign(&self) -> Option<Q> {
        match self.rx.try_recv() {
            Ok(Item::Queue(q)) => Some(q),
            Ok(Item::Signal) => {
                let _ = self.tx.send(Item::Signal);
                None
            }
            Err(_) => None,
        }
    }

    /// Sends `n` signals (a shrink, or a nudge).
    pub(crate) fn wake(&self, n: usize) {
        for _ in 0..n {
            let _ = self.tx.send(Item::Signal);
        }
    }

    /// Whether another queue is waiting.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Items waiting (queues, and wake-ups not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.rx.len()
    }
}

type Work = Arc<dyn Fn(usize) + Send + Sync>;

/// The threads and what starts more of them. Its lock also orders a thread's retirement
/// against the start of another in its slot.
struct Spawner {
    name: String,
    work: Work,
    handles: Vec<JoinHandle<()>>,
    /// The pool is stopping: no more threads.
    closed: bool,
}

/// The worker threads; dropping this stops and joins them (but the current thread, if the
/// last reference dies on a worker).
pub(crate) struct Workers<Q: Send + 'static> {
    ready: Arc<ReadyQueue<Q>>,
    ctl: Arc<ThreadCtl>,
    spawner: Arc<Mutex<Spawner>>,
}

impl<Q: Send + 'static> Workers<Q> {
    /// Starts `ctl`'s default count of threads named `<name>-<slot>`, each running
    /// `work(slot)`.
    pub(crate) fn spawn<F>(
        name: &str,
        ctl: Arc<ThreadCtl>,
        ready: Arc<ReadyQueue<Q>>,
        work: F,
    ) -> Result<Self, BuildError>
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        let n = ctl.target();
        let workers = Workers {
            ready,
            ctl,
            spawner: Arc::new(Mutex::new(Spawner {
                name: name.to_owned(),
                work: Arc::new(work),
                handles: Vec::with_capacity(n),
                closed: false,
            })),
        };
        let mut sp = workers.spawner.lock();
        for _ in 0..n {
            // Those started are stopped by Drop.
            start_one(&mut sp, &workers.ctl)?;
        }
        drop(sp);
        Ok(workers)
    }

    /// Threads running now.
    pub(crate) fn count(&self) -> usize {
        self.ctl.live()
    }

    /// Asks for `n` threads (already clamped): starts the missing ones now, or wakes the
    /// surplus so that it stops when it next asks for work.
    pub(crate) fn set_count(&self, n: usize) -> Result<(), BuildError> {
        let mut sp = self.spawner.lock();
        if sp.closed {
            return Ok(());
        }
        let live = self.ctl.retarget(n);
        if n > live {
            sp.handles.retain(|h| !h.is_finished());
            for _ in live..n {
                start_one(&mut sp, &self.ctl)?;
            }
        } else if n < live {
            drop(sp);
            self.ready.wake(live - n);
        }
        Ok(())
    }
}

/// Starts a thread in a free slot.
fn start_one(sp: &mut Spawner, ctl: &Arc<ThreadCtl>) -> Result<(), BuildError> {
    let Some(slot) = ctl.occupy_free_slot() else {
        return Ok(());
    };
    let w = sp.work.clone();
    match std::thread::Builder::new()
        .name(format!("{}-{slot}", sp.name))
        .spawn(move || w(slot))
    {
        Ok(h) => {
            sp.handles.push(h);
            Ok(())
        }
        Err(e) => {
            ctl.free_slot(slot);
            Err(BuildError::Spawn(e))
        }
    }
}

impl<Q: Send + 'static> Drop for Workers<Q> {
    fn drop(&mut self) {
        let handles = {
            let mut sp = self.spawner.lock();
            sp.closed = true;
            std::mem::take(&mut sp.handles)
        };
        self.ready.stopping.store(true, Ordering::Release);
        self.ready.wake(handles.len());
        let me = std::thread::current().id();
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}
