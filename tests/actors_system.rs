//! The actor system: ids and the table, bootstrap and become, pass away, register,
//! same-mailbox children, schedule, Poison, several nodes.

mod actors_support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

use actors_support::*;
use agentbox::actors::*;
use agentbox::{ActorId, ExceptionReaction};

#[test]
fn registered_ids_have_the_node_the_pool_the_next_local_id_and_the_slot_as_hint() {
    bounded(registered_ids_have_the_node_the_pool_the_next_local_id_and_the_slot_as_hint_body);
}

fn registered_ids_have_the_node_the_pool_the_next_local_id_and_the_slot_as_hint_body() {
    let w = env();
    let sys = system(w.environment(), 5);
    let (tx, _rx) = channel();
    let a = sys.register(recorder(tx.clone())).unwrap();
    let b = sys.register(recorder(tx)).unwrap();
    assert_eq!(a, ActorId::with_pool(5, 0, 100, 0));
    assert_eq!(b, ActorId::with_pool(5, 0, 101, 1));
    assert_eq!(sys.route(a), Route::Local(a));
    // Node 0 means "this node": the same actor.
    assert_eq!(
        sys.route(ActorId::new(0, 100, 0)),
        Route::Local(ActorId::new(0, 100, 0))
    );
    w.stop_then_join().unwrap();
}

#[test]
fn a_stale_id_never_reaches_the_actor_that_reuses_its_hint() {
    bounded(a_stale_id_never_reaches_the_actor_that_reuses_its_hint_body);
}

fn a_stale_id_never_reaches_the_actor_that_reuses_its_hint_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let old = sys.register(recorder(tx.clone())).unwrap();
    sys.send(old, Poison);
    assert_eq!(take(&rx, 1)[0].event_type, EV_POISON);
    wait_until("the old actor is gone", || !sys.is_registered(old));

    let new = sys.register(recorder(tx)).unwrap();
    assert_eq!(new.hint(), old.hint(), "the freed slot is reused");
    assert_eq!(
        new.local_id(),
        old.local_id() + 1,
        "local ids are never reused"
    );
    sys.send(old, Num(1));
    sys.send(new, Num(2));
    let seen = take(&rx, 1);
    assert_eq!((seen[0].by, seen[0].num), (new, Some(2)));
    let d = take(&dead, 1);
    assert_eq!(
        d[0],
        DeadLetter {
            recipient: old,
            sender: ActorId::EMPTY,
            event_type: Num::EVENT_TYPE,
            cookie: 0,
            reason: DeadLetterReason::ActorUnknown,
        }
    );
    none_left(&rx);
    w.stop_then_join().unwrap();
}

#[test]
fn a_hint_with_another_local_id_or_pool_does_not_resolve() {
    bounded(a_hint_with_another_local_id_or_pool_does_not_resolve_body);
}

fn a_hint_with_another_local_id_or_pool_does_not_resolve_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(1)
            .first_local_id(100)
            .pool(PoolConfig::new("A"))
            .pool(PoolConfig::new("B")),
    )
    .unwrap();
    let (tx, _rx) = channel();
    let a = sys.register(recorder(tx)).unwrap();
    assert_eq!(
        sys.route(ActorId::with_pool(1, 0, 999, a.hint())),
        Route::Unknown
    );
    assert_eq!(
        sys.route(ActorId::with_pool(1, 1, a.local_id(), a.hint())),
        Route::Unknown
    );
    assert_eq!(
        sys.route(ActorId::with_pool(1, 7, a.local_id(), a.hint())),
        Route::Unknown
    );
    assert_eq!(sys.route(ActorId::EMPTY), Route::Unknown);
    w.stop_then_join().unwrap();
}

#[test]
fn bootstrap_comes_first_with_the_parent_id() {
    bounded(bootstrap_comes_first_with_the_parent_id_body);
}

fn bootstrap_comes_first_with_the_parent_id_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let root = sys
        .register(
            Scripted::new(|_, _| Handled::Yes).boot(move |_, ctx, parent| {
                let _ = tx.send(("root", parent, ctx.self_id()));
                let tx2 = tx.clone();
                let child = ctx
                    .register(
                        Scripted::new(|_, _| Handled::Yes).boot(move |_, ctx, parent| {
                            let _ = tx2.send(("child", parent, ctx.self_id()));
                        }),
                    )
                    .unwrap();
                let _ = tx.send(("registered", child, ctx.self_id()));
            }),
        )
        .unwrap();
    let mut got = take(&rx, 3);
    got.sort_by_key(|g| g.0);
    assert_eq!(got[2], ("root", ActorId::EMPTY, root));
    assert_eq!(
        got[0].1, root,
        "the child's parent is the registering actor"
    );
    assert_eq!(
        got[1].1, got[0].2,
        "the id register returned is the child's"
    );
    w.stop_then_join().unwrap();
}

