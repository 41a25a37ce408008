//! The extra mboxes: exact counts for each rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::mchain::{receive, Handlers, MChain, MChainParams, ReceiveParams};
use agentbox::prelude::*;
use agentbox::{SendError, SubscribeError};
use agentbox_extra::collecting::Collected;
use agentbox_extra::composite::Unknown;
use agentbox_extra::first_last_subscriber::{FirstSubscriber, LastSubscriberGone};
use agentbox_extra::{
    anti_jitter, broadcast, collecting, composite, first_last_subscriber, inflight_limit, retained,
    round_robin,
};
use parking_lot::Mutex;

const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `f` in an environment on its own thread; fails instead of hanging.
fn run(f: impl FnOnce(&Environment) + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        Environment::launch(move |env| {
            f(env);
            env.stop();
        })
        .unwrap();
        let _ = tx.send(());
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        panic!("test did not finish in {PATIENCE:?}");
    }
    t.join().unwrap();
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);
impl Log {
    fn push(&self, s: String) {
        self.0.lock().push(s);
    }
    fn get(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    /// Waits (up to the patience) until `n` lines are in.
    fn wait_for(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        while self.0.lock().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.get()
    }
}

struct Hold(Arc<AtomicBool>);

/// Logs `"<name> <value>"` for each `u32` from `from`; optionally limited, filtered, and
/// held busy by a `Hold` sent to its direct mbox.
struct Sub {
    name: &'static str,
    from: Mbox,
    log: Log,
    limit: Option<usize>,
    filter: Option<fn(&u32) -> bool>,
    also_in: Option<State>,
}

impl Sub {
    fn new(name: &'static str, from: &Mbox, log: &Log) -> Self {
        Sub {
            name,
            from: from.clone(),
            log: log.clone(),
            limit: None,
            filter: None,
            also_in: None,
        }
    }
}

impl Agent for Sub {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if let Some(n) = self.limit {
            ctx.limit_then_drop::<u32>(n)?;
            ctx.limit_then_drop::<Hold>(1)?;
        }
        ctx.subscribe_self().event(|_: &mut Self, _, h: &Hold| {
            while !h.0.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        })?;
        if let Some(f) = self.filter {
            ctx.set_delivery_filter(&self.from.clone(), f)?;
        }
        let from = self.from.clone();
        ctx.subscribe(&from)
            .event(|a: &mut Self, _, v: &u32| a.log.push(format!("{} {v}", a.name)))?;
        if let Some(s) = self.also_in.clone() {
            ctx.subscribe(&from)
                .in_state(&s)
                .event(|a: &mut Self, _, v: &u32| a.log.push(format!("{} {v}", a.name)))?;
        }
        Ok(())
    }
}

