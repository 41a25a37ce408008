//! One agent's queue on `adv_thread_pool`: the start protocol for thread-safe and exclusive
//! demands, generic over the demands and the executor so that loom can check it.
//!
//! # Protocol
//!
//! Everything below happens under the queue's lock, except running a demand.
//!
//! 1. A queue is in the pool's ready list at most once (`scheduled`).
//! 2. A worker takes a queue from the ready list, clears `scheduled` and, if the head demand
//!    can start, pops it and marks it running:
//!    - `Bind` (always the agent's first demand) starts when nothing runs and runs
//!      *exclusively*: nothing of the agent starts until the executor it carries is
//!      installed. (It used to let the next demand start before the executor existed; that
//!      demand was popped, found no executor and was lost: loom model
//!      `start_is_not_lost_while_the_executor_is_being_installed`.)
//!    - a thread-safe demand starts when no exclusive demand runs;
//!    - any other demand starts when nothing runs, and runs exclusively.
//! 3. Whenever the head could start (after a push, after a start, after a demand ends) and
//!    the queue is not scheduled, the queue goes back to the ready list, so another worker
//!    can start the next thread-safe demand in parallel.
//! 4. A demand popped after the agent's last demand (`Finish`) ran finds no executor and is
//!    dropped (and counted, by the protocol): the agent is gone. Nothing else is ever
//!    dropped once popped. What is still queued when the queue goes is dropped the same way.
//!
//! # Races
//!
//! - The head is classified (thread-safe or not) only while no exclusive demand runs, and
//!   only an exclusive demand can change what classifies it (the agent's state), so the
//!   class cannot change between the classification and the start.
//! - A push racing with a worker that is finishing a demand: both take the lock, and
//!   whichever comes second sees the head startable and the queue unscheduled, and
//!   schedules it (step 3); so a startable head is never left unscheduled.
//!
//! Checked by the loom models below (every interleaving of two workers and a sender, with
//! bind, thread-safe and exclusive demands) and by `tests/dispatcher_adv_thread_pool.rs`
//! and `tests/core_stress.rs` (registration under load, many times).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use crate::sync::Mutex;

/// What a queue needs to know of its demands and of the executor they feed.
pub(crate) trait Protocol: Send + Sync + Sized + 'static {
    type Demand: Send;
    type Exec: Send + Sync;
    /// Whether this is the demand that carries the executor.
    fn is_bind(d: &Self::Demand) -> bool;
    /// The executor a `Bind` demand carries (`None` for any other demand).
    fn bind(d: Self::Demand) -> Option<Self::Exec>;
    /// Whether the demand would run a thread-safe handler (asked only while no exclusive
    /// demand of the agent runs).
    fn is_safe(exec: &Self::Exec, d: &Self::Demand) -> bool;
    /// Runs a thread-safe demand, possibly in parallel with others.
    fn run_safe(exec: &Self::Exec, d: Self::Demand);
    /// Runs a demand alone; `true` when it was the agent's last (the executor goes).
    fn run_exclusive(exec: &Self::Exec, d: Self::Demand) -> bool;
    /// Puts a queue on the pool's ready list.
    fn make_ready(&self, q: Arc<AdvQueue<Self>>);
    /// The executor of an agent whose last demand ran, to be dropped.
    fn finished(exec: Arc<Self::Exec>) {
        drop(exec);
    }
    /// A demand that will not run (step 4, and what is queued when the queue goes).
    fn drop_unrun(&self, d: Self::Demand) {
        drop(d);
    }
}

struct State<P: Protocol> {
    demands: VecDeque<P::Demand>,
    exec: Option<Arc<P::Exec>>,
    running_safe: usize,
    running_exclusive: bool,
    scheduled: bool,
}

/// One agent's FIFO and the executor it feeds.
pub(crate) struct AdvQueue<P: Protocol> {
    state: Mutex<State<P>>,
    proto: P,
    me: Weak<AdvQueue<P>>,
}

enum Start<P: Protocol> {
    Bind(P::Demand),
    Safe(Arc<P::Exec>, P::Demand),
    Exclusive(Arc<P::Exec>, P::Demand),
    /// The agent is gone (step 4).
    Drop(P::Demand),
}

impl<P: Protocol> AdvQueue<P> {
    pub(crate) fn new(proto: P) -> Arc<Self> {
        Arc::new_cyclic(|me| AdvQueue {
            state: Mutex::new(State {
                demands: VecDeque::new(),
                exec: None,
                running_safe: 0,
                running_exclusive: false,
                scheduled: false,
            }),
            proto,
            me: me.clone(),
        })
    }

