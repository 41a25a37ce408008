//! Mbox kinds: MPMC, named, direct, unique-subscribers; mutable messages; redirection depth.

mod common;

use agentbox::prelude::*;
use agentbox::{Message, SendError, SubscribeError, MAX_REDIRECTION_DEPTH};
use common::{run_script, send_self, within_patience, Log, Script};

#[derive(Debug)]
struct Job(u32);

#[test]
fn mutable_message_to_a_multi_consumer_mbox_is_a_typed_error() {
    within_patience(|| {
        Environment::launch(|env| {
            let mpmc = env.create_mbox();
            assert!(matches!(
                send_mutable(&mpmc, Job(1)),
                Err(SendError::MutableToMultiConsumer { .. })
            ));
            assert!(matches!(
                mpmc.deliver(Message::new_mutable(Job(2)), 0),
                Err(SendError::MutableToMultiConsumer { .. })
            ));
        })
        .unwrap();
    });
}

#[test]
fn subscribing_to_a_mutable_message_from_a_multi_consumer_mbox_is_a_typed_error() {
    let log = run_script(|log| {
        Script::new(log).setup(|s, ctx| {
            let mpmc = ctx.environment().create_mbox();
            let r = ctx
                .subscribe(&mpmc)
                .event_mutable(|_: &mut Script, _, _: Job| {});
            s.log.push(format!(
                "{}",
                matches!(r, Err(SubscribeError::MutableFromMultiConsumer { .. }))
            ));
            send_self(ctx, Vec::<u8>::new());
            Ok(())
        })
    });
    assert_eq!(log, ["true"]);
}

#[test]
fn mutable_message_through_a_direct_mbox_is_taken_by_value() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event_mutable(|s: &mut Script, _, mut job: Job| {
                        job.0 += 1; // owned: may be changed
                        s.log.push(format!("job {}", job.0));
                    })?;
                // The immutable flavour is another type: not handled by the mutable handler.
                ctx.subscribe_self().event(|s: &mut Script, _, job: &Job| {
                    s.log.push(format!("shared job {}", job.0))
                })?;
                Ok(())
            })
            .start(|_, ctx| {
                let me = ctx.direct_mbox();
                send_mutable(&me, Job(1)).unwrap();
                send(&me, Job(10)).unwrap();
                send_self(ctx, Vec::<u8>::new());
            })
    });
    assert_eq!(log, ["job 2", "shared job 10"]);
}

#[test]
fn multi_consumer_mbox_delivers_to_every_subscriber_in_priority_order() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let news = env.create_mbox();
            for (name, prio) in [
                ("low", Priority::P0),
                ("high", Priority::P7),
                ("mid", Priority::P3),
            ] {
                let news = news.clone();
                env.introduce_coop(|coop| {
                    coop.add_agent(Script::new(&l).priority(prio).setup(move |_, ctx| {
                        ctx.subscribe(&news)
                            .event(move |s: &mut Script, ctx, n: &u32| {
                                s.log.push(format!("{name} {n}"));
                                ctx.deregister_coop(DeregReason::Normal);
                            })?;
                        Ok(())
                    }));
                })
                .unwrap();
            }
            send(&news, 1u32).unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["high 1", "mid 1", "low 1"]);
    });
}

#[test]
fn named_mbox_is_the_same_while_a_handle_lives_and_new_after() {
    within_patience(|| {
        Environment::launch(|env| {
            let a = env.named_mbox("jobs");
            let b = env.named_mbox("jobs");
            assert_eq!(a, b);
            assert_ne!(a, env.named_mbox("other"));
            assert_eq!(a.name(), "jobs");
            assert_eq!(env.named_mbox_count(), 1); // "other" already dropped
            let old_id = a.id();
            drop((a, b));
            assert_eq!(env.named_mbox_count(), 0);
            assert_ne!(env.named_mbox("jobs").id(), old_id);
        })
        .unwrap();
    });
}

#[test]
fn only_the_owner_may_subscribe_to_or_filter_a_direct_mbox() {
    let log = run_script(|log| {
        Script::new(log).setup(|s, ctx| {
            let env = ctx.environment().clone();
            let other = env
                .introduce_coop(|coop| coop.add_agent(Script::new(&Log::new())))
                .unwrap();
            let sub = ctx.subscribe(&other).event(|_: &mut Script, _, _: &u8| {});
            let filt = ctx.set_delivery_filter(&other, |_: &u8| true);
            s.log.push(format!(
                "{} {}",
                matches!(sub, Err(SubscribeError::NotOwner { .. })),
                matches!(filt, Err(SubscribeError::NotOwner { .. }))
            ));
            send(&other, common::End).unwrap();
            send_self(ctx, Vec::<u8>::new());
            Ok(())
        })
    });
    assert_eq!(log, ["true true"]);
}

