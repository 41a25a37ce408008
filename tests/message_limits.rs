//! Message limits: declaration rules, drop, transform, default limits, depth 32, abort.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentbox::limits::{LimitError, Transformed};
use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams};
use agentbox::prelude::*;
use agentbox::{RegisterError, SubscribeError};
use common::{within_patience, Log};

struct Job(u32);
struct Other;
struct Hold(Arc<AtomicBool>);

fn hold(ctx: &mut Context<impl Agent>) -> Result<(), DefineError> {
    ctx.subscribe_self().event(|_, _, h: &Hold| {
        while !h.0.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    })?;
    Ok(())
}

type DefineFn = Box<dyn FnOnce(&mut Context<Declares>) -> Result<(), DefineError> + Send>;

/// An agent whose `define` is the closure given.
struct Declares(Option<DefineFn>);
impl Agent for Declares {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        (self.0.take().unwrap())(ctx)
    }
}

fn define_result(
    f: impl FnOnce(&mut Context<Declares>) -> Result<(), DefineError> + Send + 'static,
) -> Result<(), RegisterError> {
    within_patience(move || {
        let mut result = None;
        Environment::launch(|env| {
            result = Some(env.introduce_coop(|coop| {
                coop.add_agent(Declares(Some(Box::new(f))));
            }));
            env.stop();
        })
        .unwrap();
        result.unwrap().map(|_| ())
    })
}

#[test]
fn subscribing_to_a_type_without_a_limit_is_a_typed_error() {
    let r = define_result(|ctx| {
        ctx.limit_then_drop::<Job>(2)?;
        ctx.subscribe_self().event(|_, _, _: &Job| {})?;
        ctx.subscribe_self().event(|_, _, _: &Other| {})?;
        Ok(())
    });
    match r {
        Err(RegisterError::Define {
            source: DefineError::Subscribe(SubscribeError::NoLimit { type_name }),
            ..
        }) => assert!(type_name.ends_with("Other")),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn two_limits_for_one_type_is_a_typed_error() {
    let r = define_result(|ctx| {
        ctx.limit_then_drop::<Job>(2)?;
        assert!(matches!(
            ctx.limit_then_abort::<Job>(3),
            Err(LimitError::Duplicate { .. })
        ));
        ctx.default_limit_then_drop(1)?;
        assert!(matches!(
            ctx.default_limit_then_drop(1),
            Err(LimitError::Duplicate { .. })
        ));
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn a_limit_after_the_first_subscription_is_too_late() {
    let r = define_result(|ctx| {
        ctx.subscribe_self().event(|_, _, _: &Job| {})?;
        assert_eq!(ctx.limit_then_drop::<Other>(1), Err(LimitError::TooLate));
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
}

/// Runs a coop of `limited` (held busy by a `Hold`) plus whatever `extra` adds; sends the
/// hold, then `jobs` jobs to `limited`, releases, and returns the log once `expect` lines
/// are in it.
fn run_held<A: Agent>(
    limited: impl FnOnce(&Environment, &Log) -> A + Send + 'static,
    jobs: u32,
    expect: usize,
) -> Vec<String> {
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let target = env
                .introduce_coop(|coop| coop.add_agent(limited(env, &l)))
                .unwrap();
            let released = Arc::new(AtomicBool::new(false));
            send(&target, Hold(released.clone())).unwrap();
            for i in 0..jobs {
                send(&target, Job(i)).unwrap();
            }
            released.store(true, Ordering::SeqCst);
            l.wait_for(expect);
            env.stop();
        })
        .unwrap();
        log.get()
    })
}

struct Overflowed(u32);

struct Transforming {
    log: Log,
    sink: Mbox,
}
impl Agent for Transforming {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let sink = self.sink.clone();
        ctx.limit_then_transform::<Job, _>(1, move |j| Transformed::new(&sink, Overflowed(j.0)))?;
        ctx.limit_then_drop::<Hold>(1)?;
        ctx.limit_then_drop::<Overflowed>(100)?;
        hold(ctx)?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, j: &Job| a.log.push(format!("job {}", j.0)))?;
        let log = self.log.clone();
        let sink = self.sink.clone();
        ctx.subscribe(&sink)
            .event(move |_: &mut Self, _, o: &Overflowed| {
                log.push(format!("overflowed {}", o.0))
            })?;
        Ok(())
    }
}

#[test]
fn transform_turns_each_message_over_the_limit_into_another() {
    let mut log = run_held(
        |env, l| Transforming {
            log: l.clone(),
            sink: env.create_mbox(),
        },
        4,
        4,
    );
    log.sort();
    assert_eq!(
        log,
        ["job 0", "overflowed 1", "overflowed 2", "overflowed 3"]
    );
}

struct Defaulted {
    log: Log,
}
impl Agent for Defaulted {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.limit_then_drop::<Hold>(1)?;
        ctx.default_limit_then_drop(2)?;
        hold(ctx)?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, j: &Job| a.log.push(format!("job {}", j.0)))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, _: &Other| a.log.push("other"))?;
        Ok(())
    }
}

