//! `request_reply` from a handler to an agent that only the handler's own thread can run
//! would wait for an answer that can come only after it returns: it is refused at once
//! with `RequestError::WouldDeadlock`, even with a timeout that never ends, on every
//! dispatcher kind that has such agents. Where another thread can answer, it is answered.

mod common;

use std::time::Duration;

use agentbox::dispatcher::{
    active_group, active_obj, one_per_prio, one_thread, quoted_round_robin, strictly_ordered,
    thread_pool,
};
use agentbox::prelude::*;
use agentbox::request::{request_reply, Request, RequestError};
use agentbox::{BindParams, Binder, Fifo};
use common::{within_patience, Log};

/// A timeout that never ends: a request that cannot be answered would hang for good.
const NEVER: Duration = Duration::MAX;

/// Answers `Request<u32, u32>` on its direct mbox with `n + 1`.
struct Answerer;

impl Agent for Answerer {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|_: &mut Self, _, r: &Request<u32, u32>| {
                let _ = r.reply(r.get() + 1);
            })?;
        Ok(())
    }
}

/// Asks `target` (or itself) in `on_start`, logs the outcome and ends the coop.
struct Asker {
    target: Option<Mbox>,
    log: Log,
}

impl Agent for Asker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|_: &mut Self, _, r: &Request<u32, u32>| {
                let _ = r.reply(r.get() + 1);
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let to = self.target.clone().unwrap_or_else(|| ctx.direct_mbox());
        let outcome = match request_reply::<u32, u32>(&to, NEVER, 1) {
            Ok(n) => format!("reply {n}"),
            Err(RequestError::WouldDeadlock { .. }) => "would deadlock".to_owned(),
            Err(e) => format!("error {e}"),
        };
        self.log.push(outcome);
        ctx.deregister_coop(DeregReason::Normal);
    }
}

/// Runs an asker and (unless it asks itself) an answerer, each bound by its binder, in one
/// coop; returns what the asker logged.
fn ask(asker: Binder, answerer: Option<Binder>) -> Vec<String> {
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                let target = answerer.map(|b| coop.add_agent_with_binder(Answerer, b));
                coop.add_agent_with_binder(Asker { target, log: l }, asker);
            })
            .unwrap();
        })
        .unwrap();
        log.get()
    })
}

fn same(b: Binder) -> (Binder, Option<Binder>) {
    (b.clone(), Some(b))
}

#[test]
fn asking_itself_is_refused_on_every_dispatcher_kind_that_runs_it_alone() {
    let kinds: Vec<(&str, Binder)> = vec![
        (
            "one_thread",
            one_thread::Builder::new().build().unwrap().binder(),
        ),
        (
            "active_obj",
            active_obj::Builder::new().build().unwrap().binder(),
        ),
        (
            "active_group",
            active_group::Builder::new()
                .build()
                .unwrap()
                .binder_with(BindParams::new().group("g")),
        ),
        (
            "thread_pool",
            thread_pool::Builder::new()
                .threads(2)
                .build()
                .unwrap()
                .binder_with(BindParams::new().fifo(Fifo::Individual)),
        ),
        (
            "strictly_ordered",
            strictly_ordered::Builder::new().build().unwrap().binder(),
        ),
        (
            "quoted_round_robin",
            quoted_round_robin::Builder::new().build().unwrap().binder(),
        ),
        (
            "one_per_prio",
            one_per_prio::Builder::new().build().unwrap().binder(),
        ),
    ];
    for (kind, b) in kinds {
        assert_eq!(ask(b, None), ["would deadlock"], "{kind}");
    }
}

#[test]
fn asking_an_agent_on_the_same_thread_is_refused() {
    let kinds: Vec<(&str, (Binder, Option<Binder>))> = vec![
        (
            "one_thread",
            same(one_thread::Builder::new().build().unwrap().binder()),
        ),
        (
            "active_group",
            same(
                active_group::Builder::new()
                    .build()
                    .unwrap()
                    .binder_with(BindParams::new().group("g")),
            ),
        ),
        (
            "thread_pool, one queue per coop",
            same(
                thread_pool::Builder::new()
                    .threads(4)
                    .build()
                    .unwrap()
                    .binder(),
            ),
        ),
        (
            "thread_pool of one thread",
            same(
                thread_pool::Builder::new()
                    .threads(1)
                    .build()
                    .unwrap()
                    .binder_with(BindParams::new().fifo(Fifo::Individual)),
            ),
        ),
        (
            "strictly_ordered",
            same(strictly_ordered::Builder::new().build().unwrap().binder()),
        ),
    ];
    for (kind, (a, b)) in kinds {
        assert_eq!(ask(a, b), ["would deadlock"], "{kind}");
    }
}

#[test]
fn an_agent_another_thread_runs_answers() {
    let pool = thread_pool::Builder::new().threads(2).build().unwrap();
    let kinds: Vec<(&str, (Binder, Option<Binder>))> = vec![
        (
            "active_obj",
            same(active_obj::Builder::new().build().unwrap().binder()),
        ),
        (
            "thread_pool, one queue per agent",
            same(pool.binder_with(BindParams::new().fifo(Fifo::Individual))),
        ),
        (
            "two one_thread dispatchers",
            (
                one_thread::Builder::new().build().unwrap().binder(),
                Some(one_thread::Builder::new().build().unwrap().binder()),
            ),
        ),
    ];
    for (kind, (a, b)) in kinds {
        assert_eq!(ask(a, b), ["reply 2"], "{kind}");
    }
}

