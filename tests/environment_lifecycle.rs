//! The environment: autoshutdown, explicit stop, stop guards, wrapped environments, many
//! environments side by side, init panics.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{EnvParams, StopGuard, StopGuardError, WrappedEnv};
use common::{within_patience, Log, Script};

#[test]
fn launch_returns_when_the_last_coop_is_gone() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            for i in 0..3 {
                env.introduce_coop(|coop| {
                    coop.add_agent(Script::new(&l).start(move |s, ctx| {
                        s.log.push(format!("agent {i}"));
                        ctx.deregister_coop(DeregReason::Normal);
                    }));
                })
                .unwrap();
            }
        })
        .unwrap();
        assert_eq!(log.len(), 3);
    });
}

#[test]
fn launch_with_no_coop_returns_at_once() {
    within_patience(|| Environment::launch(|_| {}).unwrap());
}

#[test]
fn without_autoshutdown_the_environment_runs_until_stopped() {
    within_patience(|| {
        let stopping = Arc::new(AtomicBool::new(false));
        let s = stopping.clone();
        Environment::launch_with(EnvParams::new().disable_autoshutdown(), move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(
                    Script::new(&Log::new())
                        .start(|_, ctx| ctx.deregister_coop(DeregReason::Normal)),
                );
            })
            .unwrap();
            let env = env.clone();
            std::thread::spawn(move || {
                while env.coop_count() > 0 {
                    std::thread::yield_now();
                }
                s.store(true, Ordering::SeqCst);
                env.stop();
            });
        })
        .unwrap();
        assert!(
            stopping.load(Ordering::SeqCst),
            "launch returned before stop()"
        );
    });
}

struct Guard {
    calls: AtomicUsize,
}
impl StopGuard for Guard {
    fn stop(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn stop_waits_for_every_stop_guard_and_calls_each_once() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch_with(EnvParams::new().disable_autoshutdown(), move |env| {
            let g1 = Arc::new(Guard {
                calls: AtomicUsize::new(0),
            });
            let g2 = Arc::new(Guard {
                calls: AtomicUsize::new(0),
            });
            let (d1, d2): (Arc<dyn StopGuard>, Arc<dyn StopGuard>) = (g1.clone(), g2.clone());
            env.setup_stop_guard(d1.clone()).unwrap();
            env.setup_stop_guard(d2.clone()).unwrap();
            env.stop();
            env.stop();
            assert_eq!(g1.calls.load(Ordering::SeqCst), 1);
            assert_eq!(g2.calls.load(Ordering::SeqCst), 1);
            assert_eq!(
                env.setup_stop_guard(Arc::new(Guard {
                    calls: AtomicUsize::new(0)
                })),
                Err(StopGuardError::StopInProgress)
            );
            // Registration still works while the guards finish.
            env.introduce_coop(|coop| {
                coop.add_agent(
                    Script::new(&l).start(|s, _| s.log.push("registered during guards")),
                );
            })
            .unwrap();
            env.remove_stop_guard(&d1);
            assert!(!env.is_shutting_down());
            env.remove_stop_guard(&d2);
            assert!(env.is_shutting_down());
        })
        .unwrap();
        assert_eq!(log.get(), ["registered during guards"]);
    });
}