#[test]
fn direct_mbox_does_not_queue_types_its_owner_does_not_subscribe_to() {
    // `Later` is sent while unsubscribed, then the owner subscribes before it would run:
    // had it been queued, the new subscription would handle it.
    struct Later;
    struct Subscribe;
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event(|_: &mut Script, ctx, _: &Subscribe| {
                        ctx.subscribe_self()
                            .event(|s: &mut Script, _, _: &Later| s.log.push("later"))
                            .unwrap();
                    })?;
                Ok(())
            })
            .start(|_, ctx| {
                let me = ctx.direct_mbox();
                send(&me, Later).unwrap(); // not subscribed: dropped at send
                send(&me, Subscribe).unwrap();
                // `Subscribe` has not run yet: still unsubscribed, dropped at send too.
                send(&me, Later).unwrap();
                send_self(ctx, Vec::<u8>::new());
            })
    });
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn unique_subscribers_mbox_allows_one_subscriber_per_type() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let jobs = env.create_unique_subscribers_mbox();
            assert_eq!(jobs.kind(), MboxKind::SingleConsumer);
            let (j1, j2) = (jobs.clone(), jobs.clone());
            let l2 = l.clone();
            env.introduce_coop(|coop| {
                coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&j1)
                        .event_mutable(|s: &mut Script, ctx, j: Job| {
                            s.log.push(format!("first got {}", j.0));
                            ctx.deregister_coop(DeregReason::Normal);
                        })?;
                    Ok(())
                }));
                coop.add_agent(Script::new(&l2).setup(move |s, ctx| {
                    let taken = ctx
                        .subscribe(&j2)
                        .event_mutable(|_: &mut Script, _, _: Job| {});
                    s.log.push(format!(
                        "{}",
                        matches!(taken, Err(SubscribeError::SubscriberTaken { .. }))
                    ));
                    let filter = ctx.set_delivery_filter(&j2, |_: &u8| true);
                    s.log.push(format!(
                        "{}",
                        matches!(filter, Err(SubscribeError::FiltersUnsupported { .. }))
                    ));
                    // Another type is free.
                    ctx.subscribe(&j2).event(|_: &mut Script, _, _: &u8| {})?;
                    Ok(())
                }));
            })
            .unwrap();
            send_mutable(&jobs, Job(5)).unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["true", "true", "first got 5"]);
    });
}

#[test]
fn a_message_at_the_redirection_limit_is_refused() {
    within_patience(|| {
        Environment::launch(|env| {
            let m = env.create_mbox();
            assert!(m
                .deliver(Message::new(1u8), MAX_REDIRECTION_DEPTH - 1)
                .is_ok());
            assert_eq!(
                m.deliver(Message::new(1u8), MAX_REDIRECTION_DEPTH),
                Err(SendError::RedirectionDepthExceeded {
                    type_name: "u8",
                    depth: 32
                })
            );
        })
        .unwrap();
    });
}

#[test]
fn signals_are_zero_sized_messages() {
    struct Tick;
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event(|s: &mut Script, _, _: &Tick| s.log.push("tick"))?;
                Ok(())
            })
            .start(|_, ctx| send_self(ctx, [Tick, Tick]))
    });
    assert_eq!(log, ["tick", "tick"]);
}

