//! Non-delivery (YDB's rules), dead letters, local services, the remote path.

mod actors_support;

use std::sync::mpsc::channel;
use std::time::Duration;

use actors_support::*;
use agentbox::actors::*;
use agentbox::prelude::*;
use agentbox::{ActorId, Quantity, StatsFinished};

const NOBODY: ActorId = ActorId::new(1, 999_999, 77);

#[test]
fn tracked_event_to_an_unknown_id_comes_back_undelivered_from_the_recipient() {
    bounded(tracked_event_to_an_unknown_id_comes_back_undelivered_from_the_recipient_body);
}

fn tracked_event_to_an_unknown_id_comes_back_undelivered_from_the_recipient_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let s = sys.register(recorder(tx)).unwrap();
    let flags = (EventFlags::TRACK_DELIVERY
        | EventFlags::SUBSCRIBE_ON_SESSION
        | EventFlags::GENERATE_UNSURE_UNDELIVERED
        | EventFlags::USE_SUB_CHANNEL)
        .with_channel(5);
    sys.send_with(NOBODY, s, Num(1), flags, 42);
    let got = take(&rx, 1).remove(0);
    assert_eq!(got.event_type, EV_UNDELIVERED);
    assert_eq!((got.sender, got.recipient, got.cookie), (NOBODY, s, 42));
    assert_eq!(got.flags, EventFlags::USE_SUB_CHANNEL.with_channel(5));
    assert_eq!(
        got.undelivered,
        Some(Undelivered {
            source_type: Num::EVENT_TYPE,
            reason: UndeliveredReason::ActorUnknown,
            unsure: false,
        })
    );
    assert_eq!(
        take(&dead, 1)[0],
        DeadLetter {
            recipient: NOBODY,
            sender: s,
            event_type: Num::EVENT_TYPE,
            cookie: 42,
            reason: DeadLetterReason::ActorUnknown,
        }
    );
    let st = sys.stats();
    assert_eq!((st.dead_letters, st.undelivered, st.forwarded), (1, 1, 0));
    w.stop_then_join().unwrap();
}

#[test]
fn forward_on_nondelivery_goes_to_the_target_with_its_flags_cleared() {
    bounded(forward_on_nondelivery_goes_to_the_target_with_its_flags_cleared_body);
}

fn forward_on_nondelivery_goes_to_the_target_with_its_flags_cleared_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let (tx, rx) = channel();
    let target = sys.register(recorder(tx)).unwrap();
    let origin = ActorId::new(1, 1, 1);
    let h = EventHandle::new(NOBODY, origin, Num(3))
        .with_flags((EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION).with_channel(2))
        .with_cookie(3)
        .forward_on_nondelivery(target);
    sys.send_handle(h);
    let got = take(&rx, 1).remove(0);
    assert_eq!(
        (got.by, got.recipient, got.sender, got.cookie, got.num),
        (target, target, origin, 3, Some(3))
    );
    assert_eq!(got.flags, EventFlags::TRACK_DELIVERY.with_channel(2));
    let st = sys.stats();
    assert_eq!((st.dead_letters, st.undelivered, st.forwarded), (0, 0, 1));
    w.stop_then_join().unwrap();
}

#[test]
fn a_forward_target_that_is_gone_too_falls_back_to_track_delivery() {
    bounded(a_forward_target_that_is_gone_too_falls_back_to_track_delivery_body);
}

fn a_forward_target_that_is_gone_too_falls_back_to_track_delivery_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let s = sys.register(recorder(tx)).unwrap();
    let gone = ActorId::new(1, 888_888, 3);
    let h = EventHandle::new(NOBODY, s, Num(4))
        .with_flags(EventFlags::TRACK_DELIVERY)
        .with_cookie(11)
        .forward_on_nondelivery(gone);
    sys.send_handle(h);
    let got = take(&rx, 1).remove(0);
    assert_eq!(
        (got.sender, got.cookie, got.event_type),
        (gone, 11, EV_UNDELIVERED)
    );
    assert_eq!(take(&dead, 1)[0].recipient, gone);
    let st = sys.stats();
    assert_eq!((st.dead_letters, st.undelivered, st.forwarded), (1, 1, 1));
    w.stop_then_join().unwrap();
}