/// An actor with two states: `A` switches to `B` on its first event.
struct TwoStates(std::sync::mpsc::Sender<String>);
impl Actor for TwoStates {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::state_a);
    }
}
impl TwoStates {
    fn state_a(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let n = ev.get::<Num>().map_or(0, |n| n.0);
        let _ = self.0.send(format!("A:{n}"));
        ctx.become_state(Self::state_b);
        assert!(ctx.is_in_state(Self::state_b));
        Handled::Yes
    }
    fn state_b(&mut self, _: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let n = ev.get::<Num>().map_or(0, |n| n.0);
        let _ = self.0.send(format!("B:{n}"));
        Handled::Yes
    }
}

#[test]
fn become_sends_the_next_event_to_the_new_state_function() {
    bounded(become_sends_the_next_event_to_the_new_state_function_body);
}

fn become_sends_the_next_event_to_the_new_state_function_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let a = sys.register(TwoStates(tx)).unwrap();
    for i in 1..=3 {
        sys.send(a, Num(i));
    }
    assert_eq!(take(&rx, 3), ["A:1", "B:2", "B:3"]);
    w.stop_then_join().unwrap();
}

#[test]
fn pass_away_twice_is_a_typed_error_and_the_id_stops_resolving_at_once() {
    bounded(pass_away_twice_is_a_typed_error_and_the_id_stops_resolving_at_once_body);
}

fn pass_away_twice_is_a_typed_error_and_the_id_stops_resolving_at_once_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let a = sys
        .register(Scripted::new(move |ctx, _| {
            let first = ctx.pass_away();
            let resolves = ctx.system().is_registered(ctx.self_id());
            let second = ctx.pass_away();
            let _ = tx.send((first, resolves, second, ctx.has_passed_away()));
            Handled::Yes
        }))
        .unwrap();
    sys.send(a, Num(1));
    let (first, resolves, second, passed) = take(&rx, 1).remove(0);
    assert_eq!(first, Ok(()));
    assert!(
        !resolves,
        "the id stops resolving inside the handler already"
    );
    assert_eq!(second, Err(PassAwayError::AlreadyPassedAway(a)));
    assert!(passed);
    assert!(!sys.is_registered(a));
    w.stop_then_join().unwrap();
}

#[test]
fn sends_from_outside_and_send_with_carry_exact_fields() {
    bounded(sends_from_outside_and_send_with_carry_exact_fields_body);
}

fn sends_from_outside_and_send_with_carry_exact_fields_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let r = sys.register(recorder(tx)).unwrap();
    let someone = ActorId::new(1, 5, 6);
    sys.send(r, Num(1));
    let flags = EventFlags::USE_SUB_CHANNEL.with_channel(9);
    sys.send_with(r, someone, Num(2), flags, 77);
    let got = take(&rx, 2);
    assert_eq!(
        (got[0].sender, got[0].cookie, got[0].flags),
        (ActorId::EMPTY, 0, EventFlags::empty())
    );
    assert_eq!(
        (got[1].sender, got[1].cookie, got[1].flags),
        (someone, 77, flags)
    );
    assert_eq!(
        (got[1].recipient, got[1].rewrite, got[1].num),
        (r, r, Some(2))
    );
    w.stop_then_join().unwrap();
}

#[test]
fn forward_keeps_sender_cookie_and_flags() {
    bounded(forward_keeps_sender_cookie_and_flags_body);
}

fn forward_keeps_sender_cookie_and_flags_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let target = sys.register(recorder(tx)).unwrap();
    let fwd = sys
        .register(Scripted::new(move |ctx, ev| {
            ctx.forward(ev, target);
            Handled::Yes
        }))
        .unwrap();
    let origin = ActorId::new(1, 3, 4);
    let flags = EventFlags::USE_SUB_CHANNEL.with_channel(3);
    sys.send_with(fwd, origin, Num(8), flags, 9);
    let got = take(&rx, 1).remove(0);
    assert_eq!(
        (
            got.by,
            got.recipient,
            got.sender,
            got.cookie,
            got.flags,
            got.num
        ),
        (target, target, origin, 9, flags, Some(8))
    );
    w.stop_then_join().unwrap();
}

