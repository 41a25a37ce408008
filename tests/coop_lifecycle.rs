//! Coops: atomic registration, binding order by priority, parent/child deregistration,
//! reasons, notifications, registration errors.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{BindParams, CoopDeregistered, CoopRegistered, DefineError, Fifo, RegisterError};
use common::{coop_notice, within_patience, Log, Recorder, Script};

#[test]
fn a_message_from_a_sibling_on_start_waits_for_the_receivers_on_start() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                let l2 = l.clone();
                let receiver = coop.add_agent(
                    Script::new(&l)
                        .priority(Priority::P0)
                        .setup(|_, ctx| {
                            ctx.subscribe_self()
                                .event(|s: &mut Script, ctx, m: &&str| {
                                    s.log.push(format!("receiver got {m}"));
                                    ctx.deregister_coop(DeregReason::Normal);
                                })?;
                            Ok(())
                        })
                        .start(|s, _| s.log.push("receiver start")),
                );
                // Higher priority: bound and started first.
                coop.add_agent(Script::new(&l2).priority(Priority::P5).start(move |s, _| {
                    s.log.push("sender start");
                    send(&receiver, "hello").unwrap();
                }));
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(
            log.get(),
            ["sender start", "receiver start", "receiver got hello"]
        );
    });
}

#[test]
fn agents_are_bound_and_started_in_priority_order() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                for (name, p) in [
                    ("a0", Priority::P0),
                    ("b7", Priority::P7),
                    ("c3", Priority::P3),
                    ("d7", Priority::P7),
                    ("e0", Priority::P0),
                ] {
                    coop.add_agent(Script::new(&l).priority(p).start(move |s, ctx| {
                        s.log.push(name);
                        if name == "e0" {
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    }));
                }
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["b7", "d7", "c3", "a0", "e0"]);
    });
}

/// Logs every coop (de)registration notice it gets on `mbox`.
fn watcher(log: &Log, mbox: &Mbox, stop_after: usize) -> Script {
    let mbox = mbox.clone();
    Script::new(log).setup(move |_, ctx| {
        ctx.subscribe(&mbox)
            .event(|s: &mut Script, _, r: &CoopRegistered| {
                s.log.push(format!("reg {}", r.coop.id() > 0))
            })?;
        let mut seen = 0;
        ctx.subscribe(&mbox)
            .event(move |s: &mut Script, ctx, d: &CoopDeregistered| {
                s.log.push(format!("dereg {:?}", d.reason));
                seen += 1;
                if seen == stop_after {
                    ctx.environment().stop();
                }
            })?;
        Ok(())
    })
}

#[test]
fn children_get_reason_parent_and_notifications_report_every_coop() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let notes = env.create_mbox();
            env.introduce_coop(|coop| {
                coop.add_agent(watcher(&l, &notes, 3));
            })
            .unwrap();
            let mut parent = env.make_coop();
            parent
                .add_reg_notificator(&notes)
                .add_dereg_notificator(&notes);
            parent.add_agent(Script::new(&Log::new()));
            let parent = env.register_coop(parent).unwrap();
            for _ in 0..2 {
                let mut child = env.make_child_coop(&parent);
                child.add_dereg_notificator(&notes);
                child.add_agent(Script::new(&Log::new()));
                env.register_coop(child).unwrap();
            }
            assert!(parent.is_registered());
            parent.deregister(DeregReason::User(42));
        })
        .unwrap();
        assert_eq!(
            log.get(),
            ["reg true", "dereg Parent", "dereg Parent", "dereg User(42)"]
        );
    });
}

#[test]
fn stop_deregisters_top_level_coops_with_reason_shutdown_and_children_with_parent() {
    within_patience(|| {
        let (notes, seen) = Recorder::mbox(coop_notice);
        Environment::launch(move |env| {
            let mut root = env.make_coop();
            root.add_dereg_notificator(&notes)
                .add_agent(Script::new(&Log::new()));
            let root = env.register_coop(root).unwrap();
            let mut child = env.make_child_coop(&root);
            child
                .add_dereg_notificator(&notes)
                .add_agent(Script::new(&Log::new()));
            env.register_coop(child).unwrap();
            env.stop();
        })
        .unwrap();
        assert_eq!(seen.get(), ["dereg Parent", "dereg Shutdown"]);
    });
}

#[test]
fn a_child_of_a_deregistering_parent_cannot_register() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Script::new(&l).start(|s, ctx| {
                    let me = ctx.coop().unwrap();
                    ctx.deregister_coop(DeregReason::Normal);
                    assert!(!me.is_registered());
                    let r = ctx
                        .environment()
                        .register_coop(ctx.environment().make_child_coop(&me));
                    s.log.push(format!(
                        "{}",
                        matches!(r, Err(RegisterError::ParentNotRegistered))
                    ));
                }));
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["true"]);
    });
}

