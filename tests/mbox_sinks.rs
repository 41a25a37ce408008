//! Message sinks and sink bindings: mbox → mchain, mbox → mbox, loops ending at depth 32,
//! rebinding, unbinding on drop, custom sinks, and the delivery mode passed along.

mod common;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use agentbox::mchain::{receive, Handlers, MChainParams, OverflowReaction, ReceiveParams};
use agentbox::prelude::*;
use agentbox::{
    send_delayed, DeliveryMode, Message, MessageSink, MultiSinkBinding, RedirectionDepth,
    SingleSinkBinding, Sink, SubscribeError,
};
use common::{drain_u32, with_env, within_patience, Log, PATIENCE};

#[test]
fn a_single_binding_takes_an_mbox_to_an_mchain_through_its_filter() {
    with_env(|env| {
        let feed = env.create_mbox();
        let chain = env.create_mchain(MChainParams::unbounded());
        let mut b = SingleSinkBinding::new();
        assert!(!b.has_binding());
        b.bind_with_filter(&feed, Sink::from(chain.as_mbox()), |n: &u32| {
            n.is_multiple_of(2)
        })
        .unwrap();
        assert!(b.has_binding());
        for n in 0..6u32 {
            send(&feed, n).unwrap();
        }
        assert_eq!(drain_u32(&chain), [0, 2, 4]);
        // Binding again (another sink) replaces the binding: the old sink gets nothing.
        let other = env.create_mchain(MChainParams::unbounded());
        b.bind::<u32>(&feed, Sink::from(other.as_mbox())).unwrap();
        send(&feed, 7u32).unwrap();
        assert_eq!(drain_u32(&chain), Vec::<u32>::new());
        assert_eq!(drain_u32(&other), [7]);
        // The same binding again, now without the filter: the filter goes.
        b.bind::<u32>(&feed, Sink::from(other.as_mbox())).unwrap();
        drop(b);
        send(&feed, 9u32).unwrap();
        assert_eq!(
            drain_u32(&other),
            Vec::<u32>::new(),
            "dropping the binding unbinds"
        );
        assert_eq!(env.drop_counts().no_subscribers, 1);
    });
}

#[test]
fn mbox_to_mbox_reaches_the_agents_of_the_second_mbox() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let (a, b) = (env.create_mbox(), env.create_mbox());
            let l2 = l.clone();
            let bb = b.clone();
            env.introduce_coop(move |coop| {
                coop.add_agent(common::Script::new(&l2).setup(move |_, ctx| {
                    ctx.subscribe(&bb)
                        .event(|s: &mut common::Script, _, n: &u32| {
                            s.log.push(format!("got {n}"))
                        })?;
                    Ok(())
                }));
            })
            .unwrap();
            let bindings = MultiSinkBinding::new();
            bindings.bind::<u32>(&a, Sink::from(b.clone())).unwrap();
            assert!(matches!(
                bindings.bind::<u32>(&a, Sink::from(b.clone())),
                Err(SubscribeError::Duplicate { .. })
            ));
            send(&a, 1u32).unwrap();
            send(&b, 2u32).unwrap();
            l.wait_for(2);
            bindings.unbind::<u32>(&a, &Sink::from(b.clone()));
            send(&a, 3u32).unwrap(); // no subscriber any more
            send(&b, 4u32).unwrap();
            l.wait_for(3);
            env.stop();
        })
        .unwrap();
        assert_eq!(log.get(), ["got 1", "got 2", "got 4"]);
    });
}

#[test]
fn a_loop_of_bindings_ends_at_redirection_depth_32() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        let counts = Arc::new(Mutex::new(None));
        let c = counts.clone();
        Environment::launch(move |env| {
            let (a, b) = (env.create_mbox(), env.create_mbox());
            let aa = a.clone();
            let l2 = l.clone();
            env.introduce_coop(move |coop| {
                coop.add_agent(common::Script::new(&l2).setup(move |_, ctx| {
                    ctx.subscribe(&aa)
                        .event(|s: &mut common::Script, _, _: &u32| s.log.push("hop".to_owned()))?;
                    Ok(())
                }));
            })
            .unwrap();
            let bindings = MultiSinkBinding::new();
            bindings.bind::<u32>(&a, Sink::from(b.clone())).unwrap();
            bindings.bind::<u32>(&b, Sink::from(a.clone())).unwrap();
            send(&a, 1u32).unwrap();
            // `a` delivers at depths 0, 2, …, 30 (16 times) and `b` at 1, 3, …, 31; the
            // 33rd delivery (depth 32) is refused and counted.
            l.wait_for(16);
            *c.lock() = Some(env.drop_counts());
            env.stop();
        })
        .unwrap();
        assert_eq!(log.len(), 16);
        assert_eq!(counts.lock().unwrap().redirection_depth, 1);
    });
}

