//! The second part of the behavioural suite (issue 22), stamped by `dispatcher_suite!` into
//! `mod <kind>::robust`: a stats subscriber bound to the dispatcher, panics in an agent's
//! and a payload's `Drop`, and exact drop counts while coops come and go.

#[macro_export]
macro_rules! dispatcher_robustness {
    () => {
        pub(crate) mod robust {
            use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
            use std::sync::Arc;
            use std::time::Duration;

            use agentbox::prelude::*;
            use agentbox::{CoopDeregistered, EnvParams, Quantity, StatsFinished};
            use parking_lot::Mutex;

            use super::binder;
            use $crate::common::{within_patience, Log};

            // ---- a stats subscriber bound to this dispatcher ----

            /// Counts complete distributions; deregisters after the third one that carried
            /// a queue length of a dispatcher (its own: the only one with agents).
            struct StatsWatcher {
                saw_queue: bool,
                whole: usize,
                done: Arc<AtomicBool>,
            }

            impl Agent for StatsWatcher {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    let stats = ctx.environment().stats_controller().mbox();
                    ctx.subscribe(&stats)
                        .event(|a: &mut Self, _, q: &Quantity| {
                            if q.prefix.starts_with("disp/") && q.suffix == "demands.count" {
                                a.saw_queue = true;
                            }
                        })?;
                    ctx.subscribe(&stats)
                        .event(|a: &mut Self, ctx, _: &StatsFinished| {
                            if std::mem::take(&mut a.saw_queue) {
                                a.whole += 1;
                            }
                            if a.whole == 3 {
                                a.done.store(true, Ordering::SeqCst);
                                ctx.environment().stats_controller().turn_off();
                                ctx.deregister_coop(DeregReason::Normal);
                            }
                        })?;
                    Ok(())
                }
            }

            /// The stats thread sends every quantity into the subscriber's own queue: a
            /// source that measured that queue under its lock while sending deadlocked
            /// (`thread_pool`, issue 22).
            #[test]
            fn a_stats_subscriber_bound_here_receives_whole_distributions() {
                within_patience(|| {
                    let done = Arc::new(AtomicBool::new(false));
                    let d = done.clone();
                    Environment::launch(move |env| {
                        let b = binder(env);
                        env.introduce_coop(|coop| {
                            coop.set_binder(b);
                            coop.add_agent(StatsWatcher {
                                saw_queue: false,
                                whole: 0,
                                done: d,
                            });
                        })
                        .unwrap();
                        let stats = env.stats_controller();
                        stats.set_distribution_period(Duration::from_millis(5));
                        stats.turn_on();
                    })
                    .unwrap();
                    assert!(done.load(Ordering::SeqCst));
                });
            }

            // ---- panics in Drop ----

            /// A payload whose `Drop` panics.
            struct Bomb(&'static str);

            impl Drop for Bomb {
                fn drop(&mut self) {
                    if !std::thread::panicking() {
                        panic!("{}", self.0);
                    }
                }
            }

            /// An agent whose `Drop` panics.
            struct Victim;

            impl Agent for Victim {
                fn exception_reaction(&self) -> ExceptionReaction {
                    ExceptionReaction::Ignore
                }
            }

            impl Drop for Victim {
                fn drop(&mut self) {
                    if !std::thread::panicking() {
                        panic!("the victim's drop");
                    }
                }
            }

            /// Logs the numbers and bombs it gets and the coops it hears are gone.
            struct Keeper {
                log: Log,
                notify: Mbox,
            }

            impl Agent for Keeper {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self()
                        .event(|a: &mut Self, _, n: &u32| a.log.push(format!("got {n}")))?;
                    ctx.subscribe_self()
                        .event(|a: &mut Self, _, b: &Bomb| a.log.push(format!("bomb {}", b.0)))?;
                    let notify = self.notify.clone();
                    ctx.subscribe(&notify)
                        .event(|a: &mut Self, _, _: &CoopDeregistered| a.log.push("victim gone"))?;
                    Ok(())
                }
                fn exception_reaction(&self) -> ExceptionReaction {
                    ExceptionReaction::Ignore
                }
            }

            /// Runs `scenario(env, binder, keeper's mbox, notify mbox, keeper's log)` in an
            /// environment whose error log is returned with the keeper's log; the keeper
            /// is bound with the binder given to the scenario (so that agents the scenario
            /// binds with it share the keeper's worker wherever the kind shares workers).
            fn with_keeper(
                scenario: impl FnOnce(&Environment, &agentbox::Binder, &Mbox, &Mbox, &Log)
                    + Send
                    + 'static,
            ) -> (Vec<String>, Vec<String>, agentbox::DropCounts) {
                within_patience(move || {
                    let log = Log::new();
                    let errors = Log::new();
                    let counts = Arc::new(Mutex::new(None));
                    let (l, e, c) = (log.clone(), errors.clone(), counts.clone());
                    let params = EnvParams::new().error_logger(move |line| e.push(line));
                    Environment::launch_with(params, move |env| {
                        let b = binder(env);
                        let notify = env.create_mbox();
                        let keeper = env
                            .introduce_coop(|coop| {
                                coop.set_binder(b.clone());
                                coop.add_agent(Keeper {
                                    log: l.clone(),
                                    notify: notify.clone(),
                                })
                            })
                            .unwrap();
                        scenario(env, &b, &keeper, &notify, &l);
                        env.stop();
                        *c.lock() = Some(env.clone());
                    })
                    .unwrap();
                    // Read once every worker has stopped.
                    let env = counts.lock().take().expect("the scenario ran");
                    (log.get(), errors.get(), env.drop_counts())
                })
            }

            /// Sends 0..10 to the keeper and waits for them.
            fn keeper_still_receives(keeper: &Mbox, log: &Log, before: usize) {
                for n in 0..10u32 {
                    send(keeper, n).unwrap();
                }
                log.wait_for(before + 10);
            }

            #[test]
            fn a_panic_in_an_agents_drop_is_reported_and_the_worker_serves_on() {
                let (log, errors, _) = with_keeper(|env, b, keeper, notify, log| {
                    let mut coop = env.make_coop();
                    coop.set_binder(b.clone()).add_dereg_notificator(notify);
                    coop.add_agent(Victim);
                    env.register_coop(coop)
                        .unwrap()
                        .deregister(DeregReason::Normal);
                    log.wait_for(1);
                    keeper_still_receives(keeper, log, 1);
                });
                let want: Vec<String> = std::iter::once("victim gone".to_owned())
                    .chain((0..10).map(|n| format!("got {n}")))
                    .collect();
                assert_eq!(log, want);
                assert!(
                    errors.iter().any(|e| e.contains("the victim's drop")),
                    "{errors:?}"
                );
            }

            #[test]
            fn a_panic_in_a_handled_payloads_drop_is_reported_and_the_worker_serves_on() {
                let (log, errors, _) = with_keeper(|_, _, keeper, _, log| {
                    send(keeper, Bomb("a handled bomb")).unwrap();
                    keeper_still_receives(keeper, log, 1);
                });
                let want: Vec<String> = std::iter::once("bomb a handled bomb".to_owned())
                    .chain((0..10).map(|n| format!("got {n}")))
                    .collect();
                assert_eq!(log, want);
                assert!(
                    errors.iter().any(|e| e.contains("a handled bomb")),
                    "{errors:?}"
                );
            }

            struct Go;

            /// On `Go`, deregisters its coop, then sends itself a bomb: queued behind its
            /// `Finish`.
            struct LateBomber;

            impl Agent for LateBomber {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self()
                        .event(|_: &mut Self, _, _: &Bomb| unreachable!("queued after Finish"))?;
                    ctx.subscribe_self().event(|_: &mut Self, ctx, _: &Go| {
                        ctx.deregister_coop(DeregReason::Normal);
                        send(&ctx.direct_mbox(), Bomb("a bomb behind finish")).unwrap();
                    })?;
                    Ok(())
                }
                fn exception_reaction(&self) -> ExceptionReaction {
                    ExceptionReaction::Ignore
                }
            }

            /// A message queued after its receiver's `Finish` is dropped by the worker:
            /// counted as `receiver_finished`, and its payload's panic reported.
            #[test]
            fn a_message_queued_behind_finish_is_counted_and_its_payloads_panic_reported() {
                let (log, errors, counts) = with_keeper(|env, b, keeper, notify, log| {
                    let mut coop = env.make_coop();
                    coop.set_binder(b.clone()).add_dereg_notificator(notify);
                    let bomber = coop.add_agent(LateBomber);
                    env.register_coop(coop).unwrap();
                    send(&bomber, Go).unwrap();
                    log.wait_for(1);
                    keeper_still_receives(keeper, log, 1);
                });
                assert_eq!(log.len(), 11, "{log:?}");
                assert_eq!(counts.receiver_finished, 1, "{counts:?}");
                assert_eq!(counts.total(), 1, "{counts:?}");
                assert!(
                    errors.iter().any(|e| e.contains("a bomb behind finish")),
                    "{errors:?}"
                );
            }

            // ---- drop counts under deregistration churn ----

            struct Counted(Arc<AtomicU64>);

            impl Agent for Counted {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.subscribe_self().event(|a: &mut Self, _, _: &u64| {
                        a.0.fetch_add(1, Ordering::Relaxed);
                    })?;
                    Ok(())
                }
            }

            /// 200 deregistrations (each coop replaced by a new one) while two threads
            /// send to the agents' direct mboxes: every accepted message is handled or
            /// counted once (it was 0.4–1.9 M of 3–9 M sends short, issue 22).
            #[test]
            fn sent_is_handled_plus_counted_drops_under_deregistration_churn() {
                churn(|coop, handled| coop.add_agent(Counted(handled)));
            }

            /// The churn of the test above, with the agent `add` puts in each coop (it
            /// counts each `u64` it handles in the counter it is given).
            pub(crate) fn churn(add: fn(&mut Coop, Arc<AtomicU64>) -> Mbox) {
                const LIVE: usize = 4;
                const ROUNDS: usize = 200;
                within_patience(move || {
                    let handled = Arc::new(AtomicU64::new(0));
                    let sent = Arc::new(AtomicU64::new(0));
                    let kept = Arc::new(Mutex::new(None));
                    let (h, s, k) = (handled.clone(), sent.clone(), kept.clone());
                    Environment::launch(move |env| {
                        let b = binder(env);
                        let register = || {
                            let mut coop = env.make_coop();
                            coop.set_binder(b.clone());
                            let m = add(&mut coop, h.clone());
                            (env.register_coop(coop).unwrap(), m)
                        };
                        let coops: Vec<_> = (0..LIVE).map(|_| register()).collect();
                        let targets = Arc::new(Mutex::new(
                            coops.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(),
                        ));
                        let mut handles: Vec<_> = coops.into_iter().map(|(c, _)| c).collect();
                        let stop = Arc::new(AtomicBool::new(false));
                        let senders: Vec<_> = (0..2u64)
                            .map(|t| {
                                let (targets, stop, sent, handled) =
                                    (targets.clone(), stop.clone(), s.clone(), h.clone());
                                let env = env.clone();
                                std::thread::spawn(move || {
                                    let mut i = t;
                                    while !stop.load(Ordering::Relaxed) {
                                        // At most a few thousand messages in flight: the
                                        // workers keep up, and agents handle some.
                                        let settled = handled.load(Ordering::Relaxed)
                                            + env.drop_counts().total();
                                        if sent.load(Ordering::Relaxed) > settled + 4096 {
                                            std::thread::yield_now();
                                            continue;
                                        }
                                        let to = targets.lock()[i as usize % LIVE].clone();
                                        for _ in 0..16 {
                                            if send(&to, i).is_ok() {
                                                sent.fetch_add(1, Ordering::Relaxed);
                                            }
                                            i += 1;
                                        }
                                    }
                                })
                            })
                            .collect();
                        // At least ROUNDS, and on until an agent has handled one (on a
                        // loaded machine the workers may not get to any in ROUNDS).
                        let enough = std::time::Instant::now() + $crate::common::PATIENCE / 4;
                        let mut round = 0;
                        while round < ROUNDS
                            || (h.load(Ordering::Relaxed) == 0
                                && std::time::Instant::now() < enough)
                        {
                            let slot = round % LIVE;
                            round += 1;
                            handles[slot].deregister(DeregReason::Normal);
                            let (c, m) = register();
                            handles[slot] = c;
                            targets.lock()[slot] = m;
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        stop.store(true, Ordering::Relaxed);
                        for t in senders {
                            t.join().unwrap();
                        }
                        env.stop();
                        *k.lock() = Some(env.clone());
                    })
                    .unwrap();
                    let env = kept.lock().take().expect("the scenario ran");
                    let (sent, handled) =
                        (sent.load(Ordering::SeqCst), handled.load(Ordering::SeqCst));
                    assert!(sent > 0 && handled > 0, "sent {sent}, handled {handled}");
                    // A worker whose dispatcher went in one of its own handlers is not
                    // joined: it may still be counting what was left in its queue when
                    // `launch` returns. The counts settle; a message lost never would
                    // (half the patience: a lost one then fails with the counts below,
                    // not as a bare timeout).
                    let deadline = std::time::Instant::now() + $crate::common::PATIENCE / 2;
                    let mut counts = env.drop_counts();
                    while handled + counts.total() < sent && std::time::Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                        counts = env.drop_counts();
                    }
                    assert_eq!(
                        sent,
                        handled + counts.total(),
                        "sent {sent}, handled {handled}, {counts:?}"
                    );
                });
            }
        }
    };
}
