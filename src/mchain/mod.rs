//! Message chains: CSP-style channels that are also mboxes.
//!
//! An mchain is a queue of messages that any thread reads with [`receive`] or [`select`]
//! (agents cannot subscribe to it). Anything that sends to an mbox can send to it through
//! [`MChain::as_mbox`]: agents, timers, message limits. It is a single-consumer mbox, so
//! [`Mutable`](crate::Mutable) messages go through it.
//!
//! 1. **Capacity.** Unbounded, or bounded to `n` messages.
//! 2. **Full.** A send to a full bounded chain first waits for room up to the chain's
//!    wait timeout (if it has one), then applies the overflow reaction:
//!    [`OverflowReaction::DropNewest`] (the new message is dropped, the send succeeds),
//!    [`OverflowReaction::RemoveOldest`] (the oldest queued message goes),
//!    [`OverflowReaction::Error`] ([`SendError::ChainFull`]), or
//!    [`OverflowReaction::Abort`] (log, then abort the process).
//! 3. **Never blocking where it must not.** Timer deliveries, and redirections and
//!    transformations by message limits, never wait: they go straight to the overflow
//!    reaction.
//! 4. **Close.** [`CloseMode::DropContent`] empties the chain; [`CloseMode::RetainContent`]
//!    lets readers take what is left. Sends to a closed chain fail with
//!    [`SendError::ChainClosed`]; readers of a closed, empty chain return at once with
//!    [`ReceiveStatus::Closed`].
//! 5. **Notification.** An optional hook runs (outside the chain's lock) each time the
//!    chain goes from empty to not empty.
//! 6. **Async readers** (feature `tokio`): `MChain::recv_async` and `MChain::stream` (in
//!    `tokio_interop`) take messages in the same order as [`receive`], without blocking a
//!    thread; the stream ends when the chain is closed and empty.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams, ReceiveStatus};
//!
//! Environment::launch(|env| {
//!     let chain = env.create_mchain(MChainParams::bounded(8));
//!     send(&chain.as_mbox(), 1u32).unwrap();
//!     send(&chain.as_mbox(), "two").unwrap();
//!     send(&chain.as_mbox(), 3u32).unwrap();
//!
//!     let mut sum = 0;
//!     let mut words = Vec::new();
//!     let result = receive(
//!         &chain,
//!         ReceiveParams::new().handle_n(3).empty_timeout(Duration::from_millis(10)),
//!         &mut Handlers::new()
//!             .on(|n: &u32| sum += n)
//!             .on(|s: &&str| words.push(s.to_string())),
//!     );
//!     assert_eq!(result.handled, 3);
//!     assert_eq!(result.status, ReceiveStatus::Completed);
//!     assert_eq!(sum, 4);
//!     assert_eq!(words, ["two"]);
//! }).unwrap();
//! ```

mod receive;
mod select;

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use receive::{receive, Handlers, ReceiveParams, ReceiveResult, ReceiveStatus};
pub use select::{receive_case, select, send_case, SelectCase, SelectParams, SelectResult};

use crate::environment::{Environment, WeakEnv};
use crate::mbox::{DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind, SendError};
use crate::message::{Message, RedirectionDepth};

/// What a send to a full bounded chain does after any waiting.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum OverflowReaction {
    /// The new message is dropped; the send succeeds.
    DropNewest,
    /// The oldest queued message is dropped to make room.
    RemoveOldest,
    /// The send fails with [`SendError::ChainFull`].
    Error,
    /// A log line, then the process aborts.
    Abort,
}

/// How [`MChain::close`] treats queued messages.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CloseMode {
    /// Queued messages are dropped.
    DropContent,
    /// Readers may still take queued messages.
    RetainContent,
}

type Notifier = Arc<dyn Fn() + Send + Sync>;

/// Parameters of a new chain, for [`Environment::create_mchain`].
#[derive(Clone)]
pub struct MChainParams {
    capacity: Option<usize>,
    wait: Option<Duration>,
    overflow: OverflowReaction,
    notifier: Option<Notifier>,
    name: Option<String>,
}

impl MChainParams {
    /// An unbounded chain.
    pub fn unbounded() -> Self {
        MChainParams {
            capacity: None,
            wait: None,
            overflow: OverflowReaction::DropNewest,
            notifier: None,
            name: None,
        }
    }

    /// A chain of at most `capacity` messages (at least 1), by default not waiting and
    /// dropping the newest message when full.
    pub fn bounded(capacity: usize) -> Self {
        MChainParams {
            capacity: Some(capacity.max(1)),
            ..Self::unbounded()
        }
    }

    /// Senders to a full chain wait up to `timeout` for room before the overflow reaction.
    pub fn wait_on_full(mut self, timeout: Duration) -> Self {
        self.wait = Some(timeout);
        self
    }