#[test]
fn a_direct_mbox_takes_no_binding() {
    within_patience(|| {
        let result = Arc::new(Mutex::new(None));
        let r = result.clone();
        Environment::launch(move |env| {
            let chain = env.create_mchain(MChainParams::unbounded());
            let direct = env
                .introduce_coop(|coop| coop.add_agent(common::Script::new(&Log::new())))
                .unwrap();
            let mut b = SingleSinkBinding::new();
            *r.lock() = Some(b.bind::<u32>(&direct, Sink::from(chain.as_mbox())));
            assert!(!b.has_binding());
            env.stop();
        })
        .unwrap();
        assert!(matches!(
            result.lock().take(),
            Some(Err(SubscribeError::NotOwner { .. }))
        ));
    });
}

/// Records what it is given.
struct Recording(Mutex<Vec<(u32, RedirectionDepth, DeliveryMode)>>);

impl MessageSink for Recording {
    fn push(
        &self,
        _from: agentbox::MboxId,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) {
        // A timer's message travels in an envelope: look inside.
        let inside = msg.reveal(agentbox::Access::Handling);
        if let Some(n) = inside.and_then(|m| m.downcast_ref::<u32>()) {
            self.0.lock().push((*n, depth, mode));
        }
    }
}

#[test]
fn a_custom_sink_gets_the_message_its_depth_and_the_delivery_mode() {
    with_env(|env| {
        let feed = env.create_mbox();
        let rec = Arc::new(Recording(Mutex::new(Vec::new())));
        let mut b = SingleSinkBinding::new();
        b.bind::<u32>(&feed, Sink::custom(rec.clone())).unwrap();
        send(&feed, 1u32).unwrap();
        feed.deliver_with(Message::new(2u32), 3, DeliveryMode::Nonblocking)
            .unwrap();
        send_delayed(&feed, Duration::ZERO, 3u32).unwrap().detach();
        let until = std::time::Instant::now() + PATIENCE;
        while rec.0.lock().len() < 3 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            *rec.0.lock(),
            [
                (1, 0, DeliveryMode::Ordinary),
                (2, 3, DeliveryMode::Nonblocking),
                // Timers deliver without ever blocking the timer thread.
                (3, 0, DeliveryMode::Nonblocking),
            ]
        );
    });
}

#[test]
fn a_timer_through_a_binding_never_waits_on_a_full_chain() {
    with_env(|env| {
        // A full chain whose senders would wait a minute for room.
        let full = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(PATIENCE)
                .overflow(OverflowReaction::DropNewest),
        );
        full.send(0u32).unwrap();
        let feed = env.create_mbox();
        let mut b = SingleSinkBinding::new();
        b.bind::<u32>(&feed, Sink::from(full.as_mbox())).unwrap();
        send_delayed(&feed, Duration::ZERO, 1u32).unwrap().detach();
        // The timer thread is not stuck in that wait: a later timer still fires.
        let probe = env.create_mchain(MChainParams::unbounded());
        send_delayed(&probe.as_mbox(), Duration::from_millis(1), 2u32)
            .unwrap()
            .detach();
        let mut got = Vec::new();
        receive(
            &probe,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE / 2),
            &mut Handlers::new().on(|n: &u32| got.push(*n)),
        );
        assert_eq!(got, [2]);
        assert_eq!(
            drain_u32(&full),
            [0],
            "the timer's message was dropped, not waited for"
        );
    });
}

#[test]
fn a_message_a_sink_mbox_refuses_is_counted() {
    with_env(|env| {
        let feed = env.create_mbox();
        let closed = env.create_mchain(MChainParams::unbounded());
        closed.close(agentbox::mchain::CloseMode::DropContent);
        let mut b = SingleSinkBinding::new();
        b.bind::<u32>(&feed, Sink::from(closed.as_mbox())).unwrap();
        send(&feed, 1u32).unwrap();
        assert_eq!(env.drop_counts().refused, 1);
        // A mutable message is never bound to a multi-consumer sink mbox.
        let unique = env.create_unique_subscribers_mbox();
        let mut m = SingleSinkBinding::new();
        assert!(matches!(
            m.bind_mutable::<u32>(&unique, Sink::from(env.create_mbox())),
            Err(SubscribeError::MutableFromMultiConsumer { .. })
        ));
        // Mutable bindings are undone by their own unbind.
        let chain = env.create_mchain(MChainParams::unbounded());
        let bindings = MultiSinkBinding::new();
        bindings
            .bind_mutable::<u32>(&unique, Sink::from(chain.as_mbox()))
            .unwrap();
        unique.send_mutable(1u32).unwrap();
        assert_eq!(chain.len(), 1);
        bindings.unbind_mutable::<u32>(&unique, &Sink::from(chain.as_mbox()));
        unique.send_mutable(2u32).unwrap();
        assert_eq!(chain.len(), 1);
    });
}
