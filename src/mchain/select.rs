//! Waiting on several chains at once: [`select`] over receive and send cases.

use std::fmt;
use std::time::Instant;

use super::{Handlers, MChain, ReceiveParams, ReceiveStatus, Waker};
use crate::message::Message;

/// The parameters of [`select`]: the same as [`receive`](super::receive)'s, where a
/// completed send case counts as a handled message.
pub type SelectParams<'a> = ReceiveParams<'a>;

/// One case of a [`select`]: receive from a chain, or send one message into it.
pub struct SelectCase<'a>(Case<'a>);

enum Case<'a> {
    Receive {
        chain: MChain,
        handlers: Handlers<'a>,
    },
    Send {
        chain: MChain,
        msg: Option<Message>,
        on_sent: Box<dyn FnMut() + 'a>,
    },
}

impl fmt::Debug for SelectCase<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Case::Receive { chain, .. } => write!(f, "receive_case({chain:?})"),
            Case::Send { chain, .. } => write!(f, "send_case({chain:?})"),
        }
    }
}

/// A case that takes messages from `chain` and runs `handlers` on them.
pub fn receive_case<'a>(chain: &MChain, handlers: Handlers<'a>) -> SelectCase<'a> {
    SelectCase(Case::Receive {
        chain: chain.clone(),
        handlers,
    })
}

/// A case that sends `msg` into `chain` once there is room, then calls `on_sent`. It is
/// done after that send (or when the chain is closed; the message is then dropped).
pub fn send_case<'a, M, F>(chain: &MChain, msg: M, on_sent: F) -> SelectCase<'a>
where
    M: Send + Sync + 'static,
    F: FnMut() + 'a,
{
    SelectCase(Case::Send {
        chain: chain.clone(),
        msg: Some(Message::new(msg)),
        on_sent: Box::new(on_sent),
    })
}

/// What [`select`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SelectResult {
    /// Messages taken out of the chains.
    pub extracted: usize,
    /// Messages a handler ran for.
    pub handled: usize,
    /// Send cases completed.
    pub sent: usize,
    /// Why it returned.
    pub status: ReceiveStatus,
}

/// Serves `cases` until a condition of `params` is met, or until every receive case's
/// chain is closed and empty and every send case is done ([`ReceiveStatus::Closed`]).
///
/// Cases are tried in turn, starting after the one that last made progress, so one busy
/// chain does not starve the others. A handler or `on_sent` runs on this thread, with no
/// chain locked.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use agentbox::prelude::*;
/// use agentbox::mchain::{receive_case, select, send_case, Handlers, MChainParams, SelectParams};
///
/// Environment::launch(|env| {
///     let requests = env.create_mchain(MChainParams::unbounded());
///     let replies = env.create_mchain(MChainParams::bounded(1));
///     requests.send(5u32).unwrap();
///     let mut got = 0;
///     let mut sent = false;
///     let r = select(
///         SelectParams::new().handle_n(2).total_time(Duration::from_secs(5)),
///         &mut [
///             receive_case(&requests, Handlers::new().on(|n: &u32| got = *n)),
///             send_case(&replies, "ready", || sent = true),
///         ],
///     );
///     assert_eq!((r.handled, r.sent), (1, 1));
///     assert_eq!(got, 5);
///     assert!(sent);
///     assert_eq!(replies.len(), 1);
/// }).unwrap();
/// ```
pub fn select(mut params: SelectParams<'_>, cases: &mut [SelectCase<'_>]) -> SelectResult {
    let waker = Waker::new();
    for c in cases.iter() {
        match &c.0 {
            Case::Receive { chain, .. } | Case::Send { chain, .. } => chain.0.add_waker(&waker),
        }
    }
    let start = Instant::now();
    let mut last = start;
    let (mut extracted, mut handled, mut sent) = (0, 0, 0);
    let mut next = 0;
    let status = 'outer: loop {
        if let Some(st) = params.done(handled + sent, extracted) {
            break st;
        }
        if params.total_time.is_some_and(|t| start.elapsed() >= t) {
            break ReceiveStatus::TotalTimeout;
        }
        let mut active = false;
        for k in 0..cases.len() {
            let i = (next + k) % cases.len();
            match &mut cases[i].0 {
                Case::Receive { chain, handlers } => {
                    let msg = {
                        let mut st = chain.0.state.lock();
                        let m = st.queue.pop_front();
                        if m.is_some() {
                            chain.0.after_pop(&mut st);
                        } else if !st.closed {
                            active = true;
                        }
                        m
                    };
                    if let Some(msg) = msg {
                        extracted += 1;
                        if handlers.handle(&msg) {
                            handled += 1;
                        }
                        last = Instant::now();
                        next = i + 1;
                        continue 'outer;
                    }
                }
                Case::Send {
                    chain,
                    msg,
                    on_sent,
                } => {
                    let Some(m) = msg.take() else { continue };
                    match chain.0.try_push(m) {
                        Ok(None) => {
                            sent += 1;
                            on_sent();
                            last = Instant::now();
                            next = i + 1;
                            continue 'outer;
                        }
                        Ok(Some(back)) => {
                            *msg = Some(back);
                            active = true;
                        }
                        Err(_) => {} // closed: the case is done
                    }
                }
            }
        }
        if !active {
            break ReceiveStatus::Closed;
        }
        let deadline = params.deadline(start, last);
        if let Some((d, total)) = deadline {
            if Instant::now() >= d {
                break if total {
                    ReceiveStatus::TotalTimeout
                } else {
                    ReceiveStatus::EmptyTimeout
                };
            }
        }
        waker.wait(deadline.map(|d| d.0));
    };
    for c in cases.iter() {
        match &c.0 {
            Case::Receive { chain, .. } | Case::Send { chain, .. } => chain.0.remove_waker(&waker),
        }
    }
    SelectResult {
        extracted,
        handled,
        sent,
        status,
    }
}