struct Finisher(Arc<AtomicUsize>);
impl Agent for Finisher {
    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_wrapped_environment_stops_when_dropped_and_its_agents_finish() {
    within_patience(|| {
        let finished = Arc::new(AtomicUsize::new(0));
        {
            let wrapped = WrappedEnv::new(|_| {}).unwrap();
            let f = finished.clone();
            wrapped
                .environment()
                .introduce_coop(move |coop| {
                    coop.add_agent(Finisher(f.clone()));
                    coop.add_agent(Finisher(f));
                })
                .unwrap();
            assert_eq!(finished.load(Ordering::SeqCst), 0);
        }
        assert_eq!(finished.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn many_environments_run_side_by_side() {
    within_patience(|| {
        let total = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let total = total.clone();
                std::thread::spawn(move || {
                    Environment::launch(move |env| {
                        env.introduce_coop(|coop| {
                            coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                                ctx.subscribe_self().event(
                                    move |_: &mut Script, ctx, n: &u32| {
                                        total.fetch_add(1, Ordering::SeqCst);
                                        if *n < 999 {
                                            send(&ctx.direct_mbox(), n + 1).unwrap();
                                        } else {
                                            ctx.deregister_coop(DeregReason::Normal);
                                        }
                                    },
                                )?;
                                send(&ctx.direct_mbox(), 0u32).unwrap();
                                Ok(())
                            }));
                        })
                        .unwrap();
                    })
                    .unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(total.load(Ordering::SeqCst), 4000);
    });
}

#[test]
fn a_panicking_init_stops_the_environment_and_the_panic_goes_on() {
    within_patience(|| {
        let finished = Arc::new(AtomicUsize::new(0));
        let f = finished.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Environment::launch_with(EnvParams::new().disable_autoshutdown(), move |env| {
                env.introduce_coop(|coop| {
                    coop.add_agent(Finisher(f));
                })
                .unwrap();
                panic!("init failed");
            })
        }));
        assert!(r.is_err());
        assert_eq!(finished.load(Ordering::SeqCst), 1);
    });
}

/// An agent on a dispatcher of its own, whose handle is gone: when `launch` returns, the
/// agent has been dropped and the dispatcher's thread has ended, even though the coop's
/// last step ran on that very thread (the dispatcher's last binder is then dropped, and its
/// thread joined, by the environment's finalizer thread).
#[test]
fn launch_returns_after_an_agent_on_a_private_dispatcher_is_dropped() {
    struct SlowToDrop {
        dropped: Arc<AtomicBool>,
        thread: Arc<std::sync::Mutex<Option<std::thread::Thread>>>,
    }
    impl Agent for SlowToDrop {
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            *self.thread.lock().unwrap() = Some(std::thread::current());
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    impl Drop for SlowToDrop {
        fn drop(&mut self) {
            // Long enough for `launch` to have returned, were it not waiting for this.
            std::thread::sleep(std::time::Duration::from_millis(300));
            self.dropped.store(true, Ordering::SeqCst);
        }
    }
    within_patience(|| {
        let dropped = Arc::new(AtomicBool::new(false));
        let thread = Arc::new(std::sync::Mutex::new(None));
        let (d, t) = (dropped.clone(), thread.clone());
        Environment::launch(move |env| {
            let disp = agentbox::dispatcher::one_thread::Builder::new()
                .name("private")
                .build()
                .unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(disp.binder());
                coop.add_agent(SlowToDrop {
                    dropped: d,
                    thread: t,
                });
            })
            .unwrap();
            // The coop now holds the dispatcher's only binder.
        })
        .unwrap();
        assert!(dropped.load(Ordering::SeqCst), "the agent was dropped");
        let worker = thread.lock().unwrap().clone().expect("on_start ran");
        assert_eq!(worker.name(), Some("private"));
    });
}

/// `Environment::keep` holds a guard past the end of `launch`'s closure, until every coop
/// is gone after the stop; then drops the guards last kept first, before `launch` returns.
/// A guard whose drop panics is logged, and the others are still dropped.
#[test]
fn kept_values_live_until_the_environment_ends_and_go_last_first() {
    struct Guard(&'static str, Log);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.1.push(format!("drop {}", self.0));
            if self.0 == "panicky" {
                panic!("a guard's drop panicked");
            }
        }
    }
    struct Stopper(Log);
    impl Agent for Stopper {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe_self().event(|a: &mut Self, ctx, _: &u32| {
                a.0.push("agent runs after the closure");
                ctx.environment().stop();
            })?;
            Ok(())
        }
        fn on_finish(&mut self, _ctx: &mut Context<Self>) {
            self.0.push("agent finished");
        }
    }
    let log = Log::new();
    let l = log.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            env.keep(Guard("first", l.clone()));
            env.keep(Guard("panicky", l.clone()));
            env.keep(Guard("last", l.clone()));
            let me = env
                .introduce_coop(|coop| coop.add_agent(Stopper(l.clone())))
                .unwrap();
            send(&me, 1u32).unwrap();
            l.push("closure ends");
        })
        .unwrap();
    });
    let got = log.get();
    let closure = got.iter().position(|s| s == "closure ends").unwrap();
    let finished = got.iter().position(|s| s == "agent finished").unwrap();
    assert_eq!(
        &got[finished + 1..],
        ["drop last", "drop panicky", "drop first"],
        "{got:?}"
    );
    assert!(closure < finished, "{got:?}");
}