    /// What happens to a send to a full chain (default [`OverflowReaction::DropNewest`]).
    pub fn overflow(mut self, reaction: OverflowReaction) -> Self {
        self.overflow = reaction;
        self
    }

    /// A hook called each time the chain goes from empty to not empty, on the sender's
    /// thread, outside the chain's lock.
    pub fn not_empty_notificator<F: Fn() + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.notifier = Some(Arc::new(f));
        self
    }

    /// A name for diagnostics.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }
}

impl fmt::Debug for MChainParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MChainParams")
            .field("capacity", &self.capacity)
            .field("wait", &self.wait)
            .field("overflow", &self.overflow)
            .finish()
    }
}

/// A handle to a message chain; cheap to clone.
#[derive(Clone)]
pub struct MChain(pub(crate) Arc<Chain>);

/// Wakes one `select` call waiting on several chains.
pub(crate) struct Waker {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl Waker {
    pub(crate) fn new() -> Arc<Waker> {
        Arc::new(Waker {
            woken: Mutex::new(false),
            cond: Condvar::new(),
        })
    }

    fn wake(&self) {
        *self.woken.lock() = true;
        self.cond.notify_all();
    }

    /// Waits until woken or `deadline`; consumes the wake-up.
    pub(crate) fn wait(&self, deadline: Option<Instant>) {
        let mut woken = self.woken.lock();
        if !*woken {
            match deadline {
                Some(d) => {
                    self.cond.wait_until(&mut woken, d);
                }
                None => self.cond.wait(&mut woken),
            }
        }
        *woken = false;
    }
}

pub(crate) struct State {
    pub(crate) queue: VecDeque<Message>,
    pub(crate) closed: bool,
    /// `select` calls and async readers waiting on this chain.
    wakers: Vec<ChainWaker>,
    /// The key the next async reader registering here gets.
    next_task_key: u64,
}

/// One reader waiting on a chain: a `select` call (woken each time, until it removes
/// itself), or (hook of feature `tokio`) an async reader (a future or a stream, named by
/// its key) polling the chain, woken once. Sends check only whether the list is empty,
/// so a chain nobody awaits pays nothing for the second kind.
///
/// An async reader's entry leaves the list when it is woken, when the reader gets a
/// message or the end, and when the reader is dropped: a reader given up while
/// waiting leaves nothing behind.
enum ChainWaker {
    Select(Weak<Waker>),
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Task(u64, std::task::Waker),
}

pub(crate) struct Chain {
    id: MboxId,
    env: WeakEnv,
    params: MChainParams,
    pub(crate) state: Mutex<State>,
    not_empty: Condvar,
    not_full: Condvar,
    closed_flag: AtomicBool,
    /// The queue's length, for readers spinning before they sleep.
    queued: AtomicUsize,
}

/// How long a reader of an empty chain spins before it sleeps (a few microseconds).
const SPIN_ROUNDS: u32 = 2048;

impl Environment {
    /// A new message chain.
    pub fn create_mchain(&self, params: MChainParams) -> MChain {
        MChain(Arc::new(Chain {
            id: MboxId::next(),
            env: self.downgrade(),
            params,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                closed: false,
                wakers: Vec::new(),
                next_task_key: 0,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            closed_flag: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
        }))
    }
}

impl MChain {
    /// The chain as an mbox, to send to.
    pub fn as_mbox(&self) -> Mbox {
        Mbox::custom(self.0.clone())
    }

    /// Sends immutable `msg` into the chain (shorthand for sending to [`as_mbox`](Self::as_mbox)).
    ///
    /// # Errors
    ///
    /// [`SendError::ChainClosed`], or [`SendError::ChainFull`] with
    /// [`OverflowReaction::Error`].
    pub fn send<M: Send + Sync + 'static>(&self, msg: M) -> Result<(), SendError> {
        self.0.push(Message::new(msg), DeliveryMode::Ordinary)
    }

    /// Closes the chain; see [`CloseMode`]. Closing twice does nothing more.
    pub fn close(&self, mode: CloseMode) {
        let (dropped, tasks) = {
            let mut st = self.0.state.lock();
            st.closed = true;
            self.0.closed_flag.store(true, Ordering::Release);
            let dropped = match mode {
                CloseMode::DropContent => {
                    self.0.queued.store(0, Ordering::Release);
                    std::mem::take(&mut st.queue)
                }
                CloseMode::RetainContent => VecDeque::new(),
            };
            let tasks = self.0.wake_all(&mut st);
            (dropped, tasks)
        };
        tasks.into_iter().for_each(std::task::Waker::wake);
        drop(dropped);
    }

