//! Agent states: nesting, hooks order, history, transfer/suppress/just_switch_to,
//! dead letters and the errors of state switching.

mod common;

use agentbox::prelude::*;
use agentbox::{EnvParams, History, StateError, MAX_STATE_NESTING};
use common::{run_script, send_self, within_patience, Log, Script};

#[derive(Clone, Copy, Debug)]
struct Go(u8);

/// Hooks that log every enter and exit of `states`.
fn log_hooks(ctx: &mut Context<Script>, states: &[&State]) {
    for s in states {
        let name = s.name().to_owned();
        ctx.on_enter(s, move |a: &mut Script, _| {
            a.log.push(format!("enter {name}"))
        });
        let name = s.name().to_owned();
        ctx.on_exit(s, move |a: &mut Script, _| {
            a.log.push(format!("exit {name}"))
        });
    }
}

#[test]
fn nested_switch_exits_up_to_the_common_ancestor_then_enters_down_to_the_leaf() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                let a = State::new("a");
                let a1 = a.initial_substate("a1")?;
                let a1x = a1.initial_substate("a1x")?;
                let a2 = a.substate("a2")?;
                let b = State::new("b");
                let b1 = b.initial_substate("b1")?;
                log_hooks(ctx, &[&a, &a1, &a1x, &a2, &b, &b1]);
                ctx.change_state(&a)?;
                let (a2c, bc) = (a2.clone(), b.clone());
                ctx.subscribe_self().in_state(&a).in_state(&b).event(
                    move |s: &mut Script, ctx, g: &Go| {
                        s.log
                            .push(format!("go {} in {}", g.0, ctx.current_state().name()));
                        let target = if g.0 == 1 { &a2c } else { &bc };
                        ctx.change_state(target).unwrap();
                    },
                )?;
                // The context keeps the states it was given alive.
                drop((a1, a1x, b1));
                Ok(())
            })
            .start(|s, ctx| {
                s.log
                    .push(format!("start in {}", ctx.current_state().name()));
                send_self(ctx, [Go(1), Go(2)]);
            })
    });
    assert_eq!(
        log,
        [
            "enter a",
            "enter a1",
            "enter a1x",
            "start in a1x",
            "go 1 in a1x",
            "exit a1x",
            "exit a1",
            "enter a2",
            "go 2 in a2",
            "exit a2",
            "exit a",
            "enter b",
            "enter b1",
            // On the way out (the coop deregisters): back to the default state.
            "exit b1",
            "exit b",
        ]
    );
}

#[test]
fn handler_in_a_parent_state_handles_messages_of_its_substates() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let p = State::new("p");
            let c = p.initial_substate("c")?;
            ctx.subscribe_self()
                .in_state(&p)
                .event(|s: &mut Script, ctx, g: &Go| {
                    s.log
                        .push(format!("p got {} in {}", g.0, ctx.current_state().name()))
                })?;
            ctx.change_state(&p)?;
            send_self(ctx, [Go(1)]);
            drop(c);
            Ok(())
        })
    });
    assert_eq!(log, ["p got 1 in c"]);
}

fn history_scenario(history: History) -> Vec<String> {
    run_script(move |log| {
        Script::new(log).setup(move |_, ctx| {
            let h = State::with_history("h", history);
            let h1 = h.initial_substate("h1")?;
            let h2 = h.substate("h2")?;
            let h2a = h2.initial_substate("h2a")?;
            let h2b = h2.substate("h2b")?;
            let out = State::new("out");
            let states = [h.clone(), h1, h2, h2a, h2b.clone(), out.clone()];
            ctx.subscribe_self().in_state(&h).in_state(&out).event(
                move |s: &mut Script, ctx, g: &Go| {
                    let target = match g.0 {
                        0 => &states[4], // h2b
                        1 => &states[5], // out
                        2 => &states[0], // back into h
                        _ => {
                            s.log.push(format!("now {}", ctx.current_state().name()));
                            return;
                        }
                    };
                    ctx.change_state(target).unwrap();
                },
            )?;
            ctx.change_state(&h)?;
            send_self(ctx, [Go(0), Go(1), Go(2), Go(3)]);
            Ok(())
        })
    })
}

#[test]
fn shallow_history_returns_to_the_last_direct_substate_and_its_initial_leaf() {
    assert_eq!(history_scenario(History::Shallow), ["now h2a"]);
}

