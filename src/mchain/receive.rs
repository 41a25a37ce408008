//! Reading one chain: [`receive`] with its parameters and handlers.

use std::any::TypeId;
use std::fmt;
use std::time::{Duration, Instant};

use super::MChain;
use crate::message::{Access, Message, MessageType};

type HandlerFn<'a> = Box<dyn FnMut(&Message) + 'a>;

/// Handlers by message type, for [`receive`] and [`select`](super::select).
///
/// A message of a type with no handler is extracted (taken out of the chain) but not
/// handled.
#[derive(Default)]
pub struct Handlers<'a> {
    list: Vec<(TypeId, HandlerFn<'a>)>,
}

impl<'a> Handlers<'a> {
    /// No handlers yet.
    pub fn new() -> Self {
        Handlers { list: Vec::new() }
    }

    /// Handles immutable messages of type `M` (replacing an earlier handler for `M`).
    pub fn on<M: Send + Sync + 'static, F: FnMut(&M) + 'a>(mut self, mut f: F) -> Self {
        self.put(
            MessageType::of::<M>(),
            Box::new(move |m: &Message| {
                if let Some(v) = m.handler_payload::<M>() {
                    f(v)
                }
            }),
        );
        self
    }

    /// Handles [`Mutable`](crate::Mutable) messages of type `M`, taking the value.
    pub fn on_mutable<M: Send + 'static, F: FnMut(M) + 'a>(mut self, mut f: F) -> Self {
        self.put(
            MessageType::of_mutable::<M>(),
            Box::new(move |m: &Message| {
                if let Some(v) = m.handler_take::<M>() {
                    f(v)
                }
            }),
        );
        self
    }

    fn put(&mut self, ty: MessageType, f: HandlerFn<'a>) {
        self.list.retain(|(t, _)| *t != ty.type_id());
        self.list.push((ty.type_id(), f));
    }

    /// Runs the handler for `msg`, if there is one and its envelope reveals it; returns
    /// whether one ran.
    pub(crate) fn handle(&mut self, msg: &Message) -> bool {
        let Some((_, f)) = self.list.iter_mut().find(|(t, _)| *t == msg.type_id()) else {
            return false;
        };
        match msg.reveal(Access::Handling) {
            Some(m) => {
                f(m);
                true
            }
            None => false,
        }
    }
}

impl fmt::Debug for Handlers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handlers({})", self.list.len())
    }
}

type StopFn<'a> = Box<dyn FnMut() -> bool + 'a>;

/// When [`receive`] and [`select`](super::select) return.
///
/// With nothing set, they return when every chain is closed and empty. Each condition
/// set adds a way to return earlier; the first one met wins.
#[derive(Default)]
pub struct ReceiveParams<'a> {
    pub(crate) handle_n: Option<usize>,
    pub(crate) extract_n: Option<usize>,
    pub(crate) empty_timeout: Option<Duration>,
    pub(crate) total_time: Option<Duration>,
    pub(crate) stop_on: Option<StopFn<'a>>,
}

impl<'a> ReceiveParams<'a> {
    /// Return only when the chains are closed.
    pub fn new() -> Self {
        ReceiveParams::default()
    }

    /// Return after `n` messages were handled.
    pub fn handle_n(mut self, n: usize) -> Self {
        self.handle_n = Some(n);
        self
    }

    /// Return after `n` messages were extracted (handled or not).
    pub fn extract_n(mut self, n: usize) -> Self {
        self.extract_n = Some(n);
        self
    }

    /// Return when no message arrives for `timeout`.
    pub fn empty_timeout(mut self, timeout: Duration) -> Self {
        self.empty_timeout = Some(timeout);
        self
    }

    /// Return after `time` in total (a handler running then finishes first).
    pub fn total_time(mut self, time: Duration) -> Self {
        self.total_time = Some(time);
        self
    }

    /// Do not wait at all: take only what is queued now.
    pub fn no_wait(self) -> Self {
        self.empty_timeout(Duration::ZERO)
    }

    /// Return as soon as `stop` returns `true` (asked before each wait and after each
    /// message).
    pub fn stop_on<F: FnMut() -> bool + 'a>(mut self, stop: F) -> Self {
        self.stop_on = Some(Box::new(stop));
        self
    }

    /// Whether a count or the predicate says to return.
    pub(crate) fn done(&mut self, handled: usize, extracted: usize) -> Option<ReceiveStatus> {
        if self.handle_n.is_some_and(|n| handled >= n)
            || self.extract_n.is_some_and(|n| extracted >= n)
        {
            return Some(ReceiveStatus::Completed);
        }
        if self.stop_on.as_mut().is_some_and(|f| f()) {
            return Some(ReceiveStatus::Stopped);
        }
        None
    }

    /// The deadline of the next wait, and whether it is the total-time one. A time too
    /// long for `Instant` (such as `Duration::MAX`) is no deadline.
    pub(crate) fn deadline(&self, start: Instant, last: Instant) -> Option<(Instant, bool)> {
        let after = crate::timer::deadline_after;
        let empty = self
            .empty_timeout
            .and_then(|t| after(last, t))
            .map(|d| (d, false));
        let total = self
            .total_time
            .and_then(|t| after(start, t))
            .map(|d| (d, true));
        match (empty, total) {
            (Some(e), Some(t)) => Some(if t.0 <= e.0 { t } else { e }),
            (e, t) => e.or(t),
        }
    }
}

impl fmt::Debug for ReceiveParams<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiveParams")
            .field("handle_n", &self.handle_n)
            .field("extract_n", &self.extract_n)
            .field("empty_timeout", &self.empty_timeout)
            .field("total_time", &self.total_time)
            .finish()
    }
}

/// Why [`receive`] or [`select`](super::select) returned.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReceiveStatus {
    /// The `handle_n` or `extract_n` count was reached.
    Completed,
    /// The stop predicate said so.
    Stopped,
    /// No message came within the empty timeout.
    EmptyTimeout,
    /// The total time ran out.
    TotalTimeout,
    /// Every chain is closed and empty (and, for `select`, every send case is done).
    Closed,
}

/// What [`receive`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReceiveResult {
    /// Messages taken out of the chain.
    pub extracted: usize,
    /// Messages a handler ran for.
    pub handled: usize,
    /// Why it returned.
    pub status: ReceiveStatus,
}

/// Takes messages from `chain` and runs their handlers on this thread until a condition of
/// `params` is met (see [`ReceiveParams`]).
pub fn receive(
    chain: &MChain,
    mut params: ReceiveParams<'_>,
    handlers: &mut Handlers<'_>,
) -> ReceiveResult {
    let start = Instant::now();
    let mut last = start;
    let (mut extracted, mut handled) = (0, 0);
    let status = loop {
        if let Some(st) = params.done(handled, extracted) {
            break st;
        }
        if params.total_time.is_some_and(|t| start.elapsed() >= t) {
            break ReceiveStatus::TotalTimeout;
        }
        let deadline = params.deadline(start, last);
        match chain.0.pop(deadline.map(|d| d.0)) {
            Ok(msg) => {
                extracted += 1;
                if handlers.handle(&msg) {
                    handled += 1;
                }
                last = Instant::now();
            }
            Err(true) => break ReceiveStatus::Closed,
            Err(false) => {
                break match deadline {
                    Some((_, true)) => ReceiveStatus::TotalTimeout,
                    _ => ReceiveStatus::EmptyTimeout,
                }
            }
        }
    };
    ReceiveResult {
        extracted,
        handled,
        status,
    }
}