#[test]
fn a_failing_define_fails_the_registration_and_drops_every_agent() {
    within_patience(|| {
        let delivered = Arc::new(AtomicUsize::new(0));
        let d = delivered.clone();
        Environment::launch(move |env| {
            let news = env.create_mbox();
            let n = news.clone();
            let r = env.introduce_coop(|coop| {
                coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                    ctx.subscribe(&n).event(move |_: &mut Script, _, _: &u8| {
                        d.fetch_add(1, Ordering::SeqCst);
                    })?;
                    Ok(())
                }));
                coop.add_agent(
                    Script::new(&Log::new())
                        .setup(|_, _| Err(DefineError::Custom("not today".into()))),
                );
            });
            match r {
                Err(RegisterError::Define { index: 1, source }) => {
                    assert_eq!(source.to_string(), "not today")
                }
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(env.coop_count(), 0);
            // The first agent's subscription went with it.
            send(&news, 1u8).unwrap();
        })
        .unwrap();
        assert_eq!(delivered.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn an_empty_coop_registers_and_deregisters() {
    within_patience(|| {
        Environment::launch(|env| {
            let c = env.register_coop(env.make_coop()).unwrap();
            assert_eq!(env.coop_count(), 1);
            assert!(c.is_registered());
            c.deregister(DeregReason::Normal);
        })
        .unwrap();
    });
}

#[test]
fn coop_exception_reaction_is_inherited_by_its_agents_and_children() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            // Agent: Inherit -> child coop: Inherit -> parent coop: Ignore.
            let mut parent = env.make_coop();
            parent.set_exception_reaction(ExceptionReaction::Ignore);
            let parent = env.register_coop(parent).unwrap();
            let p = parent.clone();
            env.introduce_child_coop(&parent, |coop| {
                coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe_self()
                        .event(move |s: &mut Script, _, n: &u8| {
                            if *n == 0 {
                                panic!("ignored by the parent coop's reaction");
                            }
                            s.log.push(format!("got {n}"));
                            p.deregister(DeregReason::Normal);
                        })?;
                    let me = ctx.direct_mbox();
                    send(&me, 0u8).unwrap();
                    send(&me, 1u8).unwrap();
                    Ok(())
                }));
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["got 1"]);
    });
}

static QUIT_FINISHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Deregisters its own coop at once, from its own thread.
struct QuickQuit;
impl Agent for QuickQuit {
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        ctx.deregister_coop(DeregReason::Normal);
    }
    fn on_finish(&mut self, _: &mut Context<Self>) {
        QUIT_FINISHED.store(true, Ordering::SeqCst);
    }
}

/// Describes a notice; holds the registering thread inside its registration notice until
/// the coop's agent has finished, so that the coop goes final meanwhile.
fn slow_reg_notice(m: &agentbox::Message) -> String {
    if m.downcast_ref::<CoopRegistered>().is_some() {
        let until = std::time::Instant::now() + common::PATIENCE;
        while !QUIT_FINISHED.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
        // Room for the finalizer to run (what it may do here is the point of the test).
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    coop_notice(m)
}

#[test]
fn the_deregistration_notice_never_precedes_the_registration_notice() {
    within_patience(|| {
        let (notes, seen) = Recorder::mbox(slow_reg_notice);
        Environment::launch(move |env| {
            let own_thread = agentbox::dispatcher::active_obj::Builder::new()
                .build()
                .unwrap();
            let mut coop = env.make_coop();
            coop.set_binder(own_thread.binder());
            coop.add_reg_notificator(&notes)
                .add_dereg_notificator(&notes)
                .add_agent(QuickQuit);
            env.register_coop(coop).unwrap();
        })
        .unwrap();
        assert!(QUIT_FINISHED.load(Ordering::SeqCst));
        assert_eq!(seen.get(), ["reg", "dereg Normal"]);
    });
}

/// The deregistration notice of a coop is sent after every agent of it has been dropped,
/// even when a slow `Drop` runs on another thread than the one handling the notice.
#[test]
fn the_deregistration_notice_comes_after_every_agent_is_dropped() {
    struct SlowToDrop(Arc<AtomicUsize>);
    impl Agent for SlowToDrop {
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    impl Drop for SlowToDrop {
        fn drop(&mut self) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    struct Watcher {
        dropped: Arc<AtomicUsize>,
        seen: Arc<AtomicUsize>,
    }
    impl Agent for Watcher {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe_self()
                .event(|w: &mut Self, ctx, _: &CoopDeregistered| {
                    w.seen
                        .store(w.dropped.load(Ordering::SeqCst), Ordering::SeqCst);
                    ctx.deregister_coop(DeregReason::Normal);
                })?;
            Ok(())
        }
    }
    within_patience(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (d, s) = (dropped.clone(), seen.clone());
        Environment::launch(move |env| {
            // The watcher on the default dispatcher; the watched agents on a thread pool.
            let watcher = env
                .introduce_coop(|coop| {
                    coop.add_agent(Watcher {
                        dropped: d.clone(),
                        seen: s,
                    })
                })
                .unwrap();
            let pool = agentbox::dispatcher::thread_pool::Builder::new()
                .threads(2)
                .build()
                .unwrap();
            let mut coop = env.make_coop();
            coop.set_binder(pool.binder_with(BindParams::new().fifo(Fifo::Individual)));
            coop.add_dereg_notificator(&watcher);
            coop.add_agent(SlowToDrop(d.clone()));
            coop.add_agent(SlowToDrop(d));
            env.register_coop(coop).unwrap();
        })
        .unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            2,
            "both agents dropped before the notice"
        );
    });
}
