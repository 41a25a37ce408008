//! The behavioural suite every dispatcher kind must pass.
//!
//! `dispatcher_suite!(name, make_binder)` stamps the scenarios into `mod name`;
//! `make_binder: fn(&Environment) -> Binder` gives the binder the agents use (called once
//! per coop, so kinds with per-coop resources are exercised as users would).

#[macro_export]
macro_rules! dispatcher_suite {
    ($name:ident, $make_binder:expr) => {
        mod $name {
            use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
            use std::sync::Arc;

            use agentbox::prelude::*;
            use agentbox::{Binder, CoopDeregistered, EnvParams};

            use $crate::common::{within_patience, Log};

            fn binder(env: &Environment) -> Binder {
                let f: fn(&Environment) -> Binder = $make_binder;
                f(env)
            }

            struct Seq(u32, u32); // (sender, number)
            struct Done;

            /// Receives numbered messages from several senders, checks each sender's order
            /// and that no two handlers overlap; deregisters after `expected`.
            struct Receiver {
                expected: usize,
                seen: usize,
                last: Vec<Option<u32>>,
                busy: Arc<AtomicBool>,
                log: Log,
            }

            impl Agent for Receiver {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|a: &mut Self, ctx, m: &Seq| {
                        assert!(!a.busy.swap(true, Ordering::SeqCst), "handlers overlapped");
                        let last = &mut a.last[m.0 as usize];
                        assert!(last.map_or(m.1 == 0, |l| m.1 == l + 1), "out of order");
                        *last = Some(m.1);
                        a.seen += 1;
                        std::hint::spin_loop();
                        a.busy.store(false, Ordering::SeqCst);
                        if a.seen == a.expected {
                            a.log.push(format!("received {}", a.seen));
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    })?;
                    Ok(())
                }
            }

            struct Sender {
                id: u32,
                to: Mbox,
                count: u32,
            }

            impl Agent for Sender {
                fn on_start(&mut self, _ctx: &mut Context<Self>) {
                    for i in 0..self.count {
                        send(&self.to, Seq(self.id, i)).unwrap();
                    }
                }
            }

            #[test]
            fn one_senders_messages_arrive_in_send_order_and_never_overlap() {
                within_patience(|| {
                    let log = Log::new();
                    let l = log.clone();
                    Environment::launch(move |env| {
                        let b = binder(env);
                        env.introduce_coop(|coop| {
                            coop.set_binder(b);
                            let to = coop.add_agent(Receiver {
                                expected: 4 * 500,
                                seen: 0,
                                last: vec![None; 6],
                                busy: Arc::new(AtomicBool::new(false)),
                                log: l,
                            });
                            for id in 0..4 {
                                coop.add_agent(Sender {
                                    id,
                                    to: to.clone(),
                                    count: 500,
                                });
                            }
                        })
                        .unwrap();
                    })
                    .unwrap();
                    assert_eq!(log.get(), vec!["received 2000"]);
                });
            }

            #[test]
            fn messages_from_outside_threads_keep_each_threads_order() {
                within_patience(|| {
                    let log = Log::new();
                    let l = log.clone();
                    Environment::launch(move |env| {
                        let b = binder(env);
                        let to = env
                            .introduce_coop(|coop| {
                                coop.set_binder(b);
                                coop.add_agent(Receiver {
                                    expected: 3 * 1000,
                                    seen: 0,
                                    last: vec![None; 3],
                                    busy: Arc::new(AtomicBool::new(false)),
                                    log: l,
                                })
                            })
                            .unwrap();
                        let threads: Vec<_> = (0..3)
                            .map(|id| {
                                let to = to.clone();
                                std::thread::spawn(move || {
                                    for i in 0..1000 {
                                        send(&to, Seq(id, i)).unwrap();
                                    }
                                })
                            })
                            .collect();
                        for t in threads {
                            t.join().unwrap();
                        }
                    })
                    .unwrap();
                    assert_eq!(log.get(), vec!["received 3000"]);
                });
            }

            struct Lifecycle {
                log: Log,
                name: &'static str,
                early: bool,
            }

            impl Agent for Lifecycle {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|a: &mut Self, ctx, n: &u32| {
                        a.log.push(format!("{} msg {n}", a.name));
                        if *n == 2 {
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    })?;
                    if self.early {
                        // Sent before the agent is bound: must wait for on_start.
                        for n in 0..3u32 {
                            send(&ctx.direct_mbox(), n).unwrap();
                        }
                    }
                    Ok(())
                }
                fn on_start(&mut self, _ctx: &mut Context<Self>) {
                    self.log.push(format!("{} start", self.name));
                }
                fn on_finish(&mut self, _ctx: &mut Context<Self>) {
                    self.log.push(format!("{} finish", self.name));
                }
            }

            #[test]
            fn on_start_runs_first_and_on_finish_last_even_for_early_messages() {
                within_patience(|| {
                    let log = Log::new();
                    let l = log.clone();
                    Environment::launch(move |env| {
                        let mut coop = env.make_coop();
                        coop.set_binder(binder(env));
                        let mbox = coop.add_agent(Lifecycle {
                            log: l,
                            name: "a",
                            early: true,
                        });
                        // Before registration the agent has no subscriptions: dropped.
                        send(&mbox, 7u32).unwrap();
                        env.register_coop(coop).unwrap();
                        // Sent after deregistration began: never handled.
                        send(&mbox, 99u32).unwrap();
                    })
                    .unwrap();
                    let got = log.get();
                    assert_eq!(got.first().map(String::as_str), Some("a start"));
                    assert_eq!(got.last().map(String::as_str), Some("a finish"));
                    assert_eq!(&got[1..4], ["a msg 0", "a msg 1", "a msg 2"]);
                    assert!(got.len() == 5 || (got.len() == 6 && got[4] == "a msg 99"));
                });
            }

            struct Busy {
                finished: Arc<AtomicUsize>,
                started: Arc<AtomicUsize>,
            }

            impl Agent for Busy {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|_: &mut Self, ctx, _: &Done| {
                        // Keeps itself busy until the environment stops it.
                        send(&ctx.direct_mbox(), Done).unwrap();
                    })?;
                    Ok(())
                }
                fn on_start(&mut self, ctx: &mut Context<Self>) {
                    self.started.fetch_add(1, Ordering::SeqCst);
                    send(&ctx.direct_mbox(), Done).unwrap();
                }
                fn on_finish(&mut self, _ctx: &mut Context<Self>) {
                    self.finished.fetch_add(1, Ordering::SeqCst);
                }
            }

            #[test]
            fn stop_finishes_every_busy_agent_of_every_coop() {
                within_patience(|| {
                    let finished = Arc::new(AtomicUsize::new(0));
                    let started = Arc::new(AtomicUsize::new(0));
                    let (f, s) = (finished.clone(), started.clone());
                    Environment::launch(move |env| {
                        for _ in 0..5 {
                            let b = binder(env);
                            env.introduce_coop(|coop| {
                                coop.set_binder(b);
                                for _ in 0..4 {
                                    coop.add_agent(Busy {
                                        finished: f.clone(),
                                        started: s.clone(),
                                    });
                                }
                            })
                            .unwrap();
                        }
                        while s.load(Ordering::SeqCst) < 20 {
                            std::thread::yield_now();
                        }
                        env.stop();
                        assert!(matches!(
                            env.register_coop(env.make_coop()),
                            Err(agentbox::RegisterError::ShuttingDown)
                        ));
                    })
                    .unwrap();
                    assert_eq!(started.load(Ordering::SeqCst), 20);
                    assert_eq!(finished.load(Ordering::SeqCst), 20);
                });
            }

            struct Panicky {
                log: Log,
                reaction: ExceptionReaction,
                notify: Mbox,
            }

            impl Agent for Panicky {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|a: &mut Self, _, n: &u32| {
                        if *n == 1 {
                            panic!("handler failure {n}");
                        }
                        a.log.push(format!("handled {n}"));
                        if *n == 10 {
                            send(&a.notify, Done).unwrap();
                        }
                    })?;
                    Ok(())
                }
                fn on_finish(&mut self, _ctx: &mut Context<Self>) {
                    self.log.push("finish");
                }
                fn exception_reaction(&self) -> ExceptionReaction {
                    self.reaction
                }
            }

            fn run_panicky(reaction: ExceptionReaction) -> (Vec<String>, Vec<String>) {
                let log = Log::new();
                let errors = Log::new();
                let (l, e) = (log.clone(), errors.clone());
                let params = EnvParams::new()
                    .disable_autoshutdown()
                    .error_logger(move |line| e.push(line));
                Environment::launch_with(params, move |env| {
                    let notify = env.create_mbox();
                    let b = binder(env);
                    let stopper_log = l.clone();
                    env.introduce_coop(|coop| {
                        coop.add_agent(Watcher {
                            mbox: notify.clone(),
                            log: stopper_log,
                        });
                    })
                    .unwrap();
                    let mut coop = env.make_coop();
                    coop.set_binder(b).add_dereg_notificator(&notify);
                    let mbox = coop.add_agent(Panicky {
                        log: l,
                        reaction,
                        notify: notify.clone(),
                    });
                    env.register_coop(coop).unwrap();
                    for n in 0..3u32 {
                        send(&mbox, n).unwrap();
                    }
                    send(&mbox, 10u32).unwrap();
                })
                .unwrap();
                (log.get(), errors.get())
            }

            /// Stops the environment when the watched coop is gone (or on `Done`).
            struct Watcher {
                mbox: Mbox,
                log: Log,
            }

            impl Agent for Watcher {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    let mbox = self.mbox.clone();
                    ctx.subscribe(&mbox)
                        .event(|a: &mut Self, ctx, d: &CoopDeregistered| {
                            a.log.push(format!("dereg {:?}", d.reason));
                            ctx.environment().stop();
                        })?;
                    ctx.subscribe(&mbox).event(|_: &mut Self, ctx, _: &Done| {
                        ctx.environment().stop();
                    })?;
                    Ok(())
                }
            }

            #[test]
            fn panic_with_ignore_goes_on_with_the_next_message() {
                within_patience(|| {
                    let (log, errors) = run_panicky(ExceptionReaction::Ignore);
                    assert_eq!(&log[..3], ["handled 0", "handled 2", "handled 10"]);
                    assert_eq!(errors.len(), 1);
                    assert!(errors[0].contains("handler failure 1"), "{errors:?}");
                });
            }

            #[test]
            fn panic_with_deregister_coop_deregisters_with_reason_panic() {
                within_patience(|| {
                    let (log, errors) = run_panicky(ExceptionReaction::DeregisterCoop);
                    assert_eq!(log, ["handled 0", "finish", "dereg Panic"]);
                    assert_eq!(errors.len(), 1);
                });
            }

            #[test]
            fn panic_with_shutdown_stops_the_environment() {
                within_patience(|| {
                    // Autoshutdown is off: launch returns only because the reaction stopped
                    // the environment (the watcher is stopped too, so it sees no notice).
                    let (log, _) = run_panicky(ExceptionReaction::ShutdownEnvironment);
                    assert_eq!(log, ["handled 0", "finish"]);
                });
            }

            #[test]
            fn child_coops_finish_before_their_parent() {
                within_patience(|| {
                    let log = Log::new();
                    let l = log.clone();
                    Environment::launch(move |env| {
                        let b = binder(env);
                        let mut root = env.make_coop();
                        root.set_binder(b.clone());
                        root.add_agent(Lifecycle {
                            log: l.clone(),
                            name: "root",
                            early: false,
                        });
                        let root = env.register_coop(root).unwrap();
                        let mut child = env.make_child_coop(&root);
                        child.set_binder(b.clone());
                        child.add_agent(Lifecycle {
                            log: l.clone(),
                            name: "child",
                            early: false,
                        });
                        let child = env.register_coop(child).unwrap();
                        let mut grandchild = env.make_child_coop(&child);
                        grandchild.set_binder(b);
                        grandchild.add_agent(Lifecycle {
                            log: l.clone(),
                            name: "grandchild",
                            early: false,
                        });
                        env.register_coop(grandchild).unwrap();
                        root.deregister(DeregReason::Normal);
                    })
                    .unwrap();
                    let finishes: Vec<String> = log
                        .get()
                        .into_iter()
                        .filter(|s| s.ends_with("finish"))
                        .collect();
                    assert_eq!(
                        finishes,
                        ["grandchild finish", "child finish", "root finish"]
                    );
                });
            }

            // ---- timers, limits, request/reply (issue 4) on this dispatcher ----

            struct Tick;
            struct Stop;

            /// Runs one agent built by `make` on this dispatcher until it deregisters.
            fn run_on<A: Agent>(make: impl FnOnce(&Environment) -> A + Send + 'static) {
                within_patience(move || {
                    Environment::launch(move |env| {
                        let b = binder(env);
                        let agent = make(env);
                        env.introduce_coop(|coop| {
                            coop.set_binder(b);
                            coop.add_agent(agent);
                        })
                        .unwrap();
                    })
                    .unwrap();
                });
            }

            struct Periodic {
                ticks: Arc<AtomicUsize>,
                timer: Option<agentbox::TimerHandle>,
            }
            impl Agent for Periodic {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Tick| {
                        if a.ticks.fetch_add(1, Ordering::SeqCst) + 1 == 5 {
                            a.timer = None; // the last handle
                            let me = ctx.direct_mbox();
                            agentbox::send_delayed(&me, std::time::Duration::from_millis(60), Stop)
                                .unwrap()
                                .detach();
                        }
                    })?;
                    ctx.subscribe_self().event(|_: &mut Self, ctx, _: &Stop| {
                        ctx.deregister_coop(DeregReason::Normal)
                    })?;
                    Ok(())
                }
                fn on_start(&mut self, ctx: &mut Context<Self>) {
                    let me = ctx.direct_mbox();
                    let period = std::time::Duration::from_millis(2);
                    self.timer = Some(agentbox::send_periodic(&me, period, period, Tick).unwrap());
                }
            }

            #[test]
            fn periodic_timer_dropped_after_the_fifth_tick_gives_exactly_five() {
                let ticks = Arc::new(AtomicUsize::new(0));
                let t = ticks.clone();
                run_on(move |_| Periodic {
                    ticks: t,
                    timer: None,
                });
                assert_eq!(ticks.load(Ordering::SeqCst), 5);
            }

            struct Revoker {
                handled: Arc<AtomicUsize>,
            }
            impl Agent for Revoker {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    let h = self.handled.clone();
                    ctx.subscribe_self()
                        .event(move |_: &mut Self, _, _: &Tick| {
                            h.fetch_add(1, Ordering::SeqCst);
                        })?;
                    ctx.subscribe_self().event(|_: &mut Self, ctx, _: &Stop| {
                        ctx.deregister_coop(DeregReason::Normal)
                    })?;
                    Ok(())
                }
                fn on_start(&mut self, ctx: &mut Context<Self>) {
                    let me = ctx.direct_mbox();
                    let timer =
                        agentbox::send_delayed(&me, std::time::Duration::ZERO, Tick).unwrap();
                    // Wait (inside this handler, so the copy cannot be handled yet) until
                    // the timer has fired and its copy sits in our queue.
                    while ctx.environment().pending_timers() > 0 {
                        std::thread::yield_now();
                    }
                    timer.cancel();
                    send(&me, Stop).unwrap();
                }
            }

            #[test]
            fn a_cancelled_timers_queued_copy_is_never_handled() {
                let handled = Arc::new(AtomicUsize::new(0));
                let h = handled.clone();
                run_on(move |_| Revoker { handled: h });
                assert_eq!(handled.load(Ordering::SeqCst), 0);
            }

            struct Job(u32);
            struct Hold(Arc<AtomicBool>);
            struct Limited {
                log: Log,
                next: Option<Mbox>,
                max: usize,
            }
            impl Agent for Limited {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    match &self.next {
                        Some(next) => ctx.limit_then_redirect::<Job>(self.max, next)?,
                        None => ctx.limit_then_drop::<Job>(self.max)?,
                    }
                    ctx.limit_then_drop::<Hold>(1)?;
                    let me = ctx.direct_mbox();
                    // Holds the agent (its later demands wait behind) until released.
                    ctx.subscribe_self().event(|_: &mut Self, _, h: &Hold| {
                        while !h.0.load(Ordering::SeqCst) {
                            std::thread::yield_now();
                        }
                    })?;
                    ctx.subscribe_self()
                        .event(move |a: &mut Self, _, j: &Job| {
                            a.log.push(format!("{} {}", me.id().as_u64(), j.0));
                        })?;
                    Ok(())
                }
            }

            /// Eight jobs to the first of three agents, each with a limit of 2, the first
            /// two redirecting to the next and the last dropping: exactly 2 handled by each.
            /// Every agent is held busy (a `Hold` queued before the jobs) until all eight are
            /// sent, so no job starts, and frees its place, in between.
            #[test]
            fn drop_limit_handles_exactly_the_limit_and_redirect_chains_pass_the_rest() {
                within_patience(|| {
                    let log = Log::new();
                    let l = log.clone();
                    Environment::launch(move |env| {
                        let b = binder(env);
                        let agents = env
                            .introduce_coop(|coop| {
                                coop.set_binder(b);
                                let third = coop.add_agent(Limited {
                                    log: l.clone(),
                                    next: None,
                                    max: 2,
                                });
                                let second = coop.add_agent(Limited {
                                    log: l.clone(),
                                    next: Some(third.clone()),
                                    max: 2,
                                });
                                let first = coop.add_agent(Limited {
                                    log: l.clone(),
                                    next: Some(second.clone()),
                                    max: 2,
                                });
                                [first, second, third]
                            })
                            .unwrap();
                        let released = Arc::new(AtomicBool::new(false));
                        for a in &agents {
                            send(a, Hold(released.clone())).unwrap();
                        }
                        for i in 0..8 {
                            send(&agents[0], Job(i)).unwrap();
                        }
                        released.store(true, Ordering::SeqCst);
                        // Every job is queued or dropped by now: wait for the six queued.
                        l.wait_for(6);
                        env.stop();
                    })
                    .unwrap();
                    let got = log.get();
                    assert_eq!(got.len(), 6, "{got:?}");
                    let mut per_agent = std::collections::BTreeMap::new();
                    for line in &got {
                        *per_agent
                            .entry(line.split(' ').next().unwrap().to_owned())
                            .or_insert(0) += 1;
                    }
                    assert_eq!(
                        per_agent.values().copied().collect::<Vec<_>>(),
                        [2, 2, 2],
                        "{got:?}"
                    );
                });
            }

            struct Timed {
                log: Log,
                waiting: State,
                expired: State,
            }
            impl Agent for Timed {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.time_limit(
                        &self.waiting,
                        std::time::Duration::from_millis(20),
                        &self.expired,
                    )?;
                    let log = self.log.clone();
                    ctx.on_enter(&self.expired, move |_, ctx| {
                        log.push("expired");
                        ctx.deregister_coop(DeregReason::Normal);
                    });
                    Ok(())
                }
                fn on_start(&mut self, ctx: &mut Context<Self>) {
                    ctx.change_state(&self.waiting).unwrap();
                }
            }

            #[test]
            fn a_state_time_limit_switches_to_its_target() {
                let log = Log::new();
                let l = log.clone();
                run_on(move |_| Timed {
                    log: l,
                    waiting: State::new("waiting"),
                    expired: State::new("expired"),
                });
                assert_eq!(log.get(), ["expired"]);
            }

            struct Service;
            impl Agent for Service {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    let m = ctx.environment().named_mbox("service");
                    ctx.subscribe(&m).event(
                        |_: &mut Self, _, r: &agentbox::request::Request<u32, u32>| {
                            r.reply(r.get() + 1).unwrap();
                        },
                    )?;
                    Ok(())
                }
            }

            #[test]
            fn request_reply_gets_the_agents_answer() {
                within_patience(|| {
                    Environment::launch(|env| {
                        let b = binder(env);
                        env.introduce_coop(|coop| {
                            coop.set_binder(b);
                            coop.add_agent(Service);
                        })
                        .unwrap();
                        let m = env.named_mbox("service");
                        for i in 0..50u32 {
                            let r = agentbox::request::request_reply::<u32, u32>(
                                &m,
                                $crate::common::PATIENCE,
                                i,
                            );
                            assert_eq!(r, Ok(i + 1));
                        }
                        env.stop();
                    })
                    .unwrap();
                });
            }

            $crate::dispatcher_robustness!();
        }
    };
}