    /// The protocol's own part of the queue.
    pub(crate) fn proto(&self) -> &P {
        &self.proto
    }

    /// Demands waiting to start.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().demands.len()
    }

    /// Queues a demand (step 3 after it).
    pub(crate) fn push(&self, d: P::Demand) {
        let mut st = self.state.lock();
        st.demands.push_back(d);
        self.reschedule(&mut st);
    }

    /// Whether the head demand could start now.
    fn head_startable(st: &State<P>) -> bool {
        let Some(head) = st.demands.front() else {
            return false;
        };
        if st.running_exclusive {
            return false;
        }
        if st.running_safe == 0 {
            return true;
        }
        !P::is_bind(head) && st.exec.as_deref().is_some_and(|e| P::is_safe(e, head))
    }

    /// Step 3.
    fn reschedule(&self, st: &mut State<P>) {
        if !st.scheduled && Self::head_startable(st) {
            if let Some(me) = self.me.upgrade() {
                st.scheduled = true;
                self.proto.make_ready(me);
            }
        }
    }

    /// Step 2, then running what was started, then step 3.
    pub(crate) fn serve(&self) {
        let start = {
            let mut st = self.state.lock();
            st.scheduled = false;
            if !Self::head_startable(&st) {
                return;
            }
            let Some(d) = st.demands.pop_front() else {
                return;
            };
            let start: Start<P> = if P::is_bind(&d) {
                st.running_exclusive = true;
                Start::Bind(d)
            } else {
                match st.exec.clone() {
                    None => Start::Drop(d),
                    Some(exec) if P::is_safe(&exec, &d) => {
                        st.running_safe += 1;
                        Start::Safe(exec, d)
                    }
                    Some(exec) => {
                        st.running_exclusive = true;
                        Start::Exclusive(exec, d)
                    }
                }
            };
            self.reschedule(&mut st);
            start
        };
        // What leaves the queue is dropped outside its lock: dropping an executor or a
        // message may run user code that sends to this agent.
        let mut gone = None;
        match start {
            Start::Bind(d) => {
                let exec = P::bind(d).map(Arc::new);
                let mut st = self.state.lock();
                st.exec = exec;
                st.running_exclusive = false;
                self.reschedule(&mut st);
            }
            Start::Safe(exec, d) => {
                P::run_safe(&exec, d);
                drop(exec);
                let mut st = self.state.lock();
                st.running_safe -= 1;
                self.reschedule(&mut st);
            }
            Start::Exclusive(exec, d) => {
                let finished = P::run_exclusive(&exec, d);
                drop(exec);
                let mut st = self.state.lock();
                if finished {
                    gone = st.exec.take();
                }
                st.running_exclusive = false;
                self.reschedule(&mut st);
            }
            Start::Drop(d) => self.proto.drop_unrun(d),
        }
        if let Some(exec) = gone {
            P::finished(exec);
        }
    }
}

