//! The local deque's unsafe access, exercised as the worker uses it (run under miri:
//! `cargo +nightly miri test --lib dispatcher::serial`).

use std::collections::VecDeque;
use std::time::Duration;

use super::{SerialQueue, SERVING};
use crate::dispatcher::{AgentKey, Demand, EventQueue};
use crate::mbox::MboxId;
use crate::message::Message;

fn demand(n: u64) -> Demand {
    Demand::message(AgentKey::single(), MboxId(n), Message::placeholder())
}

fn mbox(d: &Demand) -> u64 {
    d.message_mbox(|| MboxId(0)).unwrap().0
}

/// A push on the worker goes to its deque, one from another thread to the channel, and
/// a later push on the worker moves the channel's demands in first (ordering rule 2):
/// the deque then holds them in the order they were pushed.
#[test]
fn pushes_on_and_off_the_worker_keep_their_order() {
    let queue = SerialQueue::new(false, Duration::ZERO);
    SERVING.set(queue.key());
    queue.push(demand(1));
    let remote = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            queue.push(demand(2));
            queue.push(demand(3));
        })
    };
    remote.join().unwrap();
    assert!(queue.channel_may_hold());
    queue.push(demand(4));
    let first = queue.local(VecDeque::pop_front).unwrap();
    queue.push(demand(5));
    let mut order = vec![mbox(&first)];
    while let Some(d) = queue.local(VecDeque::pop_front) {
        order.push(mbox(&d));
    }
    SERVING.set(0);
    assert_eq!(order, [1, 2, 3, 4, 5]);
    assert!(!queue.channel_may_hold());
}

/// What the worker's deque still holds when it stops is handed back whole, and a push
/// from a thread that serves no queue goes to the channel.
#[test]
fn a_stopped_worker_takes_its_deque_and_later_pushes_go_to_the_channel() {
    let queue = SerialQueue::new(false, Duration::ZERO);
    SERVING.set(queue.key());
    for n in 1..=40 {
        queue.push(demand(n));
    }
    SERVING.set(0);
    let leftover = queue.local(std::mem::take);
    assert_eq!(
        leftover.iter().map(mbox).collect::<Vec<_>>(),
        (1..=40).collect::<Vec<_>>()
    );
    queue.push(demand(41));
    assert!(queue.local(|q| q.is_empty()));
    assert_eq!(queue.rx.try_recv().map(|d| mbox(&d)).ok(), Some(41));
}

/// The message path through the local deque, as a user's program drives it (run under
/// miri, see `.ci/run`): a handler sends to an agent of its own worker, first into a
/// fresh deque (capacity 0), then in bursts that outgrow it again and again, and the
/// coop stops with messages still in flight. Every message arrives once, in order.
#[test]
fn handlers_sending_to_agents_of_their_own_worker_grow_the_deque_and_keep_order() {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use crate::prelude::*;

    struct Ping(u32);
    struct Pong(u32);
    struct Hello(Mbox);
    struct Ponger {
        pinger: Option<Mbox>,
    }
    struct Pinger {
        ponger: Mbox,
        seen: Arc<Mutex<Vec<u32>>>,
    }
    // Bursts of 1, 2, 4, … 64 pings: each outgrows the deque the last one left.
    const BURSTS: u32 = 7;
    impl Agent for Ponger {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe_self()
                .event(|a: &mut Self, _, h: &Hello| a.pinger = Some(h.0.clone()))?;
            ctx.subscribe_self().event(|a: &mut Self, _, p: &Ping| {
                send(a.pinger.as_ref().unwrap(), Pong(p.0)).unwrap();
            })?;
            Ok(())
        }
    }
    impl Agent for Pinger {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe_self()
                .event(|a: &mut Self, ctx: &mut Context<Self>, p: &Pong| {
                    let n = {
                        let mut seen = a.seen.lock();
                        seen.push(p.0);
                        seen.len() as u32
                    };
                    // A burst ends when its last pong is back: the next is twice as long.
                    if (n + 1).is_power_of_two() {
                        let burst = n + 1;
                        if burst == 1 << BURSTS {
                            // Stops with a last burst still queued: dropped, not run.
                            send(&a.ponger, Ping(u32::MAX)).unwrap();
                            ctx.deregister_coop(DeregReason::Normal);
                            return;
                        }
                        for i in 0..burst {
                            send(&a.ponger, Ping(n + i)).unwrap();
                        }
                    }
                })?;
            Ok(())
        }
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            send(&self.ponger, Hello(ctx.direct_mbox())).unwrap();
            send(&self.ponger, Ping(0)).unwrap();
        }
    }

    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    crate::test_support::within_patience(move || {
        Environment::launch(move |env| {
            env.introduce_coop(move |coop| {
                let ponger = coop.add_agent(Ponger { pinger: None });
                coop.add_agent(Pinger {
                    ponger,
                    seen: seen2,
                });
            })
            .unwrap();
        })
        .unwrap();
    });
    let seen = seen.lock();
    assert_eq!(*seen, (0..(1u32 << BURSTS) - 1).collect::<Vec<_>>());
}