#[test]
fn poison_passes_the_actor_away_unless_it_is_handled() {
    bounded(poison_passes_the_actor_away_unless_it_is_handled_body);
}

fn poison_passes_the_actor_away_unless_it_is_handled_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let plain = sys.register(recorder(tx.clone())).unwrap();
    let tx2 = tx.clone();
    let stubborn = sys
        .register(Scripted::new(move |ctx, ev| {
            let _ = tx2.send(Seen::of(ctx.self_id(), &ev));
            Handled::Yes
        }))
        .unwrap();
    sys.send(plain, Poison);
    sys.send(stubborn, Poison);
    let got = take(&rx, 2);
    assert!(got.iter().all(|s| s.event_type == EV_POISON));
    wait_until("the plain actor passed away", || !sys.is_registered(plain));
    assert!(
        sys.is_registered(stubborn),
        "a handled Poison does nothing by itself"
    );
    assert_eq!(
        sys.stats().dead_letters,
        0,
        "a Poison given back is not a dead letter"
    );
    w.stop_then_join().unwrap();
}

#[test]
fn same_mailbox_children_bootstrap_first_and_never_run_concurrently() {
    bounded(same_mailbox_children_bootstrap_first_and_never_run_concurrently_body);
}

fn same_mailbox_children_bootstrap_first_and_never_run_concurrently_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(1).pool(PoolConfig::new("User").threads(2)),
    )
    .unwrap();
    let (tx, rx) = channel::<String>();
    let busy = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let (ids_tx, ids_rx) = channel();
    let work = {
        let (busy, overlaps) = (busy.clone(), overlaps.clone());
        move || {
            if busy.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            // A few yields widen the window for an overlap; each may cost a time slice
            // on a loaded machine (100 per event took over a minute beside busy loops).
            for _ in 0..10 {
                std::thread::yield_now();
            }
            busy.fetch_sub(1, Ordering::SeqCst);
        }
    };
    let w1 = work.clone();
    let parent = sys
        .register(
            Scripted::new(move |_, _| {
                w1();
                Handled::Yes
            })
            .boot(move |_, ctx, _| {
                let mut kids = Vec::new();
                for k in 0..3 {
                    let (tx, boot_tx, w2) = (tx.clone(), tx.clone(), work.clone());
                    let kid = ctx
                        .register_with_same_mailbox(
                            Scripted::new(move |_, ev| {
                                w2();
                                if ev.is::<Num>() {
                                    let _ = tx.send(format!("kid{k}:ev"));
                                }
                                Handled::Yes
                            })
                            .boot(move |_, _, _| {
                                let _ = boot_tx.send(format!("kid{k}:boot"));
                            }),
                        )
                        .unwrap();
                    // Sent before the child's bootstrap ran: still handled after it.
                    ctx.send(kid, Num(0));
                    kids.push(kid);
                }
                let _ = ids_tx.send((ctx.self_id(), kids));
            }),
        )
        .unwrap();
    let (pid, kids) = ids_rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(pid, parent);
    let mut got = take(&rx, 6);
    for k in 0..3 {
        let boot = got
            .iter()
            .position(|s| *s == format!("kid{k}:boot"))
            .unwrap();
        let ev = got.iter().position(|s| *s == format!("kid{k}:ev")).unwrap();
        assert!(boot < ev, "kid{k}: bootstrap first");
    }
    got.clear();
    assert!(kids.iter().all(|k| k.pool_id() == parent.pool_id()));
    for round in 0..200 {
        sys.send(parent, Num(round));
        for &k in &kids {
            sys.send(k, Num(round));
        }
    }
    take(&rx, 600);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    w.stop_then_join().unwrap();
}

#[test]
fn a_same_mailbox_child_passing_away_leaves_the_parent_running() {
    bounded(a_same_mailbox_child_passing_away_leaves_the_parent_running_body);
}

