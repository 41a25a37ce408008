//! The behavioural suite on `thread_pool` (both FIFO disciplines), plus its own rules:
//! cooperation FIFO keeps a coop's agents serial and in order, individual FIFO lets them
//! run in parallel, and `max_demands_at_once` gives an exact interleaving.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use agentbox::dispatcher::thread_pool;
use agentbox::dispatcher::BuildError;
use agentbox::prelude::*;
use agentbox::Fifo;
use common::{within_patience, Log, Script};

dispatcher_suite!(cooperation_fifo, |_env| {
    agentbox::dispatcher::thread_pool::Builder::new()
        .threads(2)
        .build()
        .expect("build thread_pool")
        .binder()
});

dispatcher_suite!(individual_fifo, |_env| {
    agentbox::dispatcher::thread_pool::Builder::new()
        .threads(2)
        .max_demands_at_once(1)
        .build()
        .expect("build thread_pool")
        .binder_with(agentbox::BindParams::new().fifo(agentbox::Fifo::Individual))
});

#[test]
fn zero_threads_or_zero_demands_at_once_is_a_typed_error() {
    assert!(matches!(
        thread_pool::Builder::new().threads(0).build(),
        Err(BuildError::InvalidParameter(_))
    ));
    assert!(matches!(
        thread_pool::Builder::new().max_demands_at_once(0).build(),
        Err(BuildError::InvalidParameter(_))
    ));
}

#[test]
fn cooperation_fifo_keeps_a_coops_agents_serial_and_in_send_order() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let pool = thread_pool::Builder::new().threads(2).build().unwrap();
            let busy = Arc::new(AtomicBool::new(false));
            let (a, b) = env
                .introduce_coop(|coop| {
                    coop.set_binder(pool.binder());
                    let mut agent = |name: &'static str| {
                        let busy = busy.clone();
                        coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                            ctx.subscribe_self()
                                .event(move |s: &mut Script, ctx, n: &u32| {
                                    assert!(
                                        !busy.swap(true, Ordering::SeqCst),
                                        "coop agents overlapped"
                                    );
                                    s.log.push(format!("{name}{n}"));
                                    busy.store(false, Ordering::SeqCst);
                                    if *n == 199 {
                                        ctx.deregister_coop(DeregReason::Normal);
                                    }
                                })?;
                            Ok(())
                        }))
                    };
                    (agent("a"), agent("b"))
                })
                .unwrap();
            for n in 0..200u32 {
                send(if n % 2 == 0 { &a } else { &b }, n).unwrap();
            }
        })
        .unwrap();
        let expected: Vec<String> = (0..200u32)
            .map(|n| format!("{}{n}", if n % 2 == 0 { "a" } else { "b" }))
            .collect();
        assert_eq!(log.get(), expected);
    });
}

#[test]
fn individual_fifo_lets_agents_of_one_coop_run_in_parallel() {
    within_patience(|| {
        // Both handlers wait for each other: this completes only if they run at once.
        let barrier = Arc::new(Barrier::new(2));
        Environment::launch(move |env| {
            let pool = thread_pool::Builder::new().threads(2).build().unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(
                    pool.binder_with(agentbox::BindParams::new().fifo(Fifo::Individual)),
                );
                for _ in 0..2 {
                    let barrier = barrier.clone();
                    coop.add_agent(Script::new(&Log::new()).start(move |_, ctx| {
                        barrier.wait();
                        ctx.deregister_coop(DeregReason::Normal);
                    }));
                }
            })
            .unwrap();
        })
        .unwrap();
    });
}

/// An agent on a one-thread pool that holds the pool's only worker while told to.
struct Gate {
    mbox: Mbox,
    running: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
}

impl Gate {
    fn new(env: &Environment, binder: &agentbox::Binder) -> Gate {
        let running = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let (r, rel) = (running.clone(), released.clone());
        let mbox = env
            .introduce_coop(|coop| {
                coop.set_binder(binder.clone());
                coop.add_agent(Script::new(&Log::new()).setup(move |_, ctx| {
                    ctx.subscribe_self()
                        .event(move |_: &mut Script, _, _: &u8| {
                            r.store(true, Ordering::SeqCst);
                            while !rel.load(Ordering::SeqCst) {
                                std::thread::yield_now();
                            }
                        })?;
                    Ok(())
                }))
            })
            .unwrap();
        Gate {
            mbox,
            running,
            released,
        }
    }

