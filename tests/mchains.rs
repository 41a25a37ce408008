//! Message chains: overflow reactions, close modes, receive conditions, select, hooks.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::mchain::{
    receive, receive_case, select, send_case, CloseMode, Handlers, MChain, MChainParams,
    OverflowReaction, ReceiveParams, ReceiveStatus, SelectParams,
};
use agentbox::prelude::*;
use agentbox::{send_delayed, SendError, SubscribeError};
use common::{drain_u32, with_env, PATIENCE};

fn fill(chain: &MChain, n: u32) -> Vec<Result<(), SendError>> {
    (0..n).map(|i| send(&chain.as_mbox(), i)).collect()
}

#[test]
fn drop_newest_keeps_the_first_messages() {
    with_env(|env| {
        let chain =
            env.create_mchain(MChainParams::bounded(3).overflow(OverflowReaction::DropNewest));
        assert!(fill(&chain, 5).iter().all(Result::is_ok));
        assert_eq!(drain_u32(&chain), [0, 1, 2]);
    });
}

#[test]
fn remove_oldest_keeps_the_last_messages() {
    with_env(|env| {
        let chain =
            env.create_mchain(MChainParams::bounded(3).overflow(OverflowReaction::RemoveOldest));
        assert!(fill(&chain, 5).iter().all(Result::is_ok));
        assert_eq!(drain_u32(&chain), [2, 3, 4]);
    });
}

#[test]
fn error_refuses_the_messages_that_do_not_fit() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::bounded(3).overflow(OverflowReaction::Error));
        let results = fill(&chain, 5);
        assert!(results[..3].iter().all(Result::is_ok));
        assert!(results[3..]
            .iter()
            .all(|r| matches!(r, Err(SendError::ChainFull { .. }))));
        assert_eq!(drain_u32(&chain), [0, 1, 2]);
    });
}

#[test]
fn a_waiting_sender_gets_in_when_a_reader_makes_room() {
    with_env(|env| {
        let chain = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(PATIENCE)
                .overflow(OverflowReaction::Error),
        );
        chain.send(0u32).unwrap();
        let c = chain.clone();
        let reader = std::thread::spawn(move || {
            // Reads both: the second only fits after the first is taken.
            let mut got = Vec::new();
            receive(
                &c,
                ReceiveParams::new().handle_n(2).total_time(PATIENCE),
                &mut Handlers::new().on(|v: &u32| got.push(*v)),
            );
            got
        });
        chain.send(1u32).unwrap(); // waits for room, then succeeds
        assert_eq!(reader.join().unwrap(), [0, 1]);
    });
}

#[test]
fn a_wait_that_times_out_applies_the_overflow_reaction() {
    with_env(|env| {
        let chain = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(Duration::from_millis(20))
                .overflow(OverflowReaction::Error),
        );
        chain.send(0u32).unwrap();
        let start = Instant::now();
        assert!(matches!(chain.send(1u32), Err(SendError::ChainFull { .. })));
        assert!(start.elapsed() >= Duration::from_millis(20));
    });
}

#[test]
fn close_drop_content_empties_close_retain_content_lets_readers_finish() {
    with_env(|env| {
        let dropping = env.create_mchain(MChainParams::unbounded());
        fill(&dropping, 3);
        dropping.close(CloseMode::DropContent);
        assert!(dropping.is_closed());
        assert_eq!(drain_u32(&dropping), Vec::<u32>::new());
        assert!(matches!(
            dropping.send(9u32),
            Err(SendError::ChainClosed { .. })
        ));

        let retaining = env.create_mchain(MChainParams::unbounded());
        fill(&retaining, 3);
        retaining.close(CloseMode::RetainContent);
        let mut got = Vec::new();
        let r = receive(
            &retaining,
            ReceiveParams::new(), // no condition: until closed
            &mut Handlers::new().on(|v: &u32| got.push(*v)),
        );
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(r.status, ReceiveStatus::Closed);
    });
}