#[test]
fn an_untracked_event_to_an_unknown_id_is_a_dead_letter_and_nothing_panics() {
    bounded(an_untracked_event_to_an_unknown_id_is_a_dead_letter_and_nothing_panics_body);
}

fn an_untracked_event_to_an_unknown_id_is_a_dead_letter_and_nothing_panics_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    sys.send_with(
        NOBODY,
        ActorId::new(1, 2, 3),
        Num(5),
        EventFlags::empty(),
        6,
    );
    sys.send(ActorId::EMPTY, Num(6));
    let d = take(&dead, 2);
    assert_eq!(
        d[0],
        DeadLetter {
            recipient: NOBODY,
            sender: ActorId::new(1, 2, 3),
            event_type: Num::EVENT_TYPE,
            cookie: 6,
            reason: DeadLetterReason::ActorUnknown,
        }
    );
    assert_eq!(
        (d[1].recipient, d[1].reason),
        (ActorId::EMPTY, DeadLetterReason::ActorUnknown)
    );
    assert_eq!(sys.stats().dead_letters, 2);
    w.stop_then_join().unwrap();
}

/// The victim holds its mailbox until the test has queued everything behind the `Hold`,
/// then passes away; `shared` puts it on its parent's mailbox (the parent stays).
fn queued_events_get_the_treatment(shared: bool) {
    let w = env();
    let env = w.environment().clone();
    let sys = ActorSystem::start(
        &env,
        SystemSetup::new(1)
            .pool(PoolConfig::new("victims"))
            .pool(PoolConfig::new("watchers")),
    )
    .unwrap();
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let (fwd_tx, fwd_rx) = channel();
    let s = sys.register_on("watchers", recorder(tx)).unwrap();
    let r = sys.register_on("watchers", recorder(fwd_tx)).unwrap();
    let (go_tx, go_rx) = channel::<()>();
    let (held_tx, held_rx) = channel();
    let victim_actor = Scripted::new(move |ctx, ev| {
        if ev.is::<Hold>() {
            let _ = held_tx.send(());
            go_rx.recv_timeout(PATIENCE).unwrap();
            ctx.pass_away().unwrap();
        }
        Handled::Yes
    });
    let victim = if shared {
        let (id_tx, id_rx) = channel();
        sys.register_on(
            "victims",
            Scripted::new(|_, _| Handled::Yes).boot(move |_, ctx, _| {
                let _ = id_tx.send(ctx.register_with_same_mailbox(victim_actor).unwrap());
            }),
        )
        .unwrap();
        id_rx.recv_timeout(PATIENCE).unwrap()
    } else {
        sys.register_on("victims", victim_actor).unwrap()
    };
    sys.send(victim, Hold);
    held_rx.recv_timeout(PATIENCE).unwrap();
    // Queued behind the Hold: 5 tracked, 3 plain, 1 forwarded on non-delivery.
    for i in 1..=5 {
        sys.send_with(
            victim,
            s,
            Num(i),
            EventFlags::TRACK_DELIVERY.with_channel(1),
            i,
        );
    }
    for i in 6..=8 {
        sys.send_with(victim, s, Num(i), EventFlags::empty(), i);
    }
    sys.send_handle(
        EventHandle::new(victim, s, Num(9))
            .with_cookie(9)
            .forward_on_nondelivery(r),
    );
    go_tx.send(()).unwrap();

    let back = take(&rx, 5);
    for (i, b) in back.iter().enumerate() {
        let i = i as u64 + 1;
        assert_eq!(
            (b.event_type, b.sender, b.recipient, b.cookie),
            (EV_UNDELIVERED, victim, s, i)
        );
        assert_eq!(b.flags, EventFlags::empty().with_channel(1));
        assert_eq!(
            b.undelivered.map(|u| (u.source_type, u.reason)),
            Some((Num::EVENT_TYPE, UndeliveredReason::ActorUnknown))
        );
    }
    let f = take(&fwd_rx, 1).remove(0);
    assert_eq!((f.by, f.sender, f.cookie, f.num), (r, s, 9, Some(9)));
    let d = take(&dead, 8);
    for (i, d) in d.iter().enumerate() {
        assert_eq!(
            *d,
            DeadLetter {
                recipient: victim,
                sender: s,
                event_type: Num::EVENT_TYPE,
                cookie: i as u64 + 1,
                reason: DeadLetterReason::PassedAway,
            }
        );
    }
    let st = sys.stats();
    assert_eq!((st.dead_letters, st.undelivered, st.forwarded), (8, 5, 1));
    none_left(&rx);
    w.stop_then_join().unwrap();
}