#[test]
fn deep_history_returns_to_the_last_leaf() {
    assert_eq!(history_scenario(History::Deep), ["now h2b"]);
}

#[test]
fn without_history_a_composite_state_enters_its_initial_substate() {
    assert_eq!(history_scenario(History::None), ["now h1"]);
}

#[test]
fn transfer_to_state_switches_and_handles_the_same_message_there() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let a = State::new("a");
            let b = State::new("b");
            ctx.subscribe_self()
                .in_state(&a)
                .transfer_to_state::<Go>(&b)?;
            ctx.subscribe_self()
                .in_state(&b)
                .event(|s: &mut Script, ctx, g: &Go| {
                    s.log
                        .push(format!("{} got {}", ctx.current_state().name(), g.0))
                })?;
            log_hooks(ctx, &[&a, &b]);
            ctx.change_state(&a)?;
            send_self(ctx, [Go(7)]);
            Ok(())
        })
    });
    assert_eq!(log, ["enter a", "exit a", "enter b", "b got 7", "exit b"]);
}

#[test]
fn transfer_to_state_loop_is_an_error_handled_by_the_exception_reaction() {
    within_patience(|| {
        let errors = Log::new();
        let e = errors.clone();
        let log = Log::new();
        let agent = Script::new(&log)
            .reaction(ExceptionReaction::DeregisterCoop)
            .setup(|_, ctx| {
                let a = State::new("a");
                let b = State::new("b");
                ctx.subscribe_self()
                    .in_state(&a)
                    .transfer_to_state::<Go>(&b)?;
                ctx.subscribe_self()
                    .in_state(&b)
                    .transfer_to_state::<Go>(&a)?;
                ctx.change_state(&a)?;
                send(&ctx.direct_mbox(), Go(1)).unwrap();
                Ok(())
            });
        Environment::launch_with(EnvParams::new().error_logger(move |l| e.push(l)), |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(agent);
            })
            .unwrap();
        })
        .unwrap();
        let errors = errors.get();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("transfer_to_state loop"), "{errors:?}");
    });
}

#[test]
fn suppress_stops_the_lookup_before_the_parent_state() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let p = State::new("p");
            let quiet = p.initial_substate("quiet")?;
            let loud = p.substate("loud")?;
            ctx.subscribe_self()
                .in_state(&p)
                .event(|s: &mut Script, ctx, g: &Go| {
                    s.log
                        .push(format!("p got {} in {}", g.0, ctx.current_state().name()))
                })?;
            ctx.subscribe_self().in_state(&quiet).suppress::<Go>()?;
            ctx.subscribe_self()
                .in_state(&quiet)
                .event(move |_: &mut Script, ctx, _: &u8| ctx.change_state(&loud).unwrap())?;
            ctx.change_state(&p)?;
            let me = ctx.direct_mbox();
            send(&me, Go(1)).unwrap();
            send(&me, 0u8).unwrap();
            send_self(ctx, [Go(2)]);
            Ok(())
        })
    });
    assert_eq!(log, ["p got 2 in loud"]);
}

#[test]
fn just_switch_to_switches_without_handling() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let a = State::new("a");
            let b = State::new("b");
            ctx.subscribe_self().in_state(&a).just_switch_to::<Go>(&b)?;
            ctx.subscribe_self()
                .in_state(&b)
                .event(|s: &mut Script, _, g: &Go| s.log.push(format!("b got {}", g.0)))?;
            log_hooks(ctx, &[&a, &b]);
            ctx.change_state(&a)?;
            send_self(ctx, [Go(1), Go(2)]);
            Ok(())
        })
    });
    assert_eq!(log, ["enter a", "exit a", "enter b", "b got 2", "exit b"]);
}

#[test]
fn dead_letter_handler_takes_what_no_state_handles() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let a = State::new("a");
            let b = State::new("b");
            ctx.subscribe_self()
                .in_state(&a)
                .event(move |s: &mut Script, ctx, g: &Go| {
                    s.log.push(format!("a got {}", g.0));
                    ctx.change_state(&b).unwrap();
                })?;
            ctx.subscribe_self()
                .dead_letter(|s: &mut Script, _, g: &Go| {
                    s.log.push(format!("dead letter {}", g.0))
                })?;
            ctx.change_state(&a)?;
            send_self(ctx, [Go(1), Go(2), Go(3)]);
            Ok(())
        })
    });
    assert_eq!(log, ["a got 1", "dead letter 2", "dead letter 3"]);
}