impl<P: Protocol> Drop for AdvQueue<P> {
    /// What is still queued when the queue goes (its pool stopped first, or it was pushed
    /// after the agent finished) is dropped as step 4 drops it.
    fn drop(&mut self) {
        let demands = std::mem::take(&mut self.state.lock().demands);
        for d in demands {
            self.proto.drop_unrun(d);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::{AdvQueue, Protocol};
    use crate::sync::Mutex;

    #[derive(Debug)]
    enum D {
        Bind,
        Safe(usize),
        Exclusive(usize),
        Finish,
    }

    #[derive(Default)]
    struct Exec {
        safe_running: AtomicUsize,
        exclusive_running: AtomicBool,
        ran: Mutex<Vec<usize>>,
    }

    struct Model {
        ready: Arc<Mutex<VecDeque<Arc<AdvQueue<Model>>>>>,
    }

    impl Protocol for Model {
        type Demand = (D, Option<Exec>);
        type Exec = Exec;
        fn is_bind(d: &Self::Demand) -> bool {
            matches!(d.0, D::Bind)
        }
        fn bind(d: Self::Demand) -> Option<Exec> {
            d.1
        }
        fn is_safe(_: &Exec, d: &Self::Demand) -> bool {
            matches!(d.0, D::Safe(_))
        }
        fn run_safe(exec: &Exec, d: Self::Demand) {
            assert!(!exec.exclusive_running.load(Ordering::SeqCst));
            exec.safe_running.fetch_add(1, Ordering::SeqCst);
            if let D::Safe(n) = d.0 {
                exec.ran.lock().push(n);
            }
            assert!(!exec.exclusive_running.load(Ordering::SeqCst));
            exec.safe_running.fetch_sub(1, Ordering::SeqCst);
        }
        fn run_exclusive(exec: &Exec, d: Self::Demand) -> bool {
            assert_eq!(exec.safe_running.load(Ordering::SeqCst), 0);
            assert!(!exec.exclusive_running.swap(true, Ordering::SeqCst));
            let finished = match d.0 {
                D::Exclusive(n) => {
                    exec.ran.lock().push(n);
                    false
                }
                D::Finish => true,
                _ => unreachable!("classified as exclusive"),
            };
            assert_eq!(exec.safe_running.load(Ordering::SeqCst), 0);
            exec.exclusive_running.store(false, Ordering::SeqCst);
            finished
        }
        fn make_ready(&self, q: Arc<AdvQueue<Self>>) {
            self.ready.lock().push_back(q);
        }
    }

    /// Two workers serve the ready list while a sender pushes; afterwards the main thread
    /// serves what is left. Returns the demand numbers run, in order.
    fn run(demands_before: Vec<D>, demands_sent: Vec<D>) -> Vec<usize> {
        let ready = Arc::new(Mutex::new(VecDeque::new()));
        let q = AdvQueue::new(Model {
            ready: ready.clone(),
        });
        for d in demands_before {
            let exec = matches!(d, D::Bind).then(Exec::default);
            q.push((d, exec));
        }
        let sender = {
            let q = q.clone();
            loom::thread::spawn(move || {
                for d in demands_sent {
                    q.push((d, None));
                }
            })
        };
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let ready = ready.clone();
                loom::thread::spawn(move || {
                    for _ in 0..3 {
                        let next = ready.lock().pop_front();
                        match next {
                            Some(q) => q.serve(),
                            None => loom::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        sender.join().unwrap();
        for w in workers {
            w.join().unwrap();
        }
        loop {
            let next = ready.lock().pop_front();
            match next {
                Some(q) => q.serve(),
                None => break,
            }
        }
        assert_eq!(q.len(), 0, "a startable demand was left unscheduled");
        let st = q.state.lock();
        st.exec
            .as_ref()
            .map(|e| e.ran.lock().clone())
            .unwrap_or_default()
    }

    #[test]
    fn start_is_not_lost_while_the_executor_is_being_installed() {
        loom::model(|| {
            let ran = run(vec![D::Bind, D::Exclusive(0)], vec![D::Safe(1), D::Safe(2)]);
            assert_eq!(ran.len(), 3, "ran {ran:?}");
            assert_eq!(ran[0], 0, "the first demand after Bind runs first");
        });
    }

    #[test]
    fn exclusive_demands_run_alone_and_in_order() {
        loom::model(|| {
            let ran = run(
                vec![D::Bind, D::Safe(0), D::Safe(1)],
                vec![D::Exclusive(2), D::Safe(3)],
            );
            assert_eq!(ran.len(), 4, "ran {ran:?}");
            // Demands start in FIFO order; thread-safe ones may finish out of order.
            let pos = |n| ran.iter().position(|&x| x == n).unwrap();
            assert!(
                pos(2) > pos(0) && pos(2) > pos(1) && pos(3) > pos(2),
                "{ran:?}"
            );
        });
    }

    #[test]
    fn demands_after_finish_are_dropped_and_nothing_before_it() {
        loom::model(|| {
            let ready = Arc::new(Mutex::new(VecDeque::new()));
            let q = AdvQueue::new(Model {
                ready: ready.clone(),
            });
            q.push((D::Bind, Some(Exec::default())));
            q.push((D::Safe(0), None));
            let w = {
                let ready = ready.clone();
                loom::thread::spawn(move || {
                    let next = ready.lock().pop_front();
                    if let Some(q) = next {
                        q.serve();
                    }
                })
            };
            q.push((D::Finish, None));
            w.join().unwrap();
            loop {
                let next = ready.lock().pop_front();
                match next {
                    Some(q) => q.serve(),
                    None => break,
                }
            }
            assert_eq!(q.len(), 0);
            assert!(q.state.lock().exec.is_none(), "Finish ran last");
        });
    }
}
