//! Run-time monitoring: off by default; when on, each distribution is bracketed by
//! StatsStarted/StatsFinished and carries the documented quantities.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use agentbox::dispatcher::{one_thread, thread_pool};
use agentbox::prelude::*;
use agentbox::{Quantity, StatsFinished, StatsStarted};
use common::{within_patience, Log, Script};
use parking_lot::Mutex;
use std::sync::Arc;

type Seen = Arc<Mutex<Option<HashMap<String, usize>>>>;

/// Collects complete distributions until one satisfies `wanted`, then turns stats off and
/// stops.
struct Monitor {
    current: Option<HashMap<String, usize>>,
    done: Seen,
    /// Keeps a named mbox alive for the count.
    _named: Mbox,
    wanted: fn(&HashMap<String, usize>) -> bool,
}

impl Agent for Monitor {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let stats = ctx.environment().stats_controller().mbox();
        ctx.subscribe(&stats)
            .event(|a: &mut Self, _, _: &StatsStarted| a.current = Some(HashMap::new()))?;
        ctx.subscribe(&stats)
            .event(|a: &mut Self, _, q: &Quantity| {
                if let Some(c) = &mut a.current {
                    c.insert(format!("{}/{}", q.prefix, q.suffix), q.value);
                }
            })?;
        ctx.subscribe(&stats)
            .event(|a: &mut Self, ctx, _: &StatsFinished| {
                if let Some(c) = a.current.take().filter(|c| (a.wanted)(c)) {
                    *a.done.lock() = Some(c);
                    ctx.environment().stats_controller().turn_off();
                    ctx.environment().stop();
                }
            })?;
        Ok(())
    }
}

#[test]
fn stats_are_off_by_default() {
    within_patience(|| {
        Environment::launch(|env| assert!(!env.stats_controller().is_on())).unwrap();
    });
}

#[test]
fn a_distribution_carries_the_documented_quantities() {
    within_patience(|| {
        let done: Seen = Arc::new(Mutex::new(None));
        let d = done.clone();
        Environment::launch(move |env| {
            let disp = one_thread::Builder::new()
                .name("watched")
                .activity_tracking(true)
                .build()
                .unwrap();
            let pool = thread_pool::Builder::new()
                .name("pool")
                .threads(2)
                .build()
                .unwrap();
            let named = env.named_mbox("kept");
            // Two timers pending for the whole test.
            let far = std::time::Duration::from_secs(3600);
            agentbox::send_delayed(&named, far, 1u8).unwrap().detach();
            agentbox::send_periodic(&named, far, far, 2u8)
                .unwrap()
                .detach();
            env.introduce_coop(|coop| {
                coop.set_binder(disp.binder());
                for _ in 0..3 {
                    coop.add_agent(Script::new(&Log::new()));
                }
            })
            .unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(pool.binder());
                coop.add_agent(Script::new(&Log::new()));
            })
            .unwrap();
            env.introduce_coop(|coop| {
                coop.add_agent(Monitor {
                    current: None,
                    done: d,
                    _named: named,
                    // The bind-and-start demands of the three agents have run (one demand
                    // each: this worker starts an agent as it binds it). (A wait is counted
                    // when it ends, so a worker parked since then may show none.)
                    wanted: |c| {
                        c.get("disp/one_thread/watched/wt/work.count")
                            .is_some_and(|n| *n >= 3)
                    },
                });
            })
            .unwrap();
            let stats = env.stats_controller();
            stats.set_distribution_period(Duration::from_millis(10));
            stats.turn_on();
            assert!(stats.is_on());
        })
        .unwrap();
        let seen = done.lock().clone().expect("one complete distribution");
        assert_eq!(seen["coop_repository/coop.count"], 3);
        assert_eq!(seen["mbox_repository/named_mbox.count"], 1);
        assert_eq!(seen["timer_thread/timer.count"], 2);
        assert_eq!(seen["disp/one_thread/watched/agent.count"], 3);
        assert_eq!(seen["disp/one_thread/watched/threads.count"], 1);
        assert!(seen.contains_key("disp/one_thread/watched/wt/demands.count"));
        assert_eq!(seen["disp/thread_pool/pool/threads.count"], 2);
        assert_eq!(seen["disp/thread_pool/pool/agent.count"], 1);
        assert_eq!(seen["disp/one_thread/agentbox-default/agent.count"], 1);
        let work = seen["disp/one_thread/watched/wt/work.total_ns"];
        assert_eq!(
            seen["disp/one_thread/watched/wt/work.avg_ns"],
            work / seen["disp/one_thread/watched/wt/work.count"]
        );
        assert!(seen.contains_key("disp/one_thread/watched/wt/wait.avg_ns"));
        // Without activity tracking there are no such quantities.
        assert!(!seen.contains_key("disp/one_thread/agentbox-default/wt/work.count"));
    });
}