#[test]
fn a_message_no_state_handles_is_dropped() {
    let log = run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                let a = State::new("a");
                ctx.subscribe_self()
                    .in_state(&a)
                    .event(|s: &mut Script, _, g: &Go| s.log.push(format!("a got {}", g.0)))?;
                ctx.subscribe_self()
                    .event(move |_: &mut Script, ctx, _: &u8| ctx.change_state(&a).unwrap())?;
                Ok(())
            })
            .start(|_, ctx| {
                let me = ctx.direct_mbox();
                send(&me, Go(1)).unwrap(); // default state: no handler for Go
                send(&me, 0u8).unwrap(); // now switch to a
                send_self(ctx, [Go(2)]);
            })
    });
    assert_eq!(log, ["a got 2"]);
}

#[test]
fn changing_state_inside_on_enter_or_on_exit_is_an_error() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let a = State::new("a");
            let b = State::new("b");
            let b2 = b.clone();
            ctx.on_enter(&a, move |s: &mut Script, ctx| {
                s.log.push(format!("enter: {:?}", ctx.change_state(&b2)));
            });
            let a2 = a.clone();
            ctx.on_exit(&a, move |s: &mut Script, ctx| {
                s.log.push(format!("exit: {:?}", ctx.change_state(&a2)));
            });
            ctx.subscribe_self()
                .event(move |s: &mut Script, ctx, _: &Go| {
                    s.log.push(format!("in {}", ctx.current_state().name()));
                    ctx.change_state(&b).unwrap();
                })?;
            ctx.subscribe_self()
                .in_state(&a)
                .event(|s: &mut Script, ctx, _: &Go| {
                    s.log.push(format!("in {}", ctx.current_state().name()));
                    ctx.change_state(&ctx.default_state().clone()).unwrap();
                })?;
            ctx.change_state(&a)?;
            send_self(ctx, [Go(0), Go(1)]);
            Ok(())
        })
    });
    assert_eq!(
        log,
        [
            "enter: Err(SwitchInsideHook)",
            "in a",
            "exit: Err(SwitchInsideHook)",
            "in <default>",
        ]
    );
}

#[test]
fn several_switches_in_one_handler_apply_in_order() {
    let log = run_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let a = State::new("a");
            let b = State::new("b");
            log_hooks(ctx, &[&a, &b]);
            ctx.subscribe_self()
                .event(move |_: &mut Script, ctx, _: &Go| {
                    ctx.change_state(&a).unwrap();
                    ctx.change_state(&b).unwrap();
                })?;
            send_self(ctx, [Go(0)]);
            Ok(())
        })
    });
    assert_eq!(log, ["enter a", "exit a", "enter b", "exit b"]);
}

#[test]
fn states_nest_sixteen_levels_and_no_deeper() {
    let mut s = State::new("level1");
    for level in 2..=MAX_STATE_NESTING {
        s = s.substate(format!("level{level}")).unwrap();
        assert_eq!(s.level(), level);
    }
    assert!(matches!(
        s.substate("level17"),
        Err(StateError::TooDeep { name }) if name == "level17"
    ));
}

