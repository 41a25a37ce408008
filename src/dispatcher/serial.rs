//! A FIFO demand queue served by exactly one worker thread, with a worker-local fast path.
//!
//! Every single-threaded dispatcher serves its agents from one of these. A push made on the
//! serving thread itself (a handler sending to an agent of the same worker — the common
//! case of ping-pong and fan-out) goes to a thread-local `VecDeque` without any
//! synchronisation; pushes from other threads go through a crossbeam channel.
//!
//! # Ordering
//!
//! 1. The worker moves channel items into the local deque, at most a burst's worth at a
//!    time, before it runs anything from it.
//! 2. A local push first moves whatever is already in the channel into the deque, then
//!    appends. So the deque always holds demands in the order they were pushed: a demand
//!    pushed from another thread before a local push (for example the `on_start` demand of
//!    an agent registered from another thread, which a handler here then messages) runs
//!    before it.
//! 3. The worker runs the local deque in bursts (at most `BURST` demands) and looks at
//!    the channel between bursts, so a local ping-pong cannot starve senders on other
//!    threads.
//!
//! # Races
//!
//! An idle worker spins, then parks (see [`idle`](super::idle)): a push from another thread
//! announces itself to the worker's [`Idle`] before it enters the channel and unparks the
//! worker after, only if it saw it parked; a spinning worker sees the announcement by
//! itself. A push after the worker stopped is dropped with the channel (the agents it was
//! for are gone). A local push skips the channel only when the announced count says it
//! holds nothing (see [`SerialQueue::channel_may_hold`]); that handshake is checked by the
//! loom model `serial::loom_tests`, the park/wake handshake by `idle::loom_tests`, the
//! ordering rules by the dispatcher suite (`tests/common/suite.rs`) on every
//! single-threaded kind.

#![allow(unsafe_code)]

use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use super::activity::Activity;
use super::idle::{Idle, Spin};
use super::{AgentKey, AgentTable, Demand, EventQueue};
use crate::agent::AgentCore;
use crate::mbox::MboxId;
use crate::message::Message;

thread_local! {
    /// Address of the `SerialQueue` this thread serves; 0 when it serves none. A
    /// thread-local without a destructor is one load to reach.
    static SERVING: Cell<usize> = const { Cell::new(0) };
    /// Set when a stop was taken from the channel while draining.
    static STOP: Cell<bool> = const { Cell::new(false) };
}

/// The worker's local deque, in its queue: only the thread serving the queue reaches it.
///
/// It used to be a thread-local `RefCell`: the borrow flag's check, set and reset, and the
/// thread-local's address, cost ~10 instructions per push and per pop, and the borrow's
/// panic path kept the push out of line, in a frame of its own (ping-pong, callgrind). The
/// queue is at hand on both paths (`self`), and who may touch the deque is already known:
/// a push checks `SERVING` to choose between the deque and the channel.
///
/// # Safety
///
/// One thread reaches the deque: the one running [`SerialQueue::run`] (a queue is run by
/// exactly one thread, its `SerialWorker`'s), from `run` itself, from [`serve`], or from a
/// push that found `SERVING` equal to the queue's address, which only that thread sets.
/// No access nests in another: every closure given to [`SerialQueue::local`] moves
/// demands between the deque and the channel and runs no user code (dropping a demand
/// there only ever drops the worker's stop command, a static placeholder), so no handler
/// can push while the deque is borrowed. Checked under miri by `tests::*`.
///
/// [`serve`]: SerialQueue::serve
struct LocalDeque(UnsafeCell<VecDeque<Demand>>);

// SAFETY: the deque is reached by one thread only (see the type's docs); the other threads
// that hold the queue only read `SERVING`, their own thread-local, and use the channel.
unsafe impl Sync for LocalDeque {}

pub(crate) struct SerialQueue {
    /// Demands from other threads, and the stop command (`Demand::stop_worker`).
    tx: Sender<Demand>,
    rx: Receiver<Demand>,
    /// The worker's idle state, and the count of commands sent to the channel and not yet
    /// taken (see [`channel_may_hold`](Self::channel_may_hold)).
    idle: Idle,
    /// How long the idle worker spins before it parks.
    spin: Duration,
    /// Length of the worker's local deque when its current burst began (a plain store per
    /// burst, for stats only).
    round_len: Apart<StdAtomicUsize>,
    /// Present when the dispatcher tracks activity.
    pub(crate) activity: Apart<Option<Activity>>,
    /// The worker's table once it has stopped: counts what is pushed after.
    retired: Mutex<Option<AgentTable>>,
    /// Demands pushed on the worker itself, and those it took from the channel.
    local: Apart<LocalDeque>,
}