/// An elastic pool running more than one thread answers a request from one of its queues
/// to another, whatever its minimum (limits 1, 4, 4: four threads run, none is added or
/// removed without a harmonizer); while the caller waits, the pool keeps a thread to answer.
#[test]
fn an_elastic_pool_running_several_threads_answers_whatever_its_minimum() {
    for limits in [(1, 4, 4), (1, 2, 4), (2, 2, 2)] {
        let pool = thread_pool::Builder::new()
            .thread_limits(limits.0, limits.1, limits.2)
            .build()
            .unwrap();
        let b = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
        assert_eq!(ask(b.clone(), Some(b)), ["reply 2"], "limits {limits:?}");
    }
}

/// A worker of a fixed pool of two waiting on an agent of another dispatcher does not make
/// a request between the pool's other queues a deadlock: that request is answered (once a
/// thread is free), not refused.
#[test]
fn a_wait_elsewhere_does_not_make_a_same_pool_request_a_deadlock() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    struct Slow;
    impl Agent for Slow {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe_self()
                .event(|_: &mut Self, _, r: &Request<u32, u32>| {
                    std::thread::sleep(Duration::from_millis(300));
                    let _ = r.reply(r.get() + 1);
                })?;
            Ok(())
        }
    }
    struct Waiter {
        slow: Mbox,
        asking: Arc<AtomicBool>,
        log: Log,
    }
    impl Agent for Waiter {
        fn on_start(&mut self, _ctx: &mut Context<Self>) {
            self.asking.store(true, Ordering::SeqCst);
            let r = request_reply::<u32, u32>(&self.slow, NEVER, 1);
            self.log.push(format!("waiter {r:?}"));
        }
    }
    struct Second {
        target: Mbox,
        asking: Arc<AtomicBool>,
        log: Log,
    }
    impl Agent for Second {
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            while !self.asking.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The waiter is (most likely) in its wait by now.
            std::thread::sleep(Duration::from_millis(50));
            let r = request_reply::<u32, u32>(&self.target, NEVER, 10);
            self.log.push(format!("second {r:?}"));
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    let got = within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let pool = thread_pool::Builder::new().threads(2).build().unwrap();
            let each = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
            let elsewhere = one_thread::Builder::new().build().unwrap().binder();
            let asking = Arc::new(AtomicBool::new(false));
            env.introduce_coop(|coop| {
                let slow = coop.add_agent_with_binder(Slow, elsewhere);
                let target = coop.add_agent_with_binder(Answerer, each.clone());
                coop.add_agent_with_binder(
                    Waiter {
                        slow,
                        asking: asking.clone(),
                        log: l.clone(),
                    },
                    each.clone(),
                );
                coop.add_agent_with_binder(
                    Second {
                        target,
                        asking,
                        log: l.clone(),
                    },
                    each,
                );
            })
            .unwrap();
        })
        .unwrap();
        let mut got = log.get();
        got.sort();
        got
    });
    assert_eq!(got, ["second Ok(11)", "waiter Ok(2)"]);
}

/// Through an MPMC mbox: refused when its only subscriber is on the caller's thread (also
/// through a binding to a second mbox), sent when another thread's agent also listens.
#[test]
fn through_an_mpmc_mbox_every_receiver_counts() {
    fn run(other_thread_listens: bool, through_binding: bool) -> Vec<String> {
        within_patience(move || {
            let log = Log::new();
            let (l, waited) = (log.clone(), log.clone());
            Environment::launch(move |env| {
                let service = env.create_mbox();
                let entry = if through_binding {
                    let entry = env.create_mbox();
                    let binding = agentbox::MultiSinkBinding::new();
                    binding
                        .bind::<Request<u32, u32>>(&entry, agentbox::Sink::from(service.clone()))
                        .unwrap();
                    std::mem::forget(binding);
                    entry
                } else {
                    service.clone()
                };
                if other_thread_listens {
                    // Registered first: subscribed before the asker starts.
                    let s = service.clone();
                    env.introduce_coop(|coop| {
                        coop.set_binder(active_obj::Builder::new().build().unwrap().binder());
                        coop.add_agent(Listener(s));
                    })
                    .unwrap();
                }
                let thread = one_thread::Builder::new().build().unwrap().binder();
                let s = service.clone();
                env.introduce_coop(move |coop| {
                    coop.set_binder(thread);
                    coop.add_agent(Listener(s.clone()));
                    coop.add_agent(Asker {
                        target: Some(entry),
                        log: l,
                    });
                })
                .unwrap();
                let deadline = std::time::Instant::now() + common::PATIENCE;
                while waited.len() == 0 && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                env.stop();
            })
            .unwrap();
            log.get()
        })
    }
    struct Listener(Mbox);
    impl Agent for Listener {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe(&self.0)
                .event(|_: &mut Self, _, r: &Request<u32, u32>| {
                    let _ = r.reply(r.get() + 1);
                })?;
            Ok(())
        }
    }
    assert_eq!(run(false, false), ["would deadlock"]);
    assert_eq!(run(false, true), ["would deadlock"]);
    assert_eq!(run(true, false), ["reply 2"]);
}