fn a_same_mailbox_child_passing_away_leaves_the_parent_running_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let (ids_tx, ids_rx) = channel();
    let tx2 = tx.clone();
    let parent = sys
        .register(recorder(tx).boot(move |_, ctx, _| {
            let kid = ctx.register_with_same_mailbox(recorder(tx2)).unwrap();
            let _ = ids_tx.send(kid);
        }))
        .unwrap();
    let kid = ids_rx.recv_timeout(PATIENCE).unwrap();
    sys.send(kid, Poison);
    sys.send(kid, Num(1)); // queued behind the Poison: not delivered
    sys.send(parent, Num(2));
    let got = take(&rx, 2);
    assert_eq!((got[0].by, got[0].event_type), (kid, EV_POISON));
    assert_eq!((got[1].by, got[1].num), (parent, Some(2)));
    let d = take(&dead, 1).remove(0);
    assert_eq!((d.recipient, d.event_type), (kid, Num::EVENT_TYPE));
    assert!(
        matches!(
            d.reason,
            DeadLetterReason::PassedAway | DeadLetterReason::ActorUnknown
        ),
        "{d:?}"
    );
    assert!(sys.is_registered(parent));
    assert!(!sys.is_registered(kid));
    w.stop_then_join().unwrap();
}

#[test]
fn schedule_sends_to_self_later_and_a_cancelled_one_never_arrives() {
    bounded(schedule_sends_to_self_later_and_a_cancelled_one_never_arrives_body);
}

fn schedule_sends_to_self_later_and_a_cancelled_one_never_arrives_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let a = sys
        .register(
            Scripted::new(move |ctx, ev| {
                let _ = tx.send((
                    ev.get::<Wakeup>().map(|w| w.tag),
                    ev.sender(),
                    ctx.self_id(),
                ));
                Handled::Yes
            })
            .boot(|_, ctx, _| {
                ctx.schedule(Duration::from_millis(5), Wakeup { tag: 1 });
                let cancelled = ctx.schedule(Duration::from_millis(5), Wakeup { tag: 2 });
                assert!(cancelled.is_active());
                cancelled.cancel();
                assert!(!cancelled.is_active());
                ctx.schedule(Duration::from_millis(30), Wakeup { tag: 3 });
            }),
        )
        .unwrap();
    let got = take(&rx, 2);
    assert_eq!(got, [(Some(1), a, a), (Some(3), a, a)]);
    assert_eq!(
        sys.stats().dead_letters,
        0,
        "a cancelled event is not a dead letter"
    );
    none_left(&rx);
    w.stop_then_join().unwrap();
}

#[test]
fn register_on_a_named_pool_puts_its_id_in_the_actor_id_for_life() {
    bounded(register_on_a_named_pool_puts_its_id_in_the_actor_id_for_life_body);
}

fn register_on_a_named_pool_puts_its_id_in_the_actor_id_for_life_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(2)
            .pool(PoolConfig::new(PoolConfig::SYSTEM))
            .pool(PoolConfig::new(PoolConfig::BATCH)),
    )
    .unwrap();
    assert_eq!(sys.pool_id("Batch"), Some(1));
    let (tx, rx) = channel();
    let tx2 = tx.clone();
    let a = sys
        .register_on(
            "Batch",
            Scripted::new(move |ctx, _| {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                let _ = tx.send((ctx.self_id(), name));
                Handled::Yes
            })
            .boot(move |_, ctx, _| {
                let child = ctx.register(Scripted::new(|_, _| Handled::Yes)).unwrap();
                let other = ctx
                    .register_on("System", Scripted::new(|_, _| Handled::Yes))
                    .unwrap();
                let unknown = ctx.register_on("Nope", Scripted::new(|_, _| Handled::Yes));
                let _ = tx2.send((child, format!("{}:{:?}", other.pool_id(), unknown.err())));
            }),
        )
        .unwrap();
    assert_eq!(a.pool_id(), 1);
    let (child, rest) = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(child.pool_id(), 1, "register keeps the current pool");
    assert_eq!(rest, "0:Some(UnknownPool(\"Nope\"))");
    for i in 0..3 {
        sys.send(a, Num(i));
    }
    for (id, thread) in take(&rx, 3) {
        assert_eq!(id, a);
        assert_eq!(thread, "node2-Batch");
    }
    assert!(matches!(
        sys.register_on("Nope", Scripted::new(|_, _| Handled::Yes)),
        Err(RegisterActorError::UnknownPool(_))
    ));
    w.stop_then_join().unwrap();
}

