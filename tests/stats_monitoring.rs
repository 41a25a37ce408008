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
                    // Bind + Start of the three agents have run. (A wait is counted when it
                    // ends, so a worker parked since then may show none.)
                    wanted: |c| {
                        c.get("disp/one_thread/watched/wt/work.count")
                            .is_some_and(|n| *n >= 6)
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