fn counts(lines: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for l in lines {
        *m.entry(l.split(' ').next().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    m
}

fn drain_u32(chain: &MChain) -> Vec<u32> {
    let mut got = Vec::new();
    receive(
        chain,
        ReceiveParams::new().no_wait(),
        &mut Handlers::new().on(|v: &u32| got.push(*v)),
    );
    got
}

// ---- round_robin ----

/// Registers the subscribers, holds them all, sends `n` messages, releases.
fn round_robin_run(n: u32, limit: Option<usize>, expect: usize) -> Vec<String> {
    let log = Log::default();
    let l = log.clone();
    run(move |env| {
        let mbox = round_robin::create(env);
        let directs = env
            .introduce_coop(|coop| {
                ["a", "b", "c"]
                    .into_iter()
                    .map(|name| {
                        let mut s = Sub::new(name, &mbox, &l);
                        s.limit = limit;
                        coop.add_agent(s)
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap();
        let go = Arc::new(AtomicBool::new(false));
        for d in &directs {
            send(d, Hold(go.clone())).unwrap();
        }
        for i in 0..n {
            send(&mbox, i).unwrap();
        }
        go.store(true, Ordering::SeqCst);
        l.wait_for(expect);
    });
    log.get()
}

#[test]
fn round_robin_gives_each_of_three_subscribers_three_of_nine_in_turn() {
    let log = round_robin_run(9, None, 9);
    let mut sorted = log.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["a 0", "a 3", "a 6", "b 1", "b 4", "b 7", "c 2", "c 5", "c 8"]
    );
}

#[test]
fn round_robin_does_not_reroute_what_a_limit_drops() {
    let log = round_robin_run(9, Some(2), 6);
    assert_eq!(log.len(), 6, "{log:?}");
    assert!(counts(&log).values().all(|&n| n == 2), "{log:?}");
}

#[test]
fn round_robin_refuses_filters_and_takes_mutable_messages() {
    run(|env| {
        let mbox = round_robin::create(env);
        struct Filtering(Mbox);
        impl Agent for Filtering {
            fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                let r = ctx.set_delivery_filter(&self.0.clone(), |_: &u32| true);
                assert!(matches!(r, Err(SubscribeError::FiltersUnsupported { .. })));
                ctx.subscribe(&self.0.clone())
                    .event_mutable(|_: &mut Self, ctx, s: String| {
                        assert_eq!(s, "moved");
                        ctx.deregister_coop(DeregReason::Normal);
                    })?;
                Ok(())
            }
        }
        env.introduce_coop(|coop| {
            coop.add_agent(Filtering(mbox.clone()));
        })
        .unwrap();
        send_mutable(&mbox, String::from("moved")).unwrap();
        let deadline = Instant::now() + PATIENCE;
        while env.coop_count() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(env.coop_count(), 0);
    });
}

// ---- retained ----

#[test]
fn a_retained_message_reaches_a_late_subscriber_once_through_its_filter() {
    let log = Log::default();
    let l = log.clone();
    run(move |env| {
        let mbox = retained::create(env);
        send(&mbox, 1u32).unwrap();
        send(&mbox, 2u32).unwrap(); // replaces 1
        env.introduce_coop(|coop| {
            // Subscribed in two states: still one retained delivery.
            let mut s = Sub::new("late", &mbox, &l);
            s.also_in = Some(State::new("other"));
            coop.add_agent(s);
            // Its filter refuses the retained value.
            let mut f = Sub::new("filtered", &mbox, &l);
            f.filter = Some(|v| *v != 2);
            coop.add_agent(f);
        })
        .unwrap();
        send(&mbox, 3u32).unwrap();
        l.wait_for(3);
    });
    let mut got = log.get();
    got.sort();
    assert_eq!(got, ["filtered 3", "late 2", "late 3"]);
}

// ---- anti_jitter ----

struct Jittery {
    log: Log,
    threshold: Duration,
    out: Arc<Mutex<Option<Mbox>>>,
}
impl Agent for Jittery {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let m = anti_jitter::create(ctx.direct_mbox(), self.threshold);
        assert!(matches!(
            ctx.set_delivery_filter(&m, |_: &u32| true),
            Err(SubscribeError::FiltersUnsupported { .. })
        ));
        ctx.subscribe(&m)
            .event(|a: &mut Self, _, v: &u32| a.log.push(format!("got {v}")))?;
        *self.out.lock() = Some(m);
        Ok(())
    }
}

fn jitter_run(threshold: Duration, gap: Duration) -> Vec<String> {
    let log = Log::default();
    let l = log.clone();
    run(move |env| {
        let out = Arc::new(Mutex::new(None));
        env.introduce_coop(|coop| {
            coop.add_agent(Jittery {
                log: l.clone(),
                threshold,
                out: out.clone(),
            });
        })
        .unwrap();
        let m = out.lock().clone().unwrap();
        send(&m, 1u32).unwrap();
        send(&m, "unsubscribed type").unwrap();
        std::thread::sleep(gap); // the scenario: time passes between the two sends
        send(&m, 2u32).unwrap();
        l.wait_for(if gap >= threshold { 2 } else { 1 });
        if gap < threshold {
            // Let a wrongly passed second message show up before stopping.
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    log.get()
}

#[test]
fn anti_jitter_drops_a_message_sooner_than_the_threshold() {
    assert_eq!(
        jitter_run(Duration::from_secs(600), Duration::ZERO),
        ["got 1"]
    );
}

#[test]
fn anti_jitter_passes_a_message_after_the_threshold() {
    assert_eq!(
        jitter_run(Duration::from_millis(20), Duration::from_millis(40)),
        ["got 1", "got 2"]
    );
}

// ---- collecting, composite, broadcast ----

#[test]
fn collecting_sends_one_bundle_per_n_and_refuses_other_types() {
    run(|env| {
        let out = env.create_mchain(MChainParams::unbounded());
        let c = collecting::create::<u32>(env, &out.as_mbox(), 3);
        for i in 0..8u32 {
            send(&c, i).unwrap();
        }
        assert!(matches!(send(&c, "x"), Err(SendError::Refused { .. })));
        let mut bundles = Vec::new();
        receive(
            &out,
            ReceiveParams::new().no_wait(),
            &mut Handlers::new()
                .on(|b: &Collected<u32>| bundles.push(b.iter().copied().collect::<Vec<_>>())),
        );
        assert_eq!(bundles, [vec![0, 1, 2], vec![3, 4, 5]]);
    });
}

#[test]
fn composite_routes_by_type_and_applies_the_unknown_policy() {
    run(|env| {
        let numbers = env.create_mchain(MChainParams::unbounded());
        let rest = env.create_mchain(MChainParams::unbounded());
        let redirecting = composite::builder(env, Unknown::Redirect(rest.as_mbox()))
            .route::<u32>(&numbers.as_mbox())
            .build();
        let dropping = composite::builder(env, Unknown::Drop)
            .route::<u32>(&numbers.as_mbox())
            .build();
        let refusing = composite::builder(env, Unknown::Error)
            .route::<u32>(&numbers.as_mbox())
            .build();
        send(&redirecting, 1u32).unwrap();
        send(&redirecting, "to rest").unwrap();
        send(&dropping, 2u32).unwrap();
        send(&dropping, "dropped").unwrap();
        send(&refusing, 3u32).unwrap();
        assert!(matches!(
            send(&refusing, "refused"),
            Err(SendError::Refused { .. })
        ));
        assert_eq!(drain_u32(&numbers), [1, 2, 3]);
        assert_eq!(rest.len(), 1);
        assert_eq!(refusing.kind(), MboxKind::SingleConsumer); // chains only
    });
}

#[test]
fn broadcast_gives_every_destination_every_message() {
    run(|env| {
        let chains: Vec<MChain> = (0..3)
            .map(|_| env.create_mchain(MChainParams::unbounded()))
            .collect();
        let b = broadcast::create(env, chains.iter().map(|c| c.as_mbox()).collect());
        for i in 0..4u32 {
            send(&b, i).unwrap();
        }
        for c in &chains {
            assert_eq!(drain_u32(c), [0, 1, 2, 3]);
        }
        assert!(matches!(
            send_mutable(&b, 1u8),
            Err(SendError::MutableToMultiConsumer { .. })
        ));
    });
}

// ---- first_last_subscriber ----

struct FilterOnly(Mbox);
impl Agent for FilterOnly {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.set_delivery_filter(&self.0.clone(), |_: &u32| true)?;
        Ok(())
    }
}

#[test]
fn first_and_last_subscriber_notices_count_subscriptions_not_filters() {
    run(|env| {
        let notify = env.create_mchain(MChainParams::unbounded());
        let m = first_last_subscriber::create::<u32>(env, &notify.as_mbox());
        let log = Log::default();
        env.introduce_coop(|coop| {
            coop.add_agent(FilterOnly(m.clone()));
        })
        .unwrap();
        assert_eq!(notify.len(), 0);
        let mut handles = Vec::new();
        for name in ["a", "b"] {
            let mut coop = env.make_coop();
            coop.add_agent(Sub::new(name, &m, &log));
            handles.push(env.register_coop(coop).unwrap());
        }
        for h in handles {
            h.deregister(DeregReason::Normal);
        }
        let got = std::cell::RefCell::new(Vec::new());
        receive(
            &notify,
            ReceiveParams::new().handle_n(2).total_time(PATIENCE),
            &mut Handlers::new()
                .on(|_: &FirstSubscriber| got.borrow_mut().push("first"))
                .on(|_: &LastSubscriberGone| got.borrow_mut().push("last gone")),
        );
        assert_eq!(*got.borrow(), ["first", "last gone"]);
        assert_eq!(notify.len(), 0);
        assert!(matches!(
            send(&m, "other type"),
            Err(SendError::Refused { .. })
        ));
    });
}

// ---- inflight_limit ----

#[test]
fn an_inflight_limit_of_3_passes_3_of_4_queued_sends_and_frees_slots_when_handled() {
    let log = Log::default();
    let l = log.clone();
    run(move |env| {
        let dest = env.create_mbox();
        let limited = inflight_limit::create::<u32>(&dest, 3);
        let direct = env
            .introduce_coop(|coop| coop.add_agent(Sub::new("r", &dest, &l)))
            .unwrap();
        let go = Arc::new(AtomicBool::new(false));
        send(&direct, Hold(go.clone())).unwrap();
        for i in 0..4u32 {
            send(&limited, i).unwrap();
        }
        go.store(true, Ordering::SeqCst);
        l.wait_for(3);
        // All three handled: their slots free as the demands are dropped after handling.
        let deadline = Instant::now() + PATIENCE;
        while l.get().len() < 4 && Instant::now() < deadline {
            send(&limited, 100u32).unwrap();
            let until = Instant::now() + Duration::from_millis(50);
            while l.get().len() < 4 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let got = log.get();
    assert_eq!(
        got[..4],
        ["r 0", "r 1", "r 2", "r 100"],
        "the fourth queued send was dropped"
    );
}