#[test]
fn events_queued_when_an_actor_passes_away_each_get_the_non_delivery_treatment() {
    bounded(events_queued_when_an_actor_passes_away_each_get_the_non_delivery_treatment_body);
}

fn events_queued_when_an_actor_passes_away_each_get_the_non_delivery_treatment_body() {
    queued_events_get_the_treatment(false);
}

#[test]
fn events_queued_for_a_same_mailbox_actor_that_passed_away_get_it_too() {
    bounded(events_queued_for_a_same_mailbox_actor_that_passed_away_get_it_too_body);
}

fn events_queued_for_a_same_mailbox_actor_that_passed_away_get_it_too_body() {
    queued_events_get_the_treatment(true);
}

#[test]
fn a_scheduled_event_for_an_actor_that_passed_away_is_a_dead_letter() {
    bounded(a_scheduled_event_for_an_actor_that_passed_away_is_a_dead_letter_body);
}

fn a_scheduled_event_for_an_actor_that_passed_away_is_a_dead_letter_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let a = sys
        .register(Scripted::new(|_, _| Handled::Yes).boot(|_, ctx, _| {
            ctx.schedule(Duration::from_millis(1), Wakeup { tag: 4 });
            ctx.pass_away().unwrap();
        }))
        .unwrap();
    let d = take(&dead, 1).remove(0);
    assert_eq!((d.recipient, d.sender, d.event_type), (a, a, EV_WAKEUP));
    assert!(matches!(d.reason, DeadLetterReason::PassedAway), "{d:?}");
    w.stop_then_join().unwrap();
}

#[test]
fn a_remote_recipient_without_an_interconnect_is_disconnected() {
    bounded(a_remote_recipient_without_an_interconnect_is_disconnected_body);
}

fn a_remote_recipient_without_an_interconnect_is_disconnected_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let s = sys.register(recorder(tx)).unwrap();
    let remote = ActorId::new(9, 1, 1);
    assert_eq!(
        sys.route(remote),
        Route::Remote {
            node_id: 9,
            proxy: None
        }
    );
    let remote_svc = ActorId::service(9, b"svc").unwrap();
    assert_eq!(
        sys.route(remote_svc),
        Route::Remote {
            node_id: 9,
            proxy: None
        }
    );
    sys.send_with(remote, s, Num(1), EventFlags::TRACK_DELIVERY, 12);
    let got = take(&rx, 1).remove(0);
    assert_eq!((got.sender, got.cookie), (remote, 12));
    assert_eq!(
        got.undelivered.map(|u| u.reason),
        Some(UndeliveredReason::Disconnected)
    );
    let d = take(&dead, 1).remove(0);
    assert_eq!(
        (d.recipient, d.reason),
        (remote, DeadLetterReason::Disconnected)
    );
    w.stop_then_join().unwrap();
}

#[test]
fn a_remote_recipient_goes_to_the_interconnect_proxy_service_of_its_node() {
    bounded(a_remote_recipient_goes_to_the_interconnect_proxy_service_of_its_node_body);
}