/// A field the worker alone writes, on a cache line of its own: producers' read-modify-
/// writes of `idle` would otherwise take the line from the worker at every send.
#[repr(align(128))]
pub(crate) struct Apart<T>(T);

impl<T> std::ops::Deref for Apart<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl SerialQueue {
    pub(crate) fn new(track: bool, spin: Duration) -> Arc<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        Arc::new(SerialQueue {
            tx,
            rx,
            idle: Idle::default(),
            spin,
            round_len: Apart(StdAtomicUsize::new(0)),
            activity: Apart(track.then(Activity::default)),
            retired: Mutex::new(None),
            local: Apart(LocalDeque(UnsafeCell::new(VecDeque::new()))),
        })
    }

    /// Runs `f` on the worker's local deque. Only on the worker (see [`LocalDeque`]); `f`
    /// runs no user code and never calls `local` again (directly or through another
    /// method): the `&mut` it gets must be the only one while it lives.
    #[inline(always)]
    fn local<R>(&self, f: impl FnOnce(&mut VecDeque<Demand>) -> R) -> R {
        // SAFETY: callers are on the thread that runs this queue (see `LocalDeque`), and
        // no access nests: `f` is one of this module's closures, which run no user code,
        // so the `&mut` is the only reference to the deque while it lives.
        f(unsafe { &mut *self.local.0 .0.get() })
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    /// Asks the worker to stop after the demand it is running.
    pub(crate) fn stop(&self) {
        self.send(Demand::stop_worker());
    }

    /// A push on the worker itself. The drain (rule 2) is out of line: a push that needs
    /// none is then small enough for the thread-local access to be inlined (a call and
    /// frame less per message, callgrind).
    #[inline(always)]
    fn push_local(&self, demand: Demand) {
        if self.channel_may_hold() {
            return self.push_local_after_drain(demand);
        }
        self.local(|q| q.push_back(demand));
    }

    /// [`push_local`](Self::push_local) when the channel may hold demands: they go first.
    #[cold]
    #[inline(never)]
    fn push_local_after_drain(&self, demand: Demand) {
        self.local(|q| {
            self.drain_into(q);
            q.push_back(demand);
        });
    }

    /// [`push_message`](EventQueue::push_message) on the worker itself: as
    /// [`push_local`](Self::push_local), with every step but the common one (no drain,
    /// room in the deque) out of line, each taking the demand's pieces in registers, so
    /// that the common one needs no stack frame (ping-pong, callgrind: 41 instructions
    /// per message before, of which 14 in the frame and its register moves).
    #[inline(always)]
    fn push_message_local(&self, key: AgentKey, mbox: MboxId, msg: Message) {
        if self.channel_may_hold() {
            return self.push_local_after_drain(Demand::message(key, mbox, msg));
        }
        // The check and the push are two accesses, not one with the growing push inside:
        // that one reaches the deque again, and two `&mut` to it at once are undefined
        // behaviour (miri, Stacked and Tree Borrows), even on one thread.
        if self.local(|q| q.len() == q.capacity()) {
            return self.push_local_growing(key, mbox, msg);
        }
        self.local(|q| q.push_back(Demand::message(key, mbox, msg)))
    }

    /// [`push_message_local`](Self::push_message_local) when the deque is full.
    #[cold]
    #[inline(never)]
    fn push_local_growing(&self, key: AgentKey, mbox: MboxId, msg: Message) {
        self.local(|q| q.push_back(Demand::message(key, mbox, msg)));
    }

    /// [`push_message`](EventQueue::push_message) from another thread. Out of line: the
    /// local push is the one the worker's own handlers make, and it is smaller without.
    #[inline(never)]
    fn send_message(&self, key: AgentKey, mbox: MboxId, msg: Message, agent: &AgentCore) {
        self.send(Demand::message(key, mbox, msg).inline_if_to(agent.mbox_id()));
    }

    /// Announces, sends, and unparks the worker if the announcement found it parked.
    fn send(&self, cmd: Demand) {
        let notice = self.idle.notify();
        // Err only once the worker is gone, and then the agents are gone too.
        let _ = self.tx.send(cmd);
        self.idle.published(notice);
    }

    fn received(&self) {
        self.idle.taken();
    }

    /// Demands waiting, roughly: in the channel plus the local deque as of the current burst.
    pub(crate) fn waiting(&self) -> usize {
        self.idle.pending() + self.round_len.load(StdOrdering::Relaxed)
    }

    /// Whether the channel may hold a command: some were announced and not yet taken.
    ///
    /// Senders announce *before* they send, the worker counts a command taken *after* it
    /// receives it. A local push (on the worker itself) that reads `false` knows that every
    /// remote push that happened before it has been taken already — that push announced
    /// itself first, and only the worker lowers the count, after taking it — so the local
    /// push may skip the channel and keep FIFO order (ordering rule 2). One plain load
    /// instead of `Receiver::is_empty`, which cost 44 instructions per call in the profile.
    ///
    /// Races: a remote push concurrent with (not before) the local push may be counted or
    /// not; either order is a valid FIFO order for two concurrent pushes. Checked by the
    /// loom model `serial::loom_tests` and by the ordering tests of the dispatcher suite.
    #[inline]
    fn channel_may_hold(&self) -> bool {
        self.idle.has_pending()
    }

    /// Moves everything the channel holds to the back of `q`; notes a stop.
    fn drain_into(&self, q: &mut VecDeque<Demand>) {
        self.drain_some_into(q, usize::MAX);
    }

    /// Moves at most `max` demands from the channel to the back of `q`; notes a stop.
    fn drain_some_into(&self, q: &mut VecDeque<Demand>, max: usize) {
        for _ in 0..max {
            let Ok(d) = self.rx.try_recv() else {
                return;
            };
            self.received();
            if d.is_stop_worker() {
                STOP.set(true);
                return;
            }
            q.push_back(d);
        }
    }

    /// The worker loop; returns when [`stop`](Self::stop) is called.
    ///
    /// The demands run under one `catch_unwind` for as long as nothing panics: a panic
    /// that escapes a demand (a payload's `Drop`; see `dispatcher::unwind`) is reported by
    /// the table, and the loop resumes where it was (its state is in the deque and the
    /// channel), so the worker keeps serving.
    ///
    /// When it stops, what is still queued — in the deque, in the channel, and whatever a
    /// sender that saw its agent alive pushes later (see the queue's `Drop`) — is dropped
    /// and counted through the table, which keeps what it needs of the finished agents.
    pub(crate) fn run(self: &Arc<Self>) {
        let mut agents = AgentTable::default();
        self.idle.register_current();
        SERVING.set(self.key());
        STOP.set(false);
        while let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.serve(&mut agents))) {
            agents.contain(payload);
        }
        SERVING.set(0);
        // Dropped outside the deque's borrow: dropping a message may run user code that
        // sends (to the channel now: this thread serves no queue any more).
        let leftover = self.local(std::mem::take);
        for d in leftover {
            agents.drop_unrun(d);
        }
        agents.retire();
        while let Ok(d) = self.rx.try_recv() {
            self.received();
            if !d.is_stop_worker() {
                agents.drop_unrun(d);
            }
        }
        *self.retired.lock() = Some(agents);
    }

    /// Runs demands until the stop command (the worker loop of [`run`](Self::run)).
    ///
    /// The worker runs the local deque in bursts of at most [`BURST`] demands, popping them
    /// one at a time (demands pushed meanwhile go behind), and looks at the channel between
    /// bursts, so a local ping-pong cannot starve senders on other threads. (It used to
    /// take the whole deque per round; with one demand in flight, as in a conversation,
    /// every round paid its setup for one demand: ping-pong 7% slower, a stream 1% faster.)
    fn serve(&self, agents: &mut AgentTable) {
        let mut spin = Spin::new(self.spin);
        loop {
            if STOP.get() {
                return;
            }
            let empty = self.local(|q| {
                // A burst's worth at a time: a backlog from other threads then waits in the
                // channel (one 32-byte slot a message) and not, moved, in the deque too
                // (the drain of 1 M queued messages peaked at 57 bytes a message, now
                // ~33). Order holds: whatever stays in the channel was pushed after what
                // was taken, and a local push takes all of it before its own (rule 2).
                if self.channel_may_hold() {
                    self.drain_some_into(q, BURST);
                }
                self.round_len.store(q.len(), StdOrdering::Relaxed);
                q.is_empty()
            });
            if STOP.get() {
                return;
            }
            if empty {
                // Waiting: spinning, then parked; back to the top to drain what came.
                let waiting = self.activity.as_ref().map(|_| std::time::Instant::now());
                self.idle.wait(&mut spin);
                if let (Some(a), Some(t)) = (&*self.activity, waiting) {
                    a.waited_since(t);
                }
                continue;
            }
            spin.found();
            // A loop per tracking mode: the untracked one asks nothing per demand (`run`
            // is inlined into both).
            match &*self.activity {
                None => {
                    for _ in 0..BURST {
                        let Some(d) = self.local(VecDeque::pop_front) else {
                            break;
                        };
                        agents.run(d);
                    }
                }
                Some(a) => {
                    for _ in 0..BURST {
                        let Some(d) = self.local(VecDeque::pop_front) else {
                            break;
                        };
                        let started = std::time::Instant::now();
                        agents.run(d);
                        a.worked_since(started);
                    }
                }
            }
        }
    }
}