#[test]
fn close_wakes_a_blocked_reader() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let c = chain.clone();
        let reader = std::thread::spawn(move || {
            receive(&c, ReceiveParams::new(), &mut Handlers::new()).status
        });
        std::thread::sleep(Duration::from_millis(10));
        chain.close(CloseMode::DropContent);
        assert_eq!(reader.join().unwrap(), ReceiveStatus::Closed);
    });
}

#[test]
fn receive_counts_handled_and_extracted_separately() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        for i in 0..6u32 {
            chain.send(i).unwrap();
            chain.send("no handler").unwrap();
        }
        let r = receive(
            &chain,
            ReceiveParams::new().extract_n(3),
            &mut Handlers::new().on(|_: &u32| {}),
        );
        assert_eq!(
            (r.extracted, r.handled, r.status),
            (3, 2, ReceiveStatus::Completed)
        );
        let r = receive(
            &chain,
            ReceiveParams::new().handle_n(2),
            &mut Handlers::new().on(|_: &u32| {}),
        );
        // Left: "x", 2, "x", 3, "x", ... -> handles 2 and 3, extracting 4.
        assert_eq!((r.extracted, r.handled), (4, 2));
        let mut seen = 0;
        let r = receive(
            &chain,
            ReceiveParams::new().stop_on(|| false).no_wait(),
            &mut Handlers::new().on(|_: &u32| seen += 1),
        );
        assert_eq!(
            (r.extracted, r.handled, r.status),
            (5, 2, ReceiveStatus::EmptyTimeout)
        );
        assert_eq!(seen, 2);
    });
}

#[test]
fn receive_stops_on_its_predicate_and_on_total_time() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        for i in 0..10u32 {
            chain.send(i).unwrap();
        }
        let seen = std::cell::Cell::new(0);
        let r = receive(
            &chain,
            ReceiveParams::new().stop_on(|| seen.get() == 4),
            &mut Handlers::new().on(|_: &u32| seen.set(seen.get() + 1)),
        );
        assert_eq!((r.handled, r.status), (4, ReceiveStatus::Stopped));
        let empty = env.create_mchain(MChainParams::unbounded());
        let r = receive(
            &empty,
            ReceiveParams::new().total_time(Duration::from_millis(20)),
            &mut Handlers::new(),
        );
        assert_eq!(r.status, ReceiveStatus::TotalTimeout);
    });
}

#[test]
fn select_serves_several_chains_and_send_cases() {
    with_env(|env| {
        let a = env.create_mchain(MChainParams::unbounded());
        let b = env.create_mchain(MChainParams::unbounded());
        let out = env.create_mchain(MChainParams::bounded(1));
        out.send(100u32).unwrap(); // full: the send case must wait for room
        let (a2, b2, out2) = (a.clone(), b.clone(), out.clone());
        let producer = std::thread::spawn(move || {
            a2.send(1u32).unwrap();
            b2.send("two").unwrap();
            // Makes room in `out`.
            let mut got = Vec::new();
            receive(
                &out2,
                ReceiveParams::new().handle_n(2).total_time(PATIENCE),
                &mut Handlers::new().on(|v: &u32| got.push(*v)),
            );
            got
        });
        let mut log = Vec::new();
        let mut sent = 0;
        {
            let log = std::cell::RefCell::new(&mut log);
            let r = select(
                SelectParams::new().handle_n(3).total_time(PATIENCE),
                &mut [
                    receive_case(
                        &a,
                        Handlers::new().on(|v: &u32| log.borrow_mut().push(format!("a {v}"))),
                    ),
                    receive_case(
                        &b,
                        Handlers::new().on(|s: &&str| log.borrow_mut().push(format!("b {s}"))),
                    ),
                    send_case(&out, 200u32, || sent += 1),
                ],
            );
            assert_eq!(
                (r.handled, r.sent, r.status),
                (2, 1, ReceiveStatus::Completed)
            );
        }
        assert_eq!(sent, 1);
        log.sort();
        assert_eq!(log, ["a 1", "b two"]);
        assert_eq!(producer.join().unwrap(), [100, 200]);
    });
}