#[test]
fn a_panic_with_the_deregister_reaction_passes_the_actor_away() {
    bounded(a_panic_with_the_deregister_reaction_passes_the_actor_away_body);
}

fn a_panic_with_the_deregister_reaction_passes_the_actor_away_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let (tx, rx) = channel();
    let fragile = sys
        .register(
            Scripted::new(|_, ev| {
                if ev.is::<Num>() {
                    panic!("boom");
                }
                Handled::Yes
            })
            .reaction(ExceptionReaction::DeregisterCoop),
        )
        .unwrap();
    let watcher = sys.register(recorder(tx)).unwrap();
    sys.send(fragile, Num(1));
    wait_until("the fragile actor is gone", || !sys.is_registered(fragile));
    sys.send_with(fragile, watcher, Num(2), EventFlags::TRACK_DELIVERY, 5);
    let got = take(&rx, 1).remove(0);
    assert_eq!((got.sender, got.cookie), (fragile, 5));
    assert_eq!(
        got.undelivered.map(|u| u.reason),
        Some(UndeliveredReason::ActorUnknown)
    );
    w.stop_then_join().unwrap();
}

#[test]
fn five_systems_live_in_one_process_each_with_its_own_ids_and_services() {
    bounded(five_systems_live_in_one_process_each_with_its_own_ids_and_services_body);
}

fn five_systems_live_in_one_process_each_with_its_own_ids_and_services_body() {
    let w = env();
    let env = w.environment().clone();
    let echo = ActorId::service(0, b"echo").unwrap();
    let (tx, rx) = channel();
    let systems: Vec<ActorSystem> = (1..=5)
        .map(|node| {
            let tx = tx.clone();
            ActorSystem::start(
                &env,
                SystemSetup::new(node).first_local_id(100).local_service(
                    echo,
                    "User",
                    recorder(tx),
                ),
            )
            .unwrap()
        })
        .collect();
    for (i, s) in systems.iter().enumerate() {
        let svc = s.lookup_local_service(echo).unwrap();
        assert_eq!((svc.node_id(), svc.local_id()), (i as u32 + 1, 100));
        s.send(echo, Num(i as u64));
    }
    let mut got = take(&rx, 5);
    got.sort_by_key(|s| s.num);
    for (i, s) in got.iter().enumerate() {
        assert_eq!(s.by.node_id(), i as u32 + 1);
        assert_eq!(
            (s.recipient, s.rewrite),
            (echo, systems[i].lookup_local_service(echo).unwrap())
        );
    }
    // Another environment may host the same node ids again.
    let w2 = agentbox::WrappedEnv::new(|_| {}).unwrap();
    let again = system(w2.environment(), 1);
    assert_eq!(again.node_id(), 1);
    w2.stop_then_join().unwrap();
    w.stop_then_join().unwrap();
}

#[test]
fn setup_errors_are_typed() {
    bounded(setup_errors_are_typed_body);
}

fn setup_errors_are_typed_body() {
    let w = env();
    let env = w.environment();
    assert!(matches!(
        ActorSystem::start(env, SystemSetup::new(0)),
        Err(SystemError::InvalidNodeId(0))
    ));
    assert!(matches!(
        ActorSystem::start(env, SystemSetup::new(1 << 20)),
        Err(SystemError::InvalidNodeId(_))
    ));
    // The largest node id that fits the 20 bits of an ActorId is accepted.
    let top = ActorSystem::start(env, SystemSetup::new(ActorId::MAX_NODE_ID))
        .expect("node id 0xFFFFF is valid");
    assert_eq!(top.node_id(), 0xF_FFFF);
    assert!(matches!(
        ActorSystem::start(env, SystemSetup::new(1).pool(PoolConfig::new("A")).pool(PoolConfig::new("A"))),
        Err(SystemError::DuplicatePool(p)) if p == "A"
    ));
    assert!(matches!(
        ActorSystem::start(
            env,
            SystemSetup::new(1).pool(PoolConfig::new("A").threads(0))
        ),
        Err(SystemError::Pool { .. })
    ));
    let not_svc = ActorId::new(0, 1, 1);
    assert!(matches!(
        ActorSystem::start(
            env,
            SystemSetup::new(1).local_service(not_svc, "User", Scripted::new(|_, _| Handled::Yes))
        ),
        Err(SystemError::Service(ServiceError::NotAService(_)))
    ));
    w.stop_then_join().unwrap();
}

