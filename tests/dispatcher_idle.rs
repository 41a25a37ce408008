//! Idle workers spin, then park (serial workers) or block (thread pools' workers): no
//! message is lost or reordered across the park/wake handshake, whatever the spin
//! threshold, under a storm of senders.

use std::sync::mpsc;
use std::time::Duration;

use agentbox::dispatcher::{active_obj, adv_thread_pool, one_thread, thread_pool, Binder};
use agentbox::prelude::*;

const SENDERS: u64 = 8;
const PER_SENDER: u64 = 5_000;

/// One message of a sender's sequence.
struct Seq {
    sender: u64,
    n: u64,
}

/// Counts the messages and checks each sender's order; reports when all came.
struct Collector {
    next: Vec<u64>,
    got: u64,
    done: mpsc::Sender<Vec<u64>>,
}

impl Agent for Collector {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, s: &Seq| {
            let next = &mut a.next[s.sender as usize];
            assert_eq!(s.n, *next, "sender {}'s messages in send order", s.sender);
            *next += 1;
            a.got += 1;
            if a.got == SENDERS * PER_SENDER {
                let _ = a.done.send(a.next.clone());
            }
        })?;
        Ok(())
    }
}

/// Sends a storm from `SENDERS` threads, with pauses that let the worker fall idle and
/// park, and checks that every message arrived, in each sender's order.
fn storm(binder: Binder) {
    let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let target = wrapped
        .environment()
        .introduce_coop(|coop| {
            coop.set_binder(binder);
            coop.add_agent(Collector {
                next: vec![0; SENDERS as usize],
                got: 0,
                done: done_tx,
            })
        })
        .unwrap();
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let target = target.clone();
            std::thread::spawn(move || {
                for n in 0..PER_SENDER {
                    send(&target, Seq { sender, n }).unwrap();
                    if n % 1000 == 0 {
                        // Long enough for any spin threshold below to run out.
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    // Generous: a loaded machine is slow, but a lost wake-up never ends.
    let next = done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("every message handled (a lost wake-up leaves the worker parked)");
    assert_eq!(next, vec![PER_SENDER; SENDERS as usize]);
    wrapped.stop_then_join().unwrap();
}

#[test]
fn one_thread_parking_at_once_loses_no_wake_up() {
    let disp = one_thread::Builder::new()
        .spin_threshold(Duration::ZERO)
        .build()
        .unwrap();
    storm(disp.binder());
}

#[test]
fn one_thread_with_a_long_spin_loses_no_wake_up() {
    let disp = one_thread::Builder::new()
        .spin_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    storm(disp.binder());
}

#[test]
fn one_thread_with_the_default_spin_loses_no_wake_up() {
    storm(one_thread::Builder::new().build().unwrap().binder());
}

#[test]
fn active_obj_parking_at_once_loses_no_wake_up() {
    let disp = active_obj::Builder::new()
        .spin_threshold(Duration::ZERO)
        .build()
        .unwrap();
    storm(disp.binder());
}

#[test]
fn thread_pool_blocking_at_once_loses_no_wake_up() {
    let disp = thread_pool::Builder::new()
        .threads(3)
        .spin_threshold(Duration::ZERO)
        .build()
        .unwrap();
    storm(disp.binder());
}

#[test]
fn thread_pool_with_a_long_spin_loses_no_wake_up() {
    let disp = thread_pool::Builder::new()
        .threads(3)
        .spin_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    storm(disp.binder());
}

#[test]
fn adv_thread_pool_with_a_long_spin_loses_no_wake_up() {
    let disp = adv_thread_pool::Builder::new()
        .threads(2)
        .spin_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    storm(disp.binder());
}

/// Exact counts and order across spinning and parking. A lost wake-up would not hang an
/// elastic pool (its threads look for work at least once a second, to measure and tick),
/// so this checks delivery only; the fixed pools' tests above catch a lost wake-up.
#[test]
fn elastic_pools_with_a_long_spin_lose_no_wake_up() {
    let disp = thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .spin_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    storm(disp.binder());
    let disp = adv_thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .spin_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    storm(disp.binder());
}