    /// Whether the chain is closed.
    pub fn is_closed(&self) -> bool {
        self.0.closed_flag.load(Ordering::Acquire)
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        self.0.state.lock().queue.len()
    }

    /// Whether no message is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chain's id (also its mbox's id).
    pub fn id(&self) -> MboxId {
        self.0.id
    }
}

impl fmt::Debug for MChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MChain({})", self.0.name())
    }
}

impl Chain {
    fn name(&self) -> String {
        match &self.params.name {
            Some(n) => n.clone(),
            None => format!("mchain:{}", self.id.as_u64()),
        }
    }

    /// Wakes blocked readers and writers and every `select` registered here, and takes
    /// out the async readers' wakers: the caller wakes them once it has released the
    /// chain's lock (a task's waker is its executor's code). An async reader polls again
    /// and registers again if it still waits.
    #[must_use = "the async readers' wakers are woken by the caller, after the lock"]
    fn wake_all(&self, st: &mut State) -> Vec<std::task::Waker> {
        self.not_empty.notify_all();
        self.not_full.notify_all();
        let mut tasks = Vec::new();
        st.wakers.retain(|w| match w {
            ChainWaker::Select(w) => match w.upgrade() {
                Some(w) => {
                    w.wake();
                    true
                }
                None => false,
            },
            ChainWaker::Task(_, t) => {
                tasks.push(t.clone());
                false
            }
        });
        tasks
    }

    pub(crate) fn add_waker(&self, w: &Arc<Waker>) {
        self.state
            .lock()
            .wakers
            .push(ChainWaker::Select(Arc::downgrade(w)));
    }

    pub(crate) fn remove_waker(&self, w: &Arc<Waker>) {
        self.state.lock().wakers.retain(|x| match x {
            ChainWaker::Select(x) => {
                x.strong_count() > 0 && !std::ptr::eq(x.as_ptr(), Arc::as_ptr(w))
            }
            ChainWaker::Task(..) => true,
        });
    }