#[test]
fn stop_ends_every_actor_and_refuses_registration() {
    bounded(stop_ends_every_actor_and_refuses_registration_body);
}

fn stop_ends_every_actor_and_refuses_registration_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let (tx, _rx) = channel();
    let ids: Vec<ActorId> = (0..4)
        .map(|_| sys.register(recorder(tx.clone())).unwrap())
        .collect();
    assert!(!sys.is_stopping(), "a running system is not stopping");
    sys.stop();
    assert!(sys.is_stopping());
    assert!(matches!(
        sys.register(recorder(tx)),
        Err(RegisterActorError::ShuttingDown)
    ));
    wait_until("every actor is gone", || {
        ids.iter().all(|&id| !sys.is_registered(id))
    });
    wait_until("every coop is gone", || env.coop_count() == 0);
    w.stop_then_join().unwrap();
}

#[test]
fn the_environment_shuts_down_by_itself_once_every_actor_passed_away() {
    bounded(the_environment_shuts_down_by_itself_once_every_actor_passed_away_body);
}

fn the_environment_shuts_down_by_itself_once_every_actor_passed_away_body() {
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    agentbox::Environment::launch(move |env| {
        let sys = system(env, 1);
        for _ in 0..3 {
            let d = d.clone();
            sys.register(Scripted::new(|_, _| Handled::Yes).boot(move |_, ctx, _| {
                d.fetch_add(1, Ordering::SeqCst);
                ctx.pass_away().unwrap();
            }))
            .unwrap();
        }
    })
    .unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 3);
}

#[test]
fn thousands_of_actors_get_distinct_local_ids_and_freed_hints_are_reused() {
    bounded(thousands_of_actors_get_distinct_local_ids_and_freed_hints_are_reused_body);
}

fn thousands_of_actors_get_distinct_local_ids_and_freed_hints_are_reused_body() {
    let w = env();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let first: Vec<ActorId> = (0..2000)
        .map(|_| sys.register(recorder(tx.clone())).unwrap())
        .collect();
    for (i, id) in first.iter().enumerate() {
        assert_eq!((id.local_id(), id.hint()), (100 + i as u64, i as u32));
        assert_eq!(sys.route(*id), Route::Local(*id));
    }
    // Every other actor passes away.
    for id in first.iter().step_by(2) {
        sys.send(*id, Poison);
    }
    take(&rx, 1000);
    wait_until("half are gone", || {
        first.iter().step_by(2).all(|&id| !sys.is_registered(id))
    });
    let second: Vec<ActorId> = (0..1000)
        .map(|_| sys.register(recorder(tx.clone())).unwrap())
        .collect();
    let freed: HashSet<u32> = first.iter().step_by(2).map(|id| id.hint()).collect();
    let reused: HashSet<u32> = second.iter().map(|id| id.hint()).collect();
    assert_eq!(reused, freed, "exactly the freed hints are reused");
    for (i, id) in second.iter().enumerate() {
        assert_eq!(id.local_id(), 2100 + i as u64, "local ids keep growing");
    }
    for id in first.iter().step_by(2) {
        assert_eq!(sys.route(*id), Route::Unknown, "{id} is stale");
    }
    for id in first.iter().skip(1).step_by(2).chain(&second) {
        assert_eq!(sys.route(*id), Route::Local(*id));
    }
    w.stop_then_join().unwrap();
}

#[test]
fn a_cached_route_stops_at_once_when_the_recipient_passes_away() {
    bounded(a_cached_route_stops_at_once_when_the_recipient_passes_away_body);
}

fn a_cached_route_stops_at_once_when_the_recipient_passes_away_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = system(&env, 1);
    let dead = dead_letters(&env, &sys);
    let (tx, rx) = channel();
    let target = sys.register(recorder(tx.clone())).unwrap();
    // The sender sends to the target on each Num it gets (its route gets cached after two).
    let (back_tx, back_rx) = channel();
    let sender = sys
        .register(Scripted::new(move |ctx, ev| {
            if let Some(n) = ev.get::<Num>() {
                ctx.send_with(target, Num(n.0), EventFlags::TRACK_DELIVERY, n.0);
            } else {
                let _ = back_tx.send(Seen::of(ctx.self_id(), &ev));
            }
            Handled::Yes
        }))
        .unwrap();
    for i in 1..=3 {
        sys.send(sender, Num(i));
    }
    assert_eq!(
        take(&rx, 3).iter().map(|s| s.num).collect::<Vec<_>>(),
        [Some(1), Some(2), Some(3)]
    );
    sys.send(target, Poison);
    take(&rx, 1);
    wait_until("gone", || !sys.is_registered(target));
    sys.send(sender, Num(4));
    let back = take(&back_rx, 1).remove(0);
    assert_eq!((back.sender, back.cookie), (target, 4));
    let d = take(&dead, 1).remove(0);
    assert_eq!(
        (d.recipient, d.reason),
        (target, DeadLetterReason::ActorUnknown)
    );
    none_left(&rx);
    w.stop_then_join().unwrap();
}

