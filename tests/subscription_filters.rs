//! Subscriptions (duplicates, changes from handlers, dropping queued demands) and delivery
//! filters (sender-side, per subscriber, replaceable, removed with the agent).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{EnvParams, SubscribeError, WrappedEnv};
use common::{run_script, send_self, within_patience, Log, Script};

struct Switch;
struct Drop_;

#[test]
fn a_duplicate_subscription_is_a_typed_error() {
    let log = run_script(|log| {
        Script::new(log).setup(|s, ctx| {
            ctx.subscribe_self().event(|_: &mut Script, _, _: &u8| {})?;
            let dup = ctx.subscribe_self().event(|_: &mut Script, _, _: &u8| {});
            s.log.push(format!(
                "{}",
                matches!(dup, Err(SubscribeError::Duplicate { .. }))
            ));
            // The same type in another state is not a duplicate.
            let other = State::new("other");
            ctx.subscribe_self()
                .in_state(&other)
                .event(|_: &mut Script, _, _: &u8| {})?;
            send_self(ctx, Vec::<u8>::new());
            Ok(())
        })
    });
    assert_eq!(log, ["true"]);
}

#[test]
fn dropping_a_subscription_discards_its_queued_demands() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event(|s: &mut Script, _, n: &u32| s.log.push(format!("got {n}")))?;
                ctx.subscribe_self()
                    .event(|s: &mut Script, ctx, _: &Drop_| {
                        let me = ctx.direct_mbox();
                        let default = ctx.default_state().clone();
                        s.log
                            .push(format!("dropped {}", ctx.unsubscribe::<u32>(&me, &default)));
                    })?;
                Ok(())
            })
            .start(|_, ctx| {
                let me = ctx.direct_mbox();
                send(&me, 1u32).unwrap();
                send(&me, Drop_).unwrap();
                for n in 2..5u32 {
                    send(&me, n).unwrap(); // queued before the drop runs: never handled
                }
                send_self(ctx, Vec::<u8>::new());
            })
    });
    assert_eq!(log, ["got 1", "dropped true"]);
}

#[test]
fn a_subscription_made_in_a_handler_receives_the_next_message() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event(|_: &mut Script, ctx, _: &Switch| {
                        ctx.subscribe_self()
                            .event(|s: &mut Script, _, n: &u32| s.log.push(format!("got {n}")))
                            .unwrap();
                        send(&ctx.direct_mbox(), 7u32).unwrap();
                        send(&ctx.direct_mbox(), common::End).unwrap();
                    })?;
                Ok(())
            })
            .start(|_, ctx| send(&ctx.direct_mbox(), Switch).unwrap())
    });
    assert_eq!(log, ["got 7"]);
}

struct Counter {
    n: u32,
}
impl Agent for Counter {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(Self::on_tick)?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        send(&ctx.direct_mbox(), 1u64).unwrap();
    }
}
impl Counter {
    fn on_tick(&mut self, ctx: &mut Context<Self>, by: &u64) {
        self.n += *by as u32;
        if self.n < 5 {
            send(&ctx.direct_mbox(), 1u64).unwrap();
        } else {
            ctx.deregister_coop(DeregReason::User(self.n));
        }
    }
}

#[test]
fn methods_are_handlers() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let notify = env.create_mbox();
            env.introduce_coop(|coop| {
                let n = notify.clone();
                coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&n).event(
                        |s: &mut Script, ctx, d: &agentbox::CoopDeregistered| {
                            s.log.push(format!("{:?}", d.reason));
                            ctx.deregister_coop(DeregReason::Normal);
                        },
                    )?;
                    Ok(())
                }));
            })
            .unwrap();
            let mut coop = env.make_coop();
            coop.add_dereg_notificator(&notify);
            coop.add_agent(Counter { n: 0 });
            env.register_coop(coop).unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["User(5)"]);
    });
}

/// An agent on `news` with a filter; logs what it gets.
fn filtered_listener(news: &Mbox, log: &Log, subscribe: bool) -> Script {
    let news = news.clone();
    Script::new(log).setup(move |_, ctx| {
        if subscribe {
            ctx.subscribe(&news).event(|s: &mut Script, ctx, n: &u32| {
                s.log.push(format!("{n}"));
                if *n == 10 {
                    ctx.environment().stop();
                }
            })?;
        }
        ctx.set_delivery_filter(&news, |n: &u32| n.is_multiple_of(5))?;
        Ok(())
    })
}

#[test]
fn a_filter_passes_two_of_ten_and_a_filter_without_subscription_delivers_nothing() {
    within_patience(|| {
        let log = Log::new();
        let silent = Log::new();
        let (l, q) = (log.clone(), silent.clone());
        Environment::launch(move |env| {
            let news = env.create_mbox();
            env.introduce_coop(|coop| {
                coop.add_agent(filtered_listener(&news, &l, true));
                coop.add_agent(filtered_listener(&news, &q, false));
            })
            .unwrap();
            for n in 1..=10u32 {
                send(&news, n).unwrap();
            }
        })
        .unwrap();
        assert_eq!(log.get(), ["5", "10"]);
        assert!(silent.get().is_empty());
    });
}