#[test]
fn the_default_limit_gives_each_other_type_its_own_counter() {
    let log = within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let target = env
                .introduce_coop(|coop| coop.add_agent(Defaulted { log: l.clone() }))
                .unwrap();
            let released = Arc::new(AtomicBool::new(false));
            send(&target, Hold(released.clone())).unwrap();
            for i in 0..5 {
                send(&target, Job(i)).unwrap();
                send(&target, Other).unwrap();
            }
            released.store(true, Ordering::SeqCst);
            l.wait_for(4);
            env.stop();
        })
        .unwrap();
        log.get()
    });
    assert_eq!(log, ["job 0", "other", "job 1", "other"]);
}

/// An agent that never admits a `Job` (limit 0) and transforms it into a `Job` to itself:
/// each transformation goes one redirection deeper, and the one arriving at depth 32 is
/// dropped. Exactly 32 transformations happen for one send.
struct Looping {
    calls: Arc<AtomicUsize>,
}
impl Agent for Looping {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        let calls = self.calls.clone();
        ctx.limit_then_transform::<Job, _>(0, move |j| {
            calls.fetch_add(1, Ordering::SeqCst);
            Transformed::new(&me, Job(j.0 + 1))
        })?;
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Job| panic!("a job over a zero limit is never handled"))?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        send(&ctx.direct_mbox(), Job(0)).unwrap();
        ctx.deregister_coop(DeregReason::Normal);
    }
}

#[test]
fn a_transform_loop_is_dropped_at_redirection_depth_32() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    within_patience(move || {
        Environment::launch(|env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Looping { calls: c });
            })
            .unwrap();
        })
        .unwrap();
    });
    assert_eq!(calls.load(Ordering::SeqCst), 32);
}

/// Two agents with limit 0 redirecting to each other: the message bounces until depth 32
/// and is dropped; a chain catches the overflow of neither.
#[test]
fn a_redirect_loop_ends_at_depth_32() {
    within_patience(|| {
        Environment::launch(|env| {
            let ping = env.create_mbox();
            let pong = env.create_mbox();
            struct Bouncer {
                from: Mbox,
                to: Mbox,
            }
            impl Agent for Bouncer {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.limit_then_redirect::<Job>(0, &self.to)?;
                    ctx.subscribe(&self.from.clone())
                        .event(|_: &mut Self, _, _: &Job| panic!("never admitted"))?;
                    Ok(())
                }
            }
            env.introduce_coop(|coop| {
                coop.add_agent(Bouncer {
                    from: ping.clone(),
                    to: pong.clone(),
                });
                coop.add_agent(Bouncer {
                    from: pong.clone(),
                    to: ping.clone(),
                });
            })
            .unwrap();
            // Returns (no stack overflow, no hang): the loop ended at depth 32.
            send(&ping, Job(0)).unwrap();
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn redirect_into_a_full_chain_never_blocks() {
    within_patience(|| {
        Environment::launch(|env| {
            // A chain that would make senders wait a minute when full.
            let chain =
                env.create_mchain(MChainParams::bounded(1).wait_on_full(Duration::from_secs(60)));
            struct Redirecting(Mbox);
            impl Agent for Redirecting {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.limit_then_redirect::<Job>(0, &self.0)?;
                    ctx.subscribe_self().event(|_: &mut Self, _, _: &Job| {})?;
                    Ok(())
                }
            }
            let a = env
                .introduce_coop(|coop| coop.add_agent(Redirecting(chain.as_mbox())))
                .unwrap();
            // Were a redirect to wait on the full chain, each send would take a minute and
            // the test would fail its patience.
            for i in 0..3 {
                send(&a, Job(i)).unwrap();
            }
            let mut got = Vec::new();
            receive(
                &chain,
                ReceiveParams::new().no_wait(),
                &mut Handlers::new().on(|j: &Job| got.push(j.0)),
            );
            assert_eq!(got, [0]);
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn child_entry() {
    if std::env::var_os("AGENTBOX_LIMIT_ABORT_CHILD").is_none() {
        return; // only meaningful inside the child process
    }
    struct Aborting;
    impl Agent for Aborting {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.limit_then_abort::<Job>(1)?;
            ctx.subscribe_self().event(|_: &mut Self, _, _: &Job| {})?;
            Ok(())
        }
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            send(&ctx.direct_mbox(), Job(0)).unwrap();
            send(&ctx.direct_mbox(), Job(1)).unwrap();
        }
    }
    Environment::launch(|env| {
        env.introduce_coop(|coop| {
            coop.add_agent(Aborting);
        })
        .unwrap();
    })
    .unwrap();
    println!("NOT ABORTED");
}

#[test]
fn a_message_over_an_abort_limit_aborts_the_process() {
    common::expect_child_abort("AGENTBOX_LIMIT_ABORT_CHILD", "over its limit of 1");
}