#[test]
fn setup_registers_local_services_then_runs_the_start_functions_in_order() {
    bounded(setup_registers_local_services_then_runs_the_start_functions_in_order_body);
}

fn setup_registers_local_services_then_runs_the_start_functions_in_order_body() {
    let w = env();
    let (tx, rx) = channel();
    let (log_tx, log_rx) = channel();
    let svc = ActorId::service(0, b"registry").unwrap();
    let (l1, l2) = (log_tx.clone(), log_tx);
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(6)
            .first_local_id(100)
            .pool(PoolConfig::new("System"))
            .pool(PoolConfig::new("User"))
            .local_service(svc, "System", recorder(tx))
            .on_start(move |sys| {
                let _ = l1.send(format!("first {:?}", sys.lookup_local_service(svc)));
                sys.send(svc, Num(1));
            })
            .on_start(move |sys| {
                let _ = l2.send(format!("second {}", sys.node_id()));
            }),
    )
    .unwrap();
    assert_eq!(
        take(&log_rx, 2),
        [
            format!("first {:?}", Some(ActorId::with_pool(6, 0, 100, 0))),
            "second 6".to_owned()
        ]
    );
    let got = take(&rx, 1).remove(0);
    assert_eq!(
        (got.recipient, got.rewrite, got.num),
        (svc, ActorId::with_pool(6, 0, 100, 0), Some(1))
    );
    assert!(matches!(
        ActorSystem::start(
            w.environment(),
            SystemSetup::new(7).local_service(svc, "Nope", Scripted::new(|_, _| Handled::Yes)),
        ),
        Err(SystemError::ServiceActor {
            source: RegisterActorError::UnknownPool(_),
            ..
        })
    ));
    drop(sys);
    w.stop_then_join().unwrap();
}

/// Passes away in its bootstrap (counts it).
struct Brief(Arc<AtomicUsize>);
impl Actor for Brief {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        self.0.fetch_add(1, Ordering::Relaxed);
        ctx.pass_away().unwrap();
    }
}

/// Many actors registered and passed away leave a bounded number of idle mailboxes
/// (the pool's `idle_mailboxes`), and those do not keep the environment running: `launch`
/// returns once the actors are gone, as with no idle mailbox at all.
#[test]
fn short_lived_actors_leave_at_most_the_pools_idle_mailboxes_which_do_not_hold_the_environment() {
    bounded(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        agentbox::Environment::launch(move |env| {
            let setup = SystemSetup::new(1).pool(PoolConfig::new("User").idle_mailboxes(4));
            let sys = ActorSystem::start(env, setup).unwrap();
            for round in 0..20 {
                for _ in 0..100 {
                    sys.register(Brief(c.clone())).unwrap();
                }
                wait_until("the round's actors are gone", || {
                    c.load(Ordering::Relaxed) == (round + 1) * 100
                        && sys.pool_stats(0).unwrap().actors == 0
                });
                let idle = sys.pool_stats(0).unwrap().idle_mailboxes;
                assert!(idle <= 4, "{idle} idle mailboxes kept, at most 4");
            }
            wait_until("a mailbox is parked", || {
                sys.pool_stats(0).unwrap().idle_mailboxes > 0
            });
        })
        .unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 2000);
    });
}

/// A pool that keeps no idle mailbox deregisters each one with its last actor.
#[test]
fn a_pool_keeping_no_idle_mailbox_parks_none() {
    bounded(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        agentbox::Environment::launch(move |env| {
            let setup = SystemSetup::new(1).pool(PoolConfig::new("User").idle_mailboxes(0));
            let sys = ActorSystem::start(env, setup).unwrap();
            for _ in 0..100 {
                sys.register(Brief(c.clone())).unwrap();
            }
            wait_until("the actors are gone", || c.load(Ordering::Relaxed) == 100);
            assert_eq!(sys.pool_stats(0).unwrap().idle_mailboxes, 0);
        })
        .unwrap();
    });
}