#[test]
fn deliveries_through_a_stale_reference_never_reach_a_finished_agent() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    // A custom mbox keeps its subscriber's `Sink` after the agent is gone (it ignores
    // unsubscribe); its later deliveries must not reach, or pile up for, the dead agent.
    struct Sticky {
        id: agentbox::MboxId,
        who: parking_lot::Mutex<Option<agentbox::Sink>>,
    }
    impl agentbox::MboxImpl for Sticky {
        fn id(&self) -> agentbox::MboxId {
            self.id
        }
        fn kind(&self) -> MboxKind {
            MboxKind::MultiConsumer
        }
        fn subscribe(
            &self,
            _: agentbox::MessageType,
            who: &agentbox::Sink,
        ) -> Result<(), SubscribeError> {
            *self.who.lock() = Some(who.clone());
            Ok(())
        }
        fn unsubscribe(&self, _: agentbox::MessageType, _: &agentbox::Sink) {}
        fn deliver(
            &self,
            msg: Message,
            depth: agentbox::RedirectionDepth,
            mode: agentbox::DeliveryMode,
        ) -> Result<(), SendError> {
            if let Some(w) = &*self.who.lock() {
                w.push_message(self.id, msg, depth, mode);
            }
            Ok(())
        }
        fn set_delivery_filter(
            &self,
            _: agentbox::MessageType,
            _: agentbox::DeliveryFilter,
            _: &agentbox::Sink,
        ) -> Result<(), SubscribeError> {
            Ok(())
        }
        fn drop_delivery_filter(&self, _: agentbox::MessageType, _: &agentbox::Sink) {}
        fn name(&self) -> String {
            "sticky".into()
        }
        fn environment(&self) -> Option<Environment> {
            None
        }
    }
    within_patience(|| {
        let handled = Arc::new(AtomicUsize::new(0));
        let sticky = Arc::new(Sticky {
            id: agentbox::MboxId::next(),
            who: parking_lot::Mutex::new(None),
        });
        let mbox = Mbox::custom(sticky.clone());
        let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
        let env = wrapped.environment().clone();
        let (m, h) = (mbox.clone(), handled.clone());
        env.introduce_coop(move |coop| {
            coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                ctx.subscribe(&m)
                    .event(move |_: &mut Script, ctx, n: &u32| {
                        h.fetch_add(1, Ordering::SeqCst);
                        if *n == 0 {
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    })?;
                Ok(())
            }));
        })
        .unwrap();
        send(&mbox, 0u32).unwrap();
        while env.coop_count() > 0 {
            std::thread::yield_now();
        }
        for n in 1..100u32 {
            send(&mbox, n).unwrap();
        }
        wrapped.stop_then_join().unwrap();
        assert_eq!(handled.load(Ordering::SeqCst), 1);
        assert!(sticky.who.lock().is_some());
    });
}

#[test]
fn introduced_named_mboxes_are_keyed_by_namespace_and_name() {
    within_patience(|| {
        Environment::launch(|env| {
            let made = std::cell::Cell::new(0);
            let make = || {
                made.set(made.get() + 1);
                env.create_mbox()
            };
            let a = env.introduce_named_mbox("ns1", "x", make).unwrap();
            // Same (namespace, name): the same mbox, and the factory does not run again.
            let again = env
                .introduce_named_mbox("ns1", "x", || unreachable!("made once"))
                .unwrap();
            assert_eq!(a, again);
            assert_eq!(made.get(), 1);
            // Same name elsewhere: other mboxes.
            let b = env
                .introduce_named_mbox("ns2", "x", || env.create_mbox())
                .unwrap();
            assert_ne!(a, b);
            assert_ne!(a, env.named_mbox("x"));
            assert_ne!(b, env.named_mbox("x"));
            // An empty namespace is the default one's: a typed error.
            assert_eq!(
                env.introduce_named_mbox("", "x", || env.create_mbox()),
                Err(agentbox::NamedMboxError::EmptyNamespace { name: "x".into() })
            );
            // A factory may introduce mboxes itself, and make any kind of mbox.
            let outer = env
                .introduce_named_mbox("ns1", "outer", || {
                    env.introduce_named_mbox("ns1", "inner", || {
                        env.create_unique_subscribers_mbox()
                    })
                    .unwrap()
                })
                .unwrap();
            let inner = env
                .introduce_named_mbox("ns1", "inner", || unreachable!())
                .unwrap();
            assert_eq!(outer, inner);
            assert_eq!(inner.kind(), MboxKind::SingleConsumer);
        })
        .unwrap();
    });
}

/// A state action named for `Mutable<M>` on a multi-consumer mbox cannot open the mbox to
/// mutable messages: sending one is still the typed error.
#[test]
fn a_mutable_message_is_refused_by_an_mpmc_mbox_even_with_a_state_action_for_it() {
    within_patience(|| {
        let result = std::sync::Arc::new(parking_lot::Mutex::new(None));
        let r = result.clone();
        Environment::launch(move |env| {
            let mpmc = env.create_mbox();
            let m = mpmc.clone();
            env.introduce_coop(|coop| {
                coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                    let other = State::new("other");
                    ctx.subscribe(&m)
                        .just_switch_to::<agentbox::Mutable<Job>>(&other)?;
                    Ok(())
                }));
            })
            .unwrap();
            *r.lock() = Some(send_mutable(&mpmc, Job(1)));
            env.stop();
        })
        .unwrap();
        assert!(matches!(
            result.lock().take(),
            Some(Err(SendError::MutableToMultiConsumer { .. }))
        ));
    });
}