    /// Hook of feature `tokio` (`tokio_interop`'s mchain future and stream): takes the
    /// next message without waiting; `Ready(None)` when the chain is closed and empty;
    /// otherwise registers `waker` under the reader's `key` (given on its first wait;
    /// one entry per reader, its waker replaced by a newer one) to be woken by the next
    /// send, close or (bounded chain) pop, and is `Pending`. The check and the
    /// registration are under the chain's lock, so no wake-up is lost between them.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_pop(
        &self,
        key: &mut Option<u64>,
        waker: &std::task::Waker,
    ) -> std::task::Poll<Option<Message>> {
        use std::task::Poll;
        let mut st = self.state.lock();
        let ready = match st.queue.pop_front() {
            Some(m) => {
                self.after_pop(&mut st);
                Some(Some(m))
            }
            None if st.closed => Some(None),
            None => None,
        };
        if let Some(out) = ready {
            let stale = key.and_then(|k| Self::forget_task(&mut st, k));
            drop(st);
            drop(stale);
            return Poll::Ready(out);
        }
        let k = match *key {
            Some(k) => k,
            None => {
                let k = st.next_task_key;
                st.next_task_key += 1;
                *key = Some(k);
                k
            }
        };
        let entry = st.wakers.iter_mut().find_map(|w| match w {
            ChainWaker::Task(x, t) if *x == k => Some(t),
            _ => None,
        });
        match entry {
            Some(t) => {
                if !t.will_wake(waker) {
                    t.clone_from(waker);
                }
            }
            None => st.wakers.push(ChainWaker::Task(k, waker.clone())),
        }
        Poll::Pending
    }

    /// Hook of feature `tokio`: an async reader with `key` is dropped; its entry, if it
    /// is still waiting, goes.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn cancel_poll(&self, key: u64) {
        let waker = {
            let mut st = self.state.lock();
            Self::forget_task(&mut st, key)
        };
        // A task's waker is its executor's code: dropped outside the lock.
        drop(waker);
    }

    fn forget_task(st: &mut State, key: u64) -> Option<std::task::Waker> {
        let at = st
            .wakers
            .iter()
            .position(|w| matches!(w, ChainWaker::Task(x, _) if *x == key))?;
        match st.wakers.swap_remove(at) {
            ChainWaker::Task(_, t) => Some(t),
            ChainWaker::Select(_) => None,
        }
    }

    fn is_full(&self, st: &State) -> bool {
        self.params.capacity.is_some_and(|c| st.queue.len() >= c)
    }

    fn closed_error(&self, msg: &Message) -> SendError {
        SendError::ChainClosed {
            type_name: msg.message_type().name(),
            mbox: self.name(),
        }
    }

    /// Rules 2–5.
    pub(crate) fn push(&self, msg: Message, mode: DeliveryMode) -> Result<(), SendError> {
        self.push_with(msg, false, mode).map(|_| ())
    }

    /// A send that never waits and never applies the overflow reaction: the message comes
    /// back (`Ok(Some(msg))`) if the chain is full.
    pub(crate) fn try_push(&self, msg: Message) -> Result<Option<Message>, SendError> {
        self.push_with(msg, true, DeliveryMode::Nonblocking)
    }

    fn push_with(
        &self,
        msg: Message,
        give_back: bool,
        mode: DeliveryMode,
    ) -> Result<Option<Message>, SendError> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(self.closed_error(&msg));
        }
        let mut dropped = None;
        if give_back && self.is_full(&st) {
            return Ok(Some(msg));
        }
        if self.is_full(&st) {
            if let (Some(wait), DeliveryMode::Ordinary) = (self.params.wait, mode) {
                // A wait too long for `Instant` waits until there is room.
                let deadline = crate::timer::deadline_after(Instant::now(), wait);
                while self.is_full(&st) && !st.closed {
                    match deadline {
                        Some(d) => {
                            if self.not_full.wait_until(&mut st, d).timed_out() {
                                break;
                            }
                        }
                        None => self.not_full.wait(&mut st),
                    }
                }
                if st.closed {
                    return Err(self.closed_error(&msg));
                }
            }
            if self.is_full(&st) {
                match self.params.overflow {
                    OverflowReaction::DropNewest => return Ok(None),
                    OverflowReaction::RemoveOldest => dropped = st.queue.pop_front(),
                    OverflowReaction::Error => {
                        return Err(SendError::ChainFull {
                            type_name: msg.message_type().name(),
                            mbox: self.name(),
                        })
                    }
                    OverflowReaction::Abort => {
                        let line = format!(
                            "mchain {} is full: aborting on {}",
                            self.name(),
                            msg.message_type().name()
                        );
                        drop(st);
                        match self.env.upgrade() {
                            Some(env) => env.log_error(&line),
                            None => eprintln!("agentbox: {line}"),
                        }
                        std::process::abort();
                    }
                }
            }
        }
        let was_empty = st.queue.is_empty();
        st.queue.push_back(msg);
        self.queued.store(st.queue.len(), Ordering::Release);
        self.not_empty.notify_one();
        let tasks = if st.wakers.is_empty() {
            Vec::new()
        } else {
            self.wake_all(&mut st)
        };
        drop(st);
        tasks.into_iter().for_each(std::task::Waker::wake);
        drop(dropped);
        if was_empty {
            if let Some(n) = &self.params.notifier {
                n();
            }
        }
        Ok(None)
    }

    /// Takes the next message, waiting until `deadline` (`None`: forever) for one.
    /// `Err(true)`: closed and empty; `Err(false)`: timed out.
    pub(crate) fn pop(&self, deadline: Option<Instant>) -> Result<Message, bool> {
        let mut st = self.state.lock();
        let mut spun = false;
        loop {
            if let Some(m) = st.queue.pop_front() {
                self.after_pop(&mut st);
                return Ok(m);
            }
            if st.closed {
                return Err(true);
            }
            if !spun && deadline.is_none_or(|d| Instant::now() < d) {
                // A reply often comes within microseconds (ping-pong between threads):
                // spinning a little first saves the sleep and the wake-up, which cost
                // more than the message itself.
                spun = true;
                drop(st);
                for i in 0..SPIN_ROUNDS {
                    if self.queued.load(Ordering::Acquire) > 0
                        || self.closed_flag.load(Ordering::Acquire)
                    {
                        break;
                    }
                    if i % 64 == 63 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                st = self.state.lock();
                continue;
            }
            match deadline {
                Some(d) => {
                    if Instant::now() >= d || self.not_empty.wait_until(&mut st, d).timed_out() {
                        if let Some(m) = st.queue.pop_front() {
                            self.after_pop(&mut st);
                            return Ok(m);
                        }
                        return Err(st.closed);
                    }
                }
                None => self.not_empty.wait(&mut st),
            }
        }
    }

    pub(crate) fn after_pop(&self, st: &mut State) {
        self.queued.store(st.queue.len(), Ordering::Release);
        if self.params.capacity.is_some() {
            self.not_full.notify_one();
            // Room for writers: only `select`s (which may wait to send) are woken; async
            // readers have nothing new to read and stay registered.
            for w in &st.wakers {
                if let ChainWaker::Select(w) = w {
                    if let Some(w) = w.upgrade() {
                        w.wake();
                    }
                }
            }
        }
    }
}

impl MboxImpl for Chain {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn deliver(
        &self,
        msg: Message,
        _depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        self.push(msg, mode)
    }

    fn name(&self) -> String {
        Chain::name(self)
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}