impl Drop for SerialQueue {
    /// Counts what senders pushed after the worker stopped (each saw its agent alive just
    /// before the agent finished): the last reference to the queue goes with the last
    /// agent core bound to it, so nothing is pushed after this.
    fn drop(&mut self) {
        let Some(agents) = self.retired.get_mut().take() else {
            return;
        };
        while let Ok(d) = self.rx.try_recv() {
            if !d.is_stop_worker() {
                agents.drop_unrun(d);
            }
        }
    }
}

/// Demands the worker runs from its local deque before it looks at the channel again.
const BURST: usize = 64;

impl EventQueue for SerialQueue {
    /// The worker runs demands through an `AgentTable`.
    fn starts_on_bind(&self) -> bool {
        true
    }

    /// One thread serves this queue: this one, if it is the worker.
    fn blocked_by_current_thread(&self) -> bool {
        SERVING.get() == self.key()
    }

    #[inline]
    fn push(&self, demand: Demand) {
        if SERVING.get() == self.key() {
            self.push_local(demand);
        } else {
            self.send(demand);
        }
    }

    /// A direct message from another thread waits inline when it can: no allocation
    /// queued, and none freed on the worker for it (see `Demand::direct`).
    #[inline]
    fn push_message(&self, key: AgentKey, mbox: MboxId, msg: Message, agent: &AgentCore) {
        if SERVING.get() == self.key() {
            self.push_message_local(key, mbox, msg);
        } else {
            self.send_message(key, mbox, msg, agent);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::collections::VecDeque;
    use std::mem::ManuallyDrop;

    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;

    use crate::dispatcher::idle::Idle;
    use crate::sync::Mutex;

    /// A remote push that happened before a local push is handled before it: the local
    /// push either sees the count raised and drains the channel first, or the worker took
    /// the remote push already.
    #[test]
    fn a_local_push_never_overtakes_an_earlier_remote_push() {
        loom::model(|| {
            let count = Arc::new(Idle::default());
            let channel = Arc::new(Mutex::new(VecDeque::new()));
            let sent = Arc::new(AtomicBool::new(false));
            let remote = {
                let (count, channel, sent) = (count.clone(), channel.clone(), sent.clone());
                loom::thread::spawn(move || {
                    let notice = count.notify();
                    channel.lock().push_back("remote");
                    count.published(notice);
                    sent.store(true, Ordering::Release);
                })
            };
            // The worker: maybe takes from the channel, then a handler pushes locally
            // after it learnt that the remote push was made.
            let mut local = VecDeque::new();
            let take = |local: &mut VecDeque<&'static str>| {
                while let Some(c) = channel.lock().pop_front() {
                    count.taken();
                    local.push_back(c);
                }
            };
            take(&mut local);
            let before = sent.load(Ordering::Acquire);
            if count.has_pending() {
                take(&mut local);
            }
            local.push_back("local");
            remote.join().unwrap();
            take(&mut local);
            if before {
                assert_eq!(local, ["remote", "local"]);
            }
            assert_eq!(local.len(), 2);
            assert!(!count.has_pending());
        });
    }
}

/// A serial queue with the thread that serves it. Dropping it stops the thread and joins
/// it, unless the drop happens on that thread (the last reference to a dispatcher may die
/// in one of its own handlers; the thread then ends right after).
pub(crate) struct SerialWorker {
    pub(crate) queue: Arc<SerialQueue>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SerialWorker {
    /// Starts a worker that spins for [`DEFAULT_SPIN_THRESHOLD`] before it parks.
    ///
    /// [`DEFAULT_SPIN_THRESHOLD`]: super::idle::DEFAULT_SPIN_THRESHOLD
    pub(crate) fn spawn(name: String, activity: bool) -> std::io::Result<Self> {
        Self::spawn_spinning(name, activity, super::idle::DEFAULT_SPIN_THRESHOLD)
    }

    /// Starts a worker that spins for `spin` before it parks when it has nothing to do.
    pub(crate) fn spawn_spinning(
        name: String,
        activity: bool,
        spin: Duration,
    ) -> std::io::Result<Self> {
        let queue = SerialQueue::new(activity, spin);
        let worker = queue.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || worker.run())?;
        Ok(SerialWorker {
            queue,
            thread: Some(thread),
        })
    }
}

impl Drop for SerialWorker {
    fn drop(&mut self) {
        self.queue.stop();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
#[path = "serial_tests.rs"]
mod tests;