// ---- drops are counted without a tracer ----

struct Tick;
struct Looping;
struct Later;
struct Other;

/// Produces every kind of drop once or twice, with exact numbers.
struct Dropper {
    source: Mbox,
    other_state: State,
}

impl Agent for Dropper {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        ctx.limit_then_drop::<Tick>(1)?;
        // A limit of 0 redirects every message to itself: a redirect loop.
        ctx.limit_then_redirect::<Looping>(0, &me)?;
        ctx.default_limit_then_drop(100)?;
        ctx.set_delivery_filter(&self.source.clone(), |n: &u32| *n == 0)?;
        ctx.subscribe(&self.source.clone())
            .event(|_: &mut Self, _, _: &u32| {})?;
        ctx.subscribe_self().event(|_: &mut Self, _, _: &Tick| {})?;
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Looping| {})?;
        ctx.subscribe_self()
            .in_state(&self.other_state.clone())
            .event(|_: &mut Self, _, _: &Other| {})?;
        ctx.subscribe_self().event(|_: &mut Self, ctx, _: &Later| {
            // Two more queued behind the deregistration: dropped by it.
            send(&ctx.direct_mbox(), Tick).unwrap();
            send(&ctx.direct_mbox(), Other).unwrap();
            ctx.deregister_coop(DeregReason::Normal);
        })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        send(&me, "nobody subscribes to &str").unwrap(); // no_subscribers: 1
        send(&self.source, 1u32).unwrap(); // filtered: 1
        send(&self.source, 0u32).unwrap(); // passes
        for _ in 0..3 {
            send(&me, Tick).unwrap(); // over_limit: 2 (one fits)
        }
        send(&me, Other).unwrap(); // no_handler: 1 (subscribed in another state)
        send(&me, Looping).unwrap(); // redirection_depth: 1
        send(&me, Later).unwrap(); // then at_deregistration: 2
    }
}

#[test]
fn every_drop_is_counted_by_reason_without_a_tracer() {
    let counts = within_patience(|| {
        let mut counts = None;
        Environment::launch(|env| {
            let source = env.create_mbox();
            send(&env.create_mbox(), 5u8).unwrap(); // no_subscribers: 1 (an MPMC mbox)
            env.introduce_coop(|coop| {
                coop.add_agent(Dropper {
                    source,
                    other_state: State::new("other"),
                });
            })
            .unwrap();
            counts = Some(env.clone());
        })
        .unwrap();
        counts.unwrap().drop_counts()
    });
    let mut expected = agentbox::DropCounts::default();
    expected.no_subscribers = 2;
    expected.filtered = 1;
    expected.over_limit = 2;
    expected.no_handler = 1;
    expected.redirection_depth = 1;
    expected.at_deregistration = 2;
    assert_eq!(counts, expected);
    assert_eq!(counts.total(), 9);
}

/// Reads `drops/no_subscribers.count` from the stats and stops.
struct DropMonitor {
    seen: Arc<Mutex<Option<usize>>>,
}

impl Agent for DropMonitor {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let stats = ctx.environment().stats_controller().mbox();
        ctx.subscribe(&stats)
            .event(|a: &mut Self, _, q: &Quantity| {
                if q.prefix == "drops" && q.suffix == "no_subscribers.count" {
                    *a.seen.lock() = Some(q.value);
                }
            })?;
        ctx.subscribe(&stats)
            .event(|a: &mut Self, ctx, _: &StatsFinished| {
                if a.seen.lock().is_some() {
                    ctx.environment().stats_controller().turn_off();
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
}

#[test]
fn the_stats_report_drop_counts() {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            for n in 0..3u8 {
                send(&env.create_mbox(), n).unwrap();
            }
            let stats = env.stats_controller();
            stats.set_distribution_period(Duration::from_millis(10));
            env.introduce_coop(|coop| {
                coop.add_agent(DropMonitor { seen: s });
            })
            .unwrap();
            stats.turn_on();
        })
        .unwrap();
    });
    assert_eq!(*seen.lock(), Some(3));
}
