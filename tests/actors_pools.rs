//! Pools: per-pool figures, an actor stays on its pool, pools of several threads.

mod actors_support;

use std::collections::HashSet;
use std::sync::mpsc::channel;
use std::time::Duration;

use actors_support::*;
use agentbox::actors::*;
use agentbox::ActorId;

#[test]
fn pool_stats_count_actors_events_and_the_queue() {
    bounded(pool_stats_count_actors_events_and_the_queue_body);
}

fn pool_stats_count_actors_events_and_the_queue_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(1)
            .pool(PoolConfig::new("System"))
            .pool(PoolConfig::new("User").activity_tracking(true)),
    )
    .unwrap();
    let (held_tx, held_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let (tx, rx) = channel();
    let holder = sys
        .register_on(
            "User",
            Scripted::new(move |_, ev| {
                if ev.is::<Hold>() {
                    let _ = held_tx.send(());
                    go_rx.recv_timeout(PATIENCE).unwrap();
                }
                let _ = tx.send(());
                Handled::Yes
            }),
        )
        .unwrap();
    let others: Vec<ActorId> = (0..2)
        .map(|_| {
            sys.register_on("User", Scripted::new(|_, ev| ev.unhandled()))
                .unwrap()
        })
        .collect();
    wait_until("three bootstraps", || {
        sys.pool_stats(1).unwrap().events_handled == 3
    });
    sys.send(holder, Hold);
    held_rx.recv_timeout(PATIENCE).unwrap();
    for i in 0..5 {
        sys.send(holder, Num(i));
    }
    let s = sys.pool_stats(1).unwrap();
    assert_eq!(
        (s.pool_id, s.name.as_str(), s.threads, s.actors),
        (1, "User", 1, 3)
    );
    assert_eq!(
        s.events_handled, 4,
        "3 bootstraps and the Hold (counted when it starts)"
    );
    assert_eq!(s.queue_length, 5);
    go_tx.send(()).unwrap();
    take(&rx, 6);
    wait_until("the queue is empty", || {
        sys.pool_stats(1).unwrap().queue_length == 0
    });
    let s = sys.pool_stats(1).unwrap();
    assert_eq!(s.events_handled, 9);
    assert!(s.work > Duration::ZERO, "activity tracking measures work");
    assert!(s.idle > Duration::ZERO);
    let system_pool = sys.pool_stats(0).unwrap();
    assert_eq!(
        (
            system_pool.actors,
            system_pool.events_handled,
            system_pool.work
        ),
        (0, 0, Duration::ZERO)
    );
    for id in others {
        sys.send(id, Poison);
    }
    wait_until("two actors left the pool", || {
        sys.pool_stats(1).unwrap().actors == 1
    });
    assert_eq!(sys.stats().pools.len(), 2);
    w.stop_then_join().unwrap();
}

#[test]
fn an_actor_runs_on_its_pool_threads_only() {
    bounded(an_actor_runs_on_its_pool_threads_only_body);
}

fn an_actor_runs_on_its_pool_threads_only_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(3)
            .pool(PoolConfig::new("IO").threads(2))
            .pool(PoolConfig::new("Batch")),
    )
    .unwrap();
    let (tx, rx) = channel();
    let mut ids = Vec::new();
    for pool in ["IO", "IO", "Batch"] {
        let tx = tx.clone();
        ids.push(
            sys.register_on(
                pool,
                Scripted::new(move |ctx, _| {
                    let t = std::thread::current().name().unwrap_or("").to_owned();
                    let _ = tx.send((ctx.self_id(), t));
                    Handled::Yes
                }),
            )
            .unwrap(),
        );
    }
    for round in 0..50 {
        for &id in &ids {
            sys.send(id, Num(round));
        }
    }
    let got = take(&rx, 150);
    let mut io_threads = HashSet::new();
    for (id, thread) in got {
        if id.pool_id() == 0 {
            assert!(thread.starts_with("node3-IO-"), "{thread}");
            io_threads.insert(thread);
        } else {
            assert_eq!(thread, "node3-Batch");
        }
    }
    assert!(!io_threads.is_empty() && io_threads.len() <= 2);
    w.stop_then_join().unwrap();
}

#[test]
fn events_between_two_actors_keep_their_order_on_a_pool_of_several_threads() {
    bounded(events_between_two_actors_keep_their_order_on_a_pool_of_several_threads_body);
}

fn events_between_two_actors_keep_their_order_on_a_pool_of_several_threads_body() {
    let w = env();
    let sys = ActorSystem::start(
        w.environment(),
        SystemSetup::new(1).pool(PoolConfig::new("User").threads(2).events_at_once(1)),
    )
    .unwrap();
    let (tx, rx) = channel();
    let r = sys
        .register(Scripted::new(move |_, ev| {
            let _ = tx.send(ev.get::<Num>().map(|n| n.0));
            Handled::Yes
        }))
        .unwrap();
    let _sender = sys
        .register(Scripted::new(|_, _| Handled::Yes).boot(move |_, ctx, _| {
            for i in 0..1000 {
                ctx.send(r, Num(i));
            }
        }))
        .unwrap();
    let got: Vec<u64> = take(&rx, 1000).into_iter().flatten().collect();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
    w.stop_then_join().unwrap();
}

/// Records every trace event with the message type's name.
struct Collect(std::sync::Mutex<Vec<(agentbox::trace::TraceEvent, String)>>);
impl agentbox::trace::Tracer for Collect {
    fn trace(&self, r: &agentbox::trace::TraceRecord<'_>) {
        let name = r.msg_type.map(|t| t.name().to_owned()).unwrap_or_default();
        self.0.lock().unwrap().push((r.event, name));
    }
}

#[test]
fn the_core_s_delivery_tracing_sees_actor_events() {
    bounded(the_core_s_delivery_tracing_sees_actor_events_body);
}

fn the_core_s_delivery_tracing_sees_actor_events_body() {
    use agentbox::trace::TraceEvent;
    let tracer = std::sync::Arc::new(Collect(Default::default()));
    let w = agentbox::WrappedEnv::with_params(
        agentbox::EnvParams::new().message_tracer(tracer.clone()),
        |_| {},
    )
    .unwrap();
    let sys = system(w.environment(), 1);
    let (tx, rx) = channel();
    let a = sys.register(recorder(tx)).unwrap();
    sys.send(a, Num(1));
    take(&rx, 1);
    let seen = tracer.0.lock().unwrap().clone();
    let about_events = |e: TraceEvent| {
        seen.iter()
            .filter(|(ev, name)| *ev == e && name.contains("Delivery"))
            .count()
    };
    assert_eq!(about_events(TraceEvent::Delivered), 1);
    assert_eq!(about_events(TraceEvent::HandlerCalled), 1);
    w.stop_then_join().unwrap();
}