fn a_remote_recipient_goes_to_the_interconnect_proxy_service_of_its_node_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let (tx, rx) = channel();
    let proxy = sys.register(recorder(tx)).unwrap();
    assert_eq!(
        sys.register_local_service(ActorId::interconnect_proxy(9), proxy),
        Ok(None)
    );
    let remote = ActorId::new(9, 1, 1);
    assert_eq!(
        sys.route(remote),
        Route::Remote {
            node_id: 9,
            proxy: Some(proxy)
        }
    );
    sys.send_with(
        remote,
        ActorId::new(1, 5, 5),
        Num(1),
        EventFlags::TRACK_DELIVERY,
        3,
    );
    let got = take(&rx, 1).remove(0);
    assert_eq!(
        (got.by, got.recipient, got.rewrite, got.cookie),
        (proxy, remote, proxy, 3)
    );
    assert_eq!(sys.stats().dead_letters, 0);
    w.stop_then_join().unwrap();
}

#[test]
fn local_services_register_look_up_replace_and_clear_by_all_sixteen_bytes() {
    bounded(local_services_register_look_up_replace_and_clear_by_all_sixteen_bytes_body);
}

fn local_services_register_look_up_replace_and_clear_by_all_sixteen_bytes_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 4);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let a = sys.register(recorder(tx.clone())).unwrap();
    let b = sys.register(recorder(tx)).unwrap();
    let local = ActorId::service(0, b"echo").unwrap();
    let own = ActorId::service(4, b"echo").unwrap();
    assert_eq!(sys.register_local_service(local, a), Ok(None));
    assert_eq!(sys.lookup_local_service(local), Some(a));
    assert_eq!(
        sys.lookup_local_service(own),
        None,
        "node is part of the key"
    );
    assert_eq!(sys.route(local), Route::Local(a));

    sys.send(local, Num(1));
    let got = take(&rx, 1).remove(0);
    assert_eq!((got.by, got.recipient, got.rewrite), (a, local, a));
    sys.send(own, Num(2));
    let d = take(&dead, 1).remove(0);
    assert_eq!(
        (d.recipient, d.reason),
        (own, DeadLetterReason::ActorUnknown)
    );

    assert_eq!(sys.register_local_service(local, b), Ok(Some(a)), "replace");
    sys.send(local, Num(3));
    assert_eq!(take(&rx, 1)[0].by, b);
    assert!(!sys.clear_local_service_if(local, a));
    assert_eq!(sys.clear_local_service(local), Some(b));
    assert_eq!(sys.lookup_local_service(local), None);
    sys.send(local, Num(4));
    assert_eq!(take(&dead, 1)[0].recipient, local);

    assert_eq!(
        sys.register_local_service(a, b),
        Err(ServiceError::NotAService(a))
    );
    assert_eq!(
        sys.register_local_service(local, own),
        Err(ServiceError::BadTarget(own))
    );
    assert_eq!(
        sys.register_local_service(local, ActorId::EMPTY),
        Err(ServiceError::BadTarget(ActorId::EMPTY))
    );
    w.stop_then_join().unwrap();
}

#[test]
fn a_service_whose_actor_is_gone_does_not_deliver() {
    bounded(a_service_whose_actor_is_gone_does_not_deliver_body);
}

fn a_service_whose_actor_is_gone_does_not_deliver_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let a = sys.register(recorder(tx)).unwrap();
    let svc = ActorId::service(0, b"short").unwrap();
    sys.register_local_service(svc, a).unwrap();
    sys.send(a, Poison);
    take(&rx, 1);
    wait_until("gone", || !sys.is_registered(a));
    assert_eq!(sys.route(svc), Route::Unknown);
    sys.send(svc, Num(1));
    let d = take(&dead, 1).remove(0);
    assert_eq!(
        (d.recipient, d.reason),
        (svc, DeadLetterReason::ActorUnknown)
    );
    w.stop_then_join().unwrap();
}

#[test]
fn an_unhandled_event_is_a_dead_letter() {
    bounded(an_unhandled_event_is_a_dead_letter_body);
}

fn an_unhandled_event_is_a_dead_letter_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let a = sys.register(Scripted::new(|_, ev| ev.unhandled())).unwrap();
    sys.send_with(a, ActorId::EMPTY, Num(1), EventFlags::TRACK_DELIVERY, 8);
    let d = take(&dead, 1).remove(0);
    assert_eq!(
        d,
        DeadLetter {
            recipient: a,
            sender: ActorId::EMPTY,
            event_type: Num::EVENT_TYPE,
            cookie: 8,
            reason: DeadLetterReason::Unhandled,
        }
    );
    assert_eq!(sys.stats().undelivered, 0, "delivered, even if not handled");
    w.stop_then_join().unwrap();
}