#[test]
fn select_returns_closed_when_every_chain_is_closed() {
    with_env(|env| {
        let a = env.create_mchain(MChainParams::unbounded());
        let b = env.create_mchain(MChainParams::unbounded());
        a.send(1u32).unwrap();
        a.close(CloseMode::RetainContent);
        let b2 = b.clone();
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            b2.close(CloseMode::DropContent);
        });
        let mut n = 0;
        let r = select(
            SelectParams::new(),
            &mut [
                receive_case(&a, Handlers::new().on(|_: &u32| n += 1)),
                receive_case(&b, Handlers::new()),
            ],
        );
        closer.join().unwrap();
        assert_eq!((r.handled, r.status), (1, ReceiveStatus::Closed));
        assert_eq!(n, 1);
    });
}

#[test]
fn the_not_empty_hook_runs_on_each_empty_to_not_empty_transition() {
    with_env(|env| {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let chain = env.create_mchain(MChainParams::unbounded().not_empty_notificator(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        fill(&chain, 3);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drain_u32(&chain);
        fill(&chain, 2);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn timer_deliveries_into_a_full_waiting_chain_never_block_the_timer_thread() {
    with_env(|env| {
        let full = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(Duration::from_secs(3600))
                .overflow(OverflowReaction::DropNewest),
        );
        full.send(0u32).unwrap();
        let other = env.create_mchain(MChainParams::unbounded());
        send_delayed(&full.as_mbox(), Duration::ZERO, 1u32)
            .unwrap()
            .detach();
        send_delayed(&other.as_mbox(), Duration::from_millis(5), 2u32)
            .unwrap()
            .detach();
        // The second timer is delivered although the first hit a full chain.
        let mut got = Vec::new();
        let r = receive(
            &other,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on(|v: &u32| got.push(*v)),
        );
        assert_eq!(r.status, ReceiveStatus::Completed);
        assert_eq!(got, [2]);
        assert_eq!(drain_u32(&full), [0]);
    });
}

#[test]
fn agents_cannot_subscribe_to_a_chain_but_can_send_mutable_messages_into_it() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        struct Tries(Mbox);
        impl Agent for Tries {
            fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                let r = ctx
                    .subscribe(&self.0.clone())
                    .event(|_: &mut Self, _, _: &u32| {});
                assert!(matches!(r, Err(SubscribeError::NotSubscribable { .. })));
                Ok(())
            }
            fn on_start(&mut self, ctx: &mut Context<Self>) {
                send_mutable(&self.0, String::from("moved")).unwrap();
                ctx.deregister_coop(DeregReason::Normal);
            }
        }
        env.introduce_coop(|coop| {
            coop.add_agent(Tries(chain.as_mbox()));
        })
        .unwrap();
        let mut got = String::new();
        receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on_mutable(|s: String| got = s),
        );
        assert_eq!(got, "moved");
    });
}

/// `Duration::MAX` (or any wait too long for `Instant`) means "no deadline", never a panic.
#[test]
fn waits_too_long_for_an_instant_mean_no_deadline() {
    with_env(|env| {
        let chain = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(Duration::MAX)
                .overflow(OverflowReaction::Error),
        );
        chain.send(0u32).unwrap();
        let reader = {
            let chain = chain.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                let mut got = Vec::new();
                receive(
                    &chain,
                    ReceiveParams::new().handle_n(1).total_time(PATIENCE),
                    &mut Handlers::new().on(|v: &u32| got.push(*v)),
                );
                got
            })
        };
        chain.send(1u32).unwrap(); // waits for room as long as it takes
        let first = reader.join().unwrap();
        let mut got = Vec::new();
        let r = receive(
            &chain,
            ReceiveParams::new()
                .handle_n(1)
                .empty_timeout(Duration::MAX)
                .total_time(Duration::MAX),
            &mut Handlers::new().on(|v: &u32| got.push(*v)),
        );
        assert_eq!(r.status, ReceiveStatus::Completed);
        let mut all = [first, got].concat();
        all.sort();
        assert_eq!(all, [0, 1]);
    });
}
