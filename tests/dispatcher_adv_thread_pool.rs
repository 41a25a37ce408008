//! The behavioural suite on `adv_thread_pool`, plus its own rules: thread-safe handlers run
//! in parallel, an exclusive one runs alone and holds back the thread-safe ones behind it,
//! thread-safe handlers accept only the Ignore and Abort reactions; a panic in `Drop` is
//! contained and every drop counted for thread-safe demands too.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use agentbox::dispatcher::adv_thread_pool;
use agentbox::prelude::*;
use agentbox::{SubscribeError, ThreadSafeContext};
use common::{within_patience, Log};

dispatcher_suite!(suite, |_env| {
    agentbox::dispatcher::adv_thread_pool::Builder::new()
        .threads(2)
        .build()
        .expect("build adv_thread_pool")
        .binder()
});

struct Safe(u32);
struct Exclusive;

struct Parallel {
    barrier: Arc<Barrier>,
    running: Arc<AtomicUsize>,
    log: Log,
    late: u32,
}

impl Agent for Parallel {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event_thread_safe(|a: &Self, ctx: &ThreadSafeContext, s: &Safe| {
                a.running.fetch_add(1, Ordering::SeqCst);
                if s.0 < 4 {
                    // Completes only if four of these run at once.
                    a.barrier.wait();
                }
                a.log.push(format!("safe {}", s.0));
                a.running.fetch_sub(1, Ordering::SeqCst);
                if s.0 == a.late {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, _: &Exclusive| {
                a.log.push(format!(
                    "exclusive alone={}",
                    a.running.load(Ordering::SeqCst) == 0
                ));
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        for i in 0..4 {
            send(&me, Safe(i)).unwrap();
        }
        send(&me, Exclusive).unwrap();
        send(&me, Safe(4)).unwrap();
        send(&me, Safe(5)).unwrap();
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Ignore
    }
}

#[test]
fn four_thread_safe_handlers_run_at_once_and_an_exclusive_one_runs_alone_after_them() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let pool = adv_thread_pool::Builder::new().threads(4).build().unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(pool.binder());
                coop.add_thread_safe_agent(Parallel {
                    barrier: Arc::new(Barrier::new(4)),
                    running: Arc::new(AtomicUsize::new(0)),
                    log: l,
                    late: 5,
                });
            })
            .unwrap();
        })
        .unwrap();
        let log = log.get();
        assert_eq!(log.len(), 7, "{log:?}");
        let mut first: Vec<&String> = log[..4].iter().collect();
        first.sort();
        assert_eq!(first, ["safe 0", "safe 1", "safe 2", "safe 3"]);
        assert_eq!(log[4], "exclusive alone=true");
        let mut last: Vec<&String> = log[5..].iter().collect();
        last.sort();
        assert_eq!(last, ["safe 4", "safe 5"]);
    });
}

struct WrongReaction(Log);
impl Agent for WrongReaction {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let r = ctx
            .subscribe_self()
            .event_thread_safe(|_: &Self, _: &ThreadSafeContext, _: &u8| {});
        self.0.push(format!(
            "{}",
            matches!(r, Err(SubscribeError::ReactionNotAllowed { .. }))
        ));
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        ctx.deregister_coop(DeregReason::Normal);
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::DeregisterCoop
    }
}

#[test]
fn thread_safe_handlers_need_the_ignore_or_abort_reaction() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_thread_safe_agent(WrongReaction(l));
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["true"]);
    });
}

/// A payload whose `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a bomb handled in parallel");
        }
    }
}

/// A thread-safe agent whose `Drop` panics; logs what its thread-safe handlers get.
struct SafeVictim(Log);

impl Agent for SafeVictim {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event_thread_safe(|a: &Self, _: &ThreadSafeContext, n: &u32| {
                a.0.push(format!("got {n}"))
            })?;
        ctx.subscribe_self()
            .event_thread_safe(|a: &Self, _: &ThreadSafeContext, _: &Bomb| a.0.push("bomb"))?;
        Ok(())
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Ignore
    }
}

impl Drop for SafeVictim {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the thread-safe agent's drop");
        }
    }
}

/// Thread-safe demands run beside each other, not through the worker's table: a panic in
/// a payload's `Drop` after a thread-safe handler, and in the agent's own `Drop`, are
/// reported and the agent and the pool serve on.
#[test]
fn panics_in_drop_after_thread_safe_handlers_are_reported_and_the_pool_serves_on() {
    within_patience(|| {
        let log = Log::new();
        let errors = Log::new();
        let (l, e) = (log.clone(), errors.clone());
        let params = agentbox::EnvParams::new().error_logger(move |line| e.push(line));
        Environment::launch_with(params, move |env| {
            let pool = adv_thread_pool::Builder::new().threads(2).build().unwrap();
            let me = env
                .introduce_coop(|coop| {
                    coop.set_binder(pool.binder());
                    coop.add_thread_safe_agent(SafeVictim(l.clone()))
                })
                .unwrap();
            send(&me, Bomb).unwrap();
            l.wait_for(1);
            for n in 0..10u32 {
                send(&me, n).unwrap();
            }
            l.wait_for(11);
            env.stop();
        })
        .unwrap();
        let mut got = log.get();
        got.sort();
        let mut want: Vec<String> = (0..10).map(|n| format!("got {n}")).collect();
        want.push("bomb".into());
        want.sort();
        assert_eq!(got, want);
        let errors = errors.get();
        for what in ["a bomb handled in parallel", "the thread-safe agent's drop"] {
            assert!(
                errors.iter().any(|e| e.contains(what)),
                "{what}: {errors:?}"
            );
        }
    });
}

struct SafeCounted(Arc<AtomicU64>);

impl Agent for SafeCounted {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event_thread_safe(|a: &Self, _: &ThreadSafeContext, _: &u64| {
                a.0.fetch_add(1, Ordering::Relaxed);
            })?;
        Ok(())
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Ignore
    }
}

/// The suite's churn with thread-safe agents: a demand classified as thread-safe while its
/// agent was active, run after its coop began to deregister, is counted too.
#[test]
fn sent_is_handled_plus_counted_drops_under_churn_of_thread_safe_agents() {
    suite::robust::churn(|coop, handled| coop.add_thread_safe_agent(SafeCounted(handled)));
}