/// Collects the `ydb/node1` quantities of one distribution.
struct StatsProbe {
    tx: std::sync::mpsc::Sender<Vec<Quantity>>,
    batch: Vec<Quantity>,
}
impl Agent for StatsProbe {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let m = ctx.environment().stats_controller().mbox();
        ctx.subscribe(&m).event(|a: &mut Self, _, q: &Quantity| {
            if q.prefix.starts_with("ydb/node1") {
                a.batch.push(q.clone());
            }
        })?;
        ctx.subscribe(&m)
            .event(|a: &mut Self, _, _: &StatsFinished| {
                let _ = a.tx.send(std::mem::take(&mut a.batch));
            })?;
        Ok(())
    }
}

#[test]
fn dead_letters_and_pool_figures_reach_the_stats_controller() {
    bounded(dead_letters_and_pool_figures_reach_the_stats_controller_body);
}

fn dead_letters_and_pool_figures_reach_the_stats_controller_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let (tx, _rx) = channel();
    sys.register(recorder(tx)).unwrap();
    for _ in 0..3 {
        sys.send(NOBODY, Num(0));
    }
    wait_until("the bootstrap ran", || {
        sys.pool_stats(0).unwrap().events_handled == 1
    });
    let (qtx, qrx) = channel();
    env.introduce_coop(|c| {
        c.add_agent(StatsProbe {
            tx: qtx,
            batch: Vec::new(),
        });
    })
    .unwrap();
    let stats = env.stats_controller();
    stats.set_distribution_period(Duration::from_millis(10));
    stats.turn_on();
    let batch = qrx.recv_timeout(PATIENCE).unwrap();
    stats.turn_off();
    let value = |p: &str, s: &str| {
        batch
            .iter()
            .find(|q| q.prefix == p && q.suffix == s)
            .map(|q| q.value)
    };
    assert_eq!(value("ydb/node1", "dead_letters.count"), Some(3));
    assert_eq!(value("ydb/node1", "undelivered.count"), Some(0));
    assert_eq!(value("ydb/node1/pool/User", "actor.count"), Some(1));
    assert_eq!(value("ydb/node1/pool/User", "threads.count"), Some(1));
    assert_eq!(
        value("ydb/node1/pool/User", "events.handled"),
        Some(1),
        "the bootstrap"
    );
    w.stop_then_join().unwrap();
}

#[test]
fn events_queued_behind_a_stop_are_dead_letters_with_reason_shutdown() {
    bounded(events_queued_behind_a_stop_are_dead_letters_with_reason_shutdown_body);
}

fn events_queued_behind_a_stop_are_dead_letters_with_reason_shutdown_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let (held_tx, held_rx) = channel();
    let a = sys
        .register(Scripted::new(move |_, ev| {
            if ev.is::<Hold>() {
                let _ = held_tx.send(());
                go_rx.recv_timeout(PATIENCE).unwrap();
            }
            let _ = tx.send(ev.get::<Num>().map(|n| n.0));
            Handled::Yes
        }))
        .unwrap();
    sys.send(a, Hold);
    held_rx.recv_timeout(PATIENCE).unwrap();
    sys.send(a, Num(1));
    sys.stop();
    sys.send_with(a, ActorId::EMPTY, Num(2), EventFlags::empty(), 2);
    sys.send_with(a, ActorId::EMPTY, Num(3), EventFlags::empty(), 3);
    go_tx.send(()).unwrap();
    assert_eq!(
        take(&rx, 2),
        [None, Some(1)],
        "what was queued before the stop is handled"
    );
    let d = take(&dead, 2);
    for (d, cookie) in d.iter().zip([2, 3]) {
        assert_eq!(
            (d.recipient, d.cookie, d.reason),
            (a, cookie, DeadLetterReason::Shutdown)
        );
    }
    wait_until("gone", || !sys.is_registered(a));
    w.stop_then_join().unwrap();
}