#[test]
fn entering_a_composite_state_without_initial_substate_is_an_error() {
    let log = run_script(|log| {
        Script::new(log).setup(|s, ctx| {
            let p = State::new("p");
            let _c = p.substate("c")?;
            s.log.push(format!("{:?}", ctx.change_state(&p)));
            send_self(ctx, Vec::<Go>::new());
            Ok(())
        })
    });
    assert_eq!(log, [r#"Err(NoInitialSubstate { name: "p" })"#]);
}

#[test]
fn a_second_initial_substate_is_an_error() {
    let p = State::new("p");
    let _a = p.initial_substate("a").unwrap();
    assert_eq!(
        p.initial_substate("b").unwrap_err(),
        StateError::InitialAlreadySet { parent: "p".into() }
    );
}

#[test]
fn the_default_state_has_no_substates() {
    let log = run_script(|log| {
        Script::new(log).setup(|s, ctx| {
            s.log.push(format!(
                "{:?}",
                ctx.default_state().substate("x").map(|_| ())
            ));
            send_self(ctx, Vec::<Go>::new());
            Ok(())
        })
    });
    assert_eq!(log, ["Err(DefaultStateIsFlat)"]);
}

// ---- leaving the state on the way out ----

/// An agent in `outer/inner` with logged hooks, which ends by deregistering its coop, by
/// a panic (reaction: deregister the coop), or by the environment stopping.
fn on_the_way_out(how: &'static str) -> Vec<String> {
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(
                    Script::new(&l)
                        .reaction(ExceptionReaction::DeregisterCoop)
                        .setup(|_, ctx| {
                            let outer = State::new("outer");
                            let inner = outer.initial_substate("inner")?;
                            log_hooks(ctx, &[&outer, &inner]);
                            ctx.change_state(&outer)?;
                            Ok(())
                        })
                        .start(move |s, ctx| {
                            s.log.push("started".to_owned());
                            match how {
                                "deregister" => ctx.deregister_coop(DeregReason::Normal),
                                "panic" => panic!("on purpose"),
                                _ => ctx.environment().stop(),
                            }
                        }),
                );
            })
            .unwrap();
        })
        .unwrap();
        log.get()
    })
}

#[test]
fn deregistering_returns_the_agent_to_the_default_state_leaf_first() {
    assert_eq!(
        on_the_way_out("deregister"),
        [
            "enter outer",
            "enter inner",
            "started",
            "exit inner",
            "exit outer"
        ]
    );
}

#[test]
fn stopping_the_environment_returns_the_agent_to_the_default_state() {
    assert_eq!(
        on_the_way_out("stop"),
        [
            "enter outer",
            "enter inner",
            "started",
            "exit inner",
            "exit outer"
        ]
    );
}

#[test]
fn an_agent_deregistered_after_a_panic_leaves_its_state_without_hooks() {
    assert_eq!(
        on_the_way_out("panic"),
        ["enter outer", "enter inner", "started"]
    );
}

// ---- deactivate_agent ----

#[test]
fn a_deactivated_agent_handles_nothing_and_its_coop_deregisters_normally() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let l2 = l.clone();
            let coop = env
                .register_coop({
                    let mut coop = env.make_coop();
                    coop.add_agent(
                        Script::new(&l)
                            .setup(|_, ctx| {
                                let busy = State::new("busy");
                                log_hooks(ctx, &[&busy]);
                                // Not run on the way out of a deactivated agent.
                                let default = ctx.default_state().clone();
                                ctx.on_enter(&default, |s: &mut Script, _| {
                                    s.log.push("enter default".to_owned())
                                });
                                ctx.change_state(&busy)?;
                                ctx.subscribe_self().in_state(&busy).event(
                                    |s: &mut Script, _, n: &u32| s.log.push(format!("handled {n}")),
                                )?;
                                Ok(())
                            })
                            .start(|s, ctx| {
                                let me = ctx.direct_mbox();
                                send(&me, 1u32).unwrap();
                                send(&me, 2u32).unwrap();
                                // A change asked for before the deactivation is dropped.
                                ctx.change_state(&State::new("elsewhere")).unwrap();
                                ctx.deactivate_agent();
                                let sub =
                                    ctx.subscribe_self().event(|_: &mut Script, _, _: &u8| {});
                                s.log.push(format!("{sub:?}"));
                                let change = ctx.change_state(&State::new("x"));
                                s.log.push(format!("{change:?}"));
                                send(&me, 3u32).unwrap();
                            }),
                    );
                    coop
                })
                .unwrap();
            // Give the queued messages every chance to be (wrongly) handled: a round trip
            // through the same worker after them.
            let probe = env
                .introduce_coop(|c| {
                    c.add_agent(Script::new(&l2).setup(|_, ctx| {
                        ctx.subscribe_self().event(|s: &mut Script, ctx, _: &u64| {
                            s.log.push("probe".to_owned());
                            ctx.deregister_coop(DeregReason::Normal);
                        })?;
                        Ok(())
                    }))
                })
                .unwrap();
            l.wait_for(4);
            send(&probe, 0u64).unwrap();
            l.wait_for(5);
            coop.deregister(DeregReason::Normal);
        })
        .unwrap();
        assert_eq!(
            log.get(),
            [
                "enter busy",
                "Err(AgentDeactivated)",
                "Err(AgentDeactivated)",
                "exit busy",
                "probe",
            ]
        );
    });
}