#[test]
fn replacing_or_dropping_a_filter_affects_only_later_sends() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let news = ctx.environment().create_mbox();
            ctx.subscribe(&news)
                .event(|s: &mut Script, _, n: &u32| s.log.push(format!("{n}")))?;
            ctx.set_delivery_filter(&news, |n: &u32| n.is_multiple_of(2))?;
            let n2 = news.clone();
            ctx.subscribe_self()
                .event(move |_: &mut Script, ctx, step: &u8| {
                    if *step == 0 {
                        ctx.set_delivery_filter(&n2, |n: &u32| n % 2 == 1).unwrap();
                        for n in 5..=7u32 {
                            send(&n2, n).unwrap();
                        }
                        send(&ctx.direct_mbox(), 1u8).unwrap();
                    } else {
                        ctx.drop_delivery_filter::<u32>(&n2);
                        for n in 8..=9u32 {
                            send(&n2, n).unwrap();
                        }
                        send(&ctx.direct_mbox(), common::End).unwrap();
                    }
                })?;
            for n in 1..=4u32 {
                send(&news, n).unwrap();
            }
            send(&ctx.direct_mbox(), 0u8).unwrap();
            Ok(())
        })
    });
    assert_eq!(log, ["2", "4", "5", "7", "8", "9"]);
}

#[test]
fn a_filter_on_the_agents_own_direct_mbox() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                ctx.subscribe_self()
                    .event(|s: &mut Script, _, n: &u32| s.log.push(format!("{n}")))?;
                let me = ctx.direct_mbox();
                ctx.set_delivery_filter(&me, |n: &u32| *n > 2)?;
                Ok(())
            })
            .start(|_, ctx| send_self(ctx, 1..=4u32))
    });
    assert_eq!(log, ["3", "4"]);
}

#[test]
fn filters_go_when_the_agent_goes() {
    within_patience(|| {
        let calls = Arc::new(AtomicUsize::new(0));
        let wrapped = WrappedEnv::new(|_| {}).unwrap();
        let env = wrapped.environment().clone();
        let news = env.create_mbox();
        let (n, c) = (news.clone(), calls.clone());
        env.introduce_coop(move |coop| {
            coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                ctx.subscribe(&n).event(|_: &mut Script, _, _: &u32| {})?;
                ctx.set_delivery_filter(&n, move |_: &u32| {
                    c.fetch_add(1, Ordering::SeqCst);
                    true
                })?;
                send(&ctx.direct_mbox(), common::End).unwrap();
                Ok(())
            }));
        })
        .unwrap();
        send(&news, 1u32).unwrap_or(());
        while env.coop_count() > 0 {
            std::thread::yield_now();
        }
        let before = calls.load(Ordering::SeqCst);
        for n in 0..10u32 {
            send(&news, n).unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), before);
        wrapped.stop_then_join().unwrap();
    });
}

/// Subscribes to `u32` on an MPMC mbox, maybe through a filter that panics on odd numbers.
struct Listener {
    name: &'static str,
    source: Mbox,
    panicky: bool,
    reaction: ExceptionReaction,
    log: Log,
}

impl Agent for Listener {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let source = self.source.clone();
        if self.panicky {
            ctx.set_delivery_filter(&source, |n: &u32| {
                assert!(n.is_multiple_of(2), "odd");
                true
            })?;
        }
        ctx.subscribe(&source)
            .event(|a: &mut Self, _, n: &u32| a.log.push(format!("{} {n}", a.name)))?;
        Ok(())
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        self.reaction
    }
}

/// A panicking filter is a refusal for its subscriber only: the fan-out completes for the
/// others, `send` succeeds, and the panic goes to the filter owner's exception reaction.
fn fan_out_past_a_panicking_filter(reaction: ExceptionReaction) -> (Vec<String>, Vec<String>) {
    let log = Log::new();
    let errors = Log::new();
    let (l, e) = (log.clone(), errors.clone());
    within_patience(move || {
        let params = EnvParams::new().error_logger(move |line| e.push(line));
        Environment::launch_with(params, move |env| {
            let source = env.create_mbox();
            // One coop each: a coop deregistered by the reaction takes only `b`.
            for (name, panicky) in [("a", false), ("b", true), ("c", false)] {
                env.introduce_coop(|coop| {
                    coop.add_agent(Listener {
                        name,
                        source: source.clone(),
                        panicky,
                        reaction,
                        log: l.clone(),
                    });
                })
                .unwrap();
            }
            send(&source, 1u32).unwrap();
            send(&source, 2u32).unwrap();
            // With Ignore, b handles 2; with DeregisterCoop, b's coop is gone or going.
            let expected = if reaction == ExceptionReaction::Ignore {
                5
            } else {
                4
            };
            l.wait_for(expected);
            env.stop();
        })
        .unwrap();
    });
    (log.get(), errors.get())
}

#[test]
fn a_panicking_filter_refuses_for_its_owner_only_and_the_owner_reacts() {
    let (log, errors) = fan_out_past_a_panicking_filter(ExceptionReaction::Ignore);
    let mut sorted = log.clone();
    sorted.sort();
    assert_eq!(sorted, ["a 1", "a 2", "b 2", "c 1", "c 2"]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("failed in a delivery filter") && errors[0].contains("odd"),
        "{errors:?}"
    );
}

#[test]
fn a_panicking_filter_deregisters_its_owners_coop_when_that_is_the_reaction() {
    let (log, errors) = fan_out_past_a_panicking_filter(ExceptionReaction::DeregisterCoop);
    // b's coop goes with reason Panic (b handles nothing: its message 2 is either
    // refused at delivery or dropped by the deregistration); a and c get both messages.
    let mut sorted = log.clone();
    sorted.sort();
    assert_eq!(sorted, ["a 1", "a 2", "c 1", "c 2"]);
    assert!(
        errors.iter().any(|e| e.contains("DeregisterCoop")),
        "{errors:?}"
    );
}
