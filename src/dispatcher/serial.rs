//! A FIFO demand queue served by exactly one worker thread, with a worker-local fast path.
//!
//! Every single-threaded dispatcher serves its agents from one of these. A push made on the
//! serving thread itself (a handler sending to an agent of the same worker — the common
//! case of ping-pong and fan-out) goes to a thread-local `VecDeque` without any
//! synchronisation; pushes from other threads go through a crossbeam channel.
//!
//! # Ordering
//!
//! 1. The worker moves channel items into the local deque before it runs anything from it.
//! 2. A local push first moves whatever is already in the channel into the deque, then
//!    appends. So the deque always holds demands in the order they were pushed: a demand
//!    pushed from another thread before a local push (for example the `on_start` demand of
//!    an agent registered from another thread, which a handler here then messages) runs
//!    before it.
//! 3. The worker runs at most [`BATCH`] local demands between looks at the channel, so a
//!    local ping-pong cannot starve senders on other threads.
//!
//! # Races
//!
//! A push from another thread that lands while the worker blocks in `recv` wakes it. A push
//! after the worker stopped is dropped with the channel (the agents it was for are gone).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::{Demand, EventQueue};

/// Local demands run between two looks at the cross-thread channel.
const BATCH: usize = 64;

enum Cmd {
    Run(Demand),
    Stop,
}

/// The state of the worker that runs on this thread, if any.
struct Local {
    /// Address of the `SerialQueue` this thread serves; 0 when it serves none.
    key: Cell<usize>,
    queue: RefCell<VecDeque<Demand>>,
    stop: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local { key: Cell::new(0), queue: RefCell::new(VecDeque::new()), stop: Cell::new(false) }
    };
}

pub(crate) struct SerialQueue {
    tx: Sender<Cmd>,
    rx: Receiver<Cmd>,
}

impl SerialQueue {
    pub(crate) fn new() -> Arc<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        Arc::new(SerialQueue { tx, rx })
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    /// Asks the worker to stop after the demand it is running.
    pub(crate) fn stop(&self) {
        let _ = self.tx.send(Cmd::Stop);
    }

    /// Moves everything the channel holds into the local deque. Returns `true` once a stop
    /// was seen.
    fn drain_into(&self, local: &Local) -> bool {
        let mut q = local.queue.borrow_mut();
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Cmd::Run(d) => q.push_back(d),
                Cmd::Stop => {
                    local.stop.set(true);
                    return true;
                }
            }
        }
        local.stop.get()
    }

    /// The worker loop; returns when [`stop`](Self::stop) is called.
    pub(crate) fn run(self: &Arc<Self>) {
        LOCAL.with(|l| {
            l.key.set(self.key());
            l.stop.set(false);
        });
        loop {
            if LOCAL.with(|l| self.drain_into(l)) {
                break;
            }
            let mut ran = 0;
            while ran < BATCH {
                let Some(d) = LOCAL.with(|l| l.queue.borrow_mut().pop_front()) else {
                    break;
                };
                d.run();
                ran += 1;
            }
            if LOCAL.with(|l| l.stop.get()) {
                break;
            }
            if ran == 0 {
                match self.rx.recv() {
                    Ok(Cmd::Run(d)) => LOCAL.with(|l| l.queue.borrow_mut().push_back(d)),
                    Ok(Cmd::Stop) | Err(_) => break,
                }
            }
        }
        // Demands left behind are for agents that are gone. Drop them outside the borrow:
        // dropping an agent may run user code that sends.
        let leftover = LOCAL.with(|l| {
            l.key.set(0);
            std::mem::take(&mut *l.queue.borrow_mut())
        });
        drop(leftover);
    }

    /// Demands waiting in the channel (not counting the worker's local deque).
    #[allow(dead_code)]
    pub(crate) fn channel_len(&self) -> usize {
        self.rx.len()
    }
}

impl EventQueue for SerialQueue {
    #[inline]
    fn push(&self, demand: Demand) {
        let key = self.key();
        let remote = LOCAL.with(|l| {
            if l.key.get() != key {
                return Some(demand);
            }
            // `is_empty` is two plain loads; a full `try_recv` on every local push cost
            // ~100 instructions per message in the ping-pong profile.
            if !self.rx.is_empty() {
                self.drain_into(l);
            }
            l.queue.borrow_mut().push_back(demand);
            None
        });
        if let Some(demand) = remote {
            // Err only once the worker is gone, and then the agents are gone too.
            let _ = self.tx.send(Cmd::Run(demand));
        }
    }
}