    /// Returns once the worker is held.
    fn hold(&self) {
        send(&self.mbox, 0u8).unwrap();
        while !self.running.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

#[test]
fn max_demands_at_once_interleaves_waiting_queues() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let pool = thread_pool::Builder::new()
                .threads(1)
                .max_demands_at_once(4)
                .build()
                .unwrap();
            let individual = pool.binder_with(agentbox::BindParams::new().fifo(Fifo::Individual));
            // The gate keeps the only worker busy until every message is queued.
            let gate = Gate::new(env, &individual);
            let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut targets = Vec::new();
            for name in ["a", "b"] {
                let (l, started) = (l.clone(), started.clone());
                targets.push(
                    env.introduce_coop(|coop| {
                        coop.set_binder(individual.clone());
                        coop.add_agent(
                            Script::new(&l)
                                .setup(move |_, ctx| {
                                    ctx.subscribe_self().event(
                                        move |s: &mut Script, _, n: &u32| {
                                            s.log.push(format!("{name}{n}"));
                                        },
                                    )?;
                                    Ok(())
                                })
                                .start(move |_, _| {
                                    started.fetch_add(1, Ordering::SeqCst);
                                }),
                        )
                    })
                    .unwrap(),
                );
            }
            // Both agents (and the gate) have run their on_start: their queues are idle.
            while started.load(Ordering::SeqCst) < 2 {
                std::thread::yield_now();
            }
            gate.hold();
            for t in &targets {
                for n in 1..=10u32 {
                    send(t, n).unwrap();
                }
            }
            gate.release();
            // Stop once everything is handled.
            l.wait_for(20);
            env.stop();
        })
        .unwrap();
        let expected: Vec<String> = [
            ("a", 1..=4),
            ("b", 1..=4),
            ("a", 5..=8),
            ("b", 5..=8),
            ("a", 9..=10),
            ("b", 9..=10),
        ]
        .into_iter()
        .flat_map(|(name, ns)| ns.map(move |n| format!("{name}{n}")))
        .collect();
        assert_eq!(log.get(), expected);
    });
}

/// The first batch of an agent counts `on_start` and its messages, not the internal demand
/// that binds the agent to its worker (SObjectizer's `max_demands_at_once` counts events).
#[test]
fn the_first_batch_counts_on_start_but_not_the_internal_bind_demand() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let pool = thread_pool::Builder::new()
                .threads(1)
                .max_demands_at_once(4)
                .build()
                .unwrap();
            let individual = pool.binder_with(agentbox::BindParams::new().fifo(Fifo::Individual));
            let gate = Gate::new(env, &individual);
            gate.hold();
            // The only worker is held: both agents are bound, started and messaged before
            // it looks at their queues.
            for name in ["a", "b"] {
                let l = l.clone();
                let target = env
                    .introduce_coop(|coop| {
                        coop.set_binder(individual.clone());
                        coop.add_agent(
                            Script::new(&l)
                                .setup(move |_, ctx| {
                                    ctx.subscribe_self().event(
                                        move |s: &mut Script, _, n: &u32| {
                                            s.log.push(format!("{name}{n}"));
                                        },
                                    )?;
                                    Ok(())
                                })
                                .start(move |s, _| s.log.push(format!("{name} start"))),
                        )
                    })
                    .unwrap();
                for n in 1..=6u32 {
                    send(&target, n).unwrap();
                }
            }
            gate.release();
            l.wait_for(14);
            env.stop();
        })
        .unwrap();
        let expected = [
            "a start", "a1", "a2", "a3", "b start", "b1", "b2", "b3", "a4", "a5", "a6", "b4", "b5",
            "b6",
        ];
        assert_eq!(log.get(), expected);
    });
}