/// Actors registered one after another (the later ones in mailboxes their predecessors
/// left) each get every event of a sender in the order sent, one at a time, and events
/// still queued when one passes away are not delivered (the sender is told) — never to
/// the next actor of the mailbox.
#[test]
fn order_per_sender_and_pass_away_hold_across_many_registrations_in_recycled_mailboxes() {
    bounded(order_per_sender_and_pass_away_hold_across_many_registrations_body);
}

fn order_per_sender_and_pass_away_hold_across_many_registrations_body() {
    let w = env();
    let env = w.environment().clone();
    let sys = ActorSystem::start(
        &env,
        SystemSetup::new(1).pool(PoolConfig::new("User").threads(2)),
    )
    .unwrap();
    let (tx, rx) = channel();
    // Reports every Undelivered it gets.
    let watcher = sys.register(recorder(tx.clone())).unwrap();
    // Registered without waiting for the earlier ones: a mailbox an actor left may get
    // the next one while other rounds' events are still queued.
    let mut ids = Vec::new();
    for round in 0..200u64 {
        let tx = tx.clone();
        // Takes 10 events then passes away: the 2 sent after them are not delivered.
        let mut got = 0;
        let actor = sys
            .register(Scripted::new(move |ctx, ev| {
                let _ = tx.send(Seen::of(ctx.self_id(), &ev));
                got += 1;
                if got == 10 {
                    ctx.pass_away().unwrap();
                }
                Handled::Yes
            }))
            .unwrap();
        ids.push(actor);
        for i in 0..12 {
            sys.send_with(
                actor,
                watcher,
                Num(round * 100 + i),
                EventFlags::TRACK_DELIVERY,
                i,
            );
        }
        if round % 20 == 19 {
            // Let some mailboxes park before the next registrations.
            wait_until("the actors so far are gone", || {
                sys.pool_stats(0).unwrap().actors == 1
            });
        }
    }
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        200,
        "ids are never reused"
    );
    let seen = take(&rx, 200 * 12);
    for (round, actor) in ids.iter().enumerate() {
        let round = round as u64;
        let nums: Vec<_> = seen
            .iter()
            .filter(|s| s.by == *actor)
            .map(|s| s.num)
            .collect();
        let want: Vec<_> = (0..10).map(|i| Some(round * 100 + i)).collect();
        assert_eq!(
            nums, want,
            "round {round}: each event once, in the order sent"
        );
        let mut cookies: Vec<_> = seen
            .iter()
            .filter(|s| s.by == watcher && s.sender == *actor)
            .map(|s| {
                assert!(s.undelivered.is_some());
                s.cookie
            })
            .collect();
        cookies.sort_unstable();
        assert_eq!(
            cookies,
            vec![10, 11],
            "round {round}: the rest not delivered"
        );
    }
    none_left(&rx);
    w.stop_then_join().unwrap();
}

/// `ActorSystem::stop` with idle mailboxes parked ends cleanly: they deregister, none
/// parks later, registering fails, and the environment ends.
#[test]
fn system_stop_with_idle_mailboxes_deregisters_them_and_the_environment_ends() {
    bounded(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let env = agentbox::WrappedEnv::new(|_| {}).unwrap();
        let sys = ActorSystem::start(
            env.environment(),
            SystemSetup::new(1).pool(PoolConfig::new("User").threads(2)),
        )
        .unwrap();
        for _ in 0..500 {
            sys.register(Brief(c.clone())).unwrap();
        }
        wait_until("the actors are gone", || {
            c.load(Ordering::Relaxed) == 500 && sys.pool_stats(0).unwrap().actors == 0
        });
        assert!(sys.pool_stats(0).unwrap().idle_mailboxes > 0);
        sys.stop();
        assert_eq!(sys.pool_stats(0).unwrap().idle_mailboxes, 0);
        assert!(matches!(
            sys.register(Brief(c.clone())),
            Err(RegisterActorError::ShuttingDown)
        ));
        let env2 = env.environment().clone();
        wait_until("every mailbox deregistered", || {
            env2.introspect().coops.is_empty()
        });
        env.stop_then_join().unwrap();
    });
}
