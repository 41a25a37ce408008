//! Every `Duration` the core takes accepts `Duration::ZERO` and `Duration::MAX`: nothing
//! panics (neither the caller nor a worker, timer or distribution thread), and the value
//! means what its docs say (zero: at once or never wait; `MAX`: never, or wait for good).
//! One test per setting; each does real work with the setting in force, so that a panic on
//! a path the setting reaches (a spin that found work, a wait that ended) shows.

mod common;

use std::time::Duration;

use agentbox::dispatcher::{active_group, active_obj, adv_thread_pool, one_thread, thread_pool};
use agentbox::mchain::{receive, Handlers, MChainParams, OverflowReaction, ReceiveParams};
use agentbox::prelude::*;
use agentbox::request::{request_reply, Request, RequestError};
use agentbox::{send_delayed, send_periodic, BindParams, Binder, Fifo, SendError};
use common::{with_env, within_patience, Log};

const BOTH: [Duration; 2] = [Duration::ZERO, Duration::MAX];

struct Ping(u32);
struct Pong(u32);

/// Answers each `Ping` on its direct mbox with a `Pong` to `to`.
struct Echo {
    to: Mbox,
}

impl Agent for Echo {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, p: &Ping| {
            send(&a.to, Pong(p.0)).unwrap();
        })?;
        Ok(())
    }
}

#[test]
fn spin_thresholds_of_every_dispatcher_kind() {
    for spin in BOTH {
        let kinds: Vec<(&str, Binder)> = vec![
            (
                "one_thread",
                one_thread::Builder::new()
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder(),
            ),
            (
                "active_obj",
                active_obj::Builder::new()
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder(),
            ),
            (
                "active_group",
                active_group::Builder::new()
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder_with(BindParams::new().group("g")),
            ),
            (
                "thread_pool",
                thread_pool::Builder::new()
                    .threads(1)
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder_with(BindParams::new().fifo(Fifo::Individual)),
            ),
            (
                "elastic thread_pool",
                thread_pool::Builder::new()
                    .thread_limits(1, 1, 2)
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder(),
            ),
            (
                "adv_thread_pool",
                adv_thread_pool::Builder::new()
                    .threads(1)
                    .spin_threshold(spin)
                    .build()
                    .unwrap()
                    .binder(),
            ),
        ];
        for (kind, binder) in kinds {
            assert_eq!(
                ping_pong(binder),
                (0..20).collect::<Vec<_>>(),
                "{kind}, spin {spin:?}"
            );
        }
    }
}

/// Sends 20 pings, one at a time, to an `Echo` bound by `binder`, with pauses between them
/// (so that idle workers spin or park and then find work), and returns the pongs.
fn ping_pong(binder: Binder) -> Vec<u32> {
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        with_env(move |env| {
            let back = env.create_mchain(MChainParams::unbounded());
            let echo = env
                .introduce_coop(|coop| {
                    coop.add_agent_with_binder(Echo { to: back.as_mbox() }, binder)
                })
                .unwrap();
            for i in 0..20u32 {
                // A pause: the worker runs out of work and spins or parks.
                std::thread::sleep(Duration::from_millis(2));
                send(&echo, Ping(i)).unwrap();
                receive(
                    &back,
                    ReceiveParams::new()
                        .handle_n(1)
                        .empty_timeout(common::PATIENCE),
                    &mut Handlers::new().on(|p: &Pong| l.push(p.0.to_string())),
                );
            }
        });
        log.get().into_iter().map(|s| s.parse().unwrap()).collect()
    })
}

#[test]
fn a_thread_pool_s_max_time_at_once() {
    for limit in BOTH {
        let binder = thread_pool::Builder::new()
            .threads(1)
            .max_time_at_once(limit)
            .build()
            .unwrap()
            .binder();
        assert_eq!(ping_pong(binder), (0..20).collect::<Vec<_>>(), "{limit:?}");
    }
}

#[test]
fn a_chain_s_wait_on_full() {
    with_env(|env| {
        // Zero: no wait, the overflow reaction at once.
        let chain = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(Duration::ZERO)
                .overflow(OverflowReaction::Error),
        );
        chain.send(0u32).unwrap();
        assert!(matches!(chain.send(1u32), Err(SendError::ChainFull { .. })));
        // MAX: waits until a reader makes room.
        let chain = env.create_mchain(
            MChainParams::bounded(1)
                .wait_on_full(Duration::MAX)
                .overflow(OverflowReaction::Error),
        );
        chain.send(0u32).unwrap();
        let c = chain.clone();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            common::drain_u32(&c)
        });
        chain.send(1u32).unwrap();
        let mut got = reader.join().unwrap();
        got.extend(common::drain_u32(&chain));
        assert_eq!(got, [0, 1]);
    });
}

#[test]
fn receive_s_empty_timeout_and_total_time() {
    use agentbox::mchain::ReceiveStatus;
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let run = |params: ReceiveParams<'_>| {
            let mut got = Vec::new();
            let r = receive(
                &chain,
                params,
                &mut Handlers::new().on(|v: &u32| got.push(*v)),
            );
            (r.status, got)
        };
        // Zero empty timeout: takes what is queued, then returns.
        chain.send(1u32).unwrap();
        chain.send(2u32).unwrap();
        let r = run(ReceiveParams::new().empty_timeout(Duration::ZERO));
        assert_eq!(r, (ReceiveStatus::EmptyTimeout, vec![1, 2]));
        // Zero total time: returns at once.
        chain.send(3u32).unwrap();
        let r = run(ReceiveParams::new().total_time(Duration::ZERO));
        assert_eq!(r, (ReceiveStatus::TotalTimeout, vec![]));
        // MAX, both: waits for the count (the message already there, then one sent later).
        let c = chain.clone();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c.send(4u32).unwrap();
        });
        let r = run(ReceiveParams::new()
            .handle_n(2)
            .empty_timeout(Duration::MAX)
            .total_time(Duration::MAX));
        late.join().unwrap();
        assert_eq!(r, (ReceiveStatus::Completed, vec![3, 4]));
    });
}

/// Answers `Request<u32, u32>` with `n + 1`.
struct Answerer;

impl Agent for Answerer {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|_: &mut Self, _, r: &Request<u32, u32>| {
                let _ = r.reply(r.get() + 1);
            })?;
        Ok(())
    }
}

#[test]
fn a_request_s_timeout() {
    with_env(|env| {
        let to = env.introduce_coop(|coop| coop.add_agent(Answerer)).unwrap();
        assert_eq!(request_reply::<u32, u32>(&to, Duration::MAX, 1).unwrap(), 2);
        // Zero: answered if the answer is there at once, a timeout otherwise.
        match request_reply::<u32, u32>(&to, Duration::ZERO, 1) {
            Ok(2) | Err(RequestError::Timeout) => {}
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn delays_and_periods_of_timers() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let to = chain.as_mbox();
        // A zero delay comes at once; MAX never comes; a zero period is a single shot; a
        // MAX period comes once and then never again.
        let _a = send_delayed(&to, Duration::ZERO, 1u32).unwrap();
        let _b = send_delayed(&to, Duration::MAX, 2u32).unwrap();
        let _c = send_periodic(&to, Duration::ZERO, Duration::ZERO, 3u32).unwrap();
        let _d = send_periodic(&to, Duration::ZERO, Duration::MAX, 4u32).unwrap();
        let _e = send_periodic(&to, Duration::MAX, Duration::MAX, 5u32).unwrap();
        let _f = send_periodic(&to, Duration::MAX, Duration::ZERO, 6u32).unwrap();
        let mut got = Vec::new();
        receive(
            &chain,
            ReceiveParams::new()
                .handle_n(3)
                .total_time(common::PATIENCE),
            &mut Handlers::new().on(|v: &u32| got.push(*v)),
        );
        // Nothing more within a while.
        receive(
            &chain,
            ReceiveParams::new().total_time(Duration::from_millis(100)),
            &mut Handlers::new().on(|v: &u32| got.push(*v)),
        );
        got.sort_unstable();
        assert_eq!(got, [1, 3, 4]);
    });
}

struct Timed {
    log: Log,
    limit: Duration,
}

impl Agent for Timed {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let waiting = State::new("waiting");
        let done = State::new("done");
        ctx.time_limit(&waiting, self.limit, &done).unwrap();
        let log = self.log.clone();
        ctx.on_enter(&done, move |_: &mut Self, _| log.push("time's up"));
        ctx.change_state(&waiting).unwrap();
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        self.log.push("started");
        if self.limit == Duration::MAX {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
}

#[test]
fn a_state_s_time_limit() {
    for limit in BOTH {
        let log = Log::new();
        let l = log.clone();
        within_patience(move || {
            Environment::launch(move |env| {
                env.introduce_coop(|coop| {
                    coop.add_agent(Timed { log: l, limit });
                })
                .unwrap();
                if limit.is_zero() {
                    // Leaves when the limit fired.
                    let env = env.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(300));
                        env.stop();
                    });
                }
            })
            .unwrap();
        });
        let got = log.get();
        if limit.is_zero() {
            assert_eq!(got, ["started", "time's up"], "{limit:?}");
        } else {
            assert_eq!(got, ["started"], "{limit:?}");
        }
    }
}

#[test]
fn the_stats_distribution_period() {
    for period in BOTH {
        with_env(move |env| {
            let stats = env.stats_controller();
            stats.set_distribution_period(period);
            stats.turn_on();
            std::thread::sleep(Duration::from_millis(20));
            stats.turn_off();
            // The environment is still usable.
            let chain = env.create_mchain(MChainParams::unbounded());
            chain.send(1u32).unwrap();
            assert_eq!(common::drain_u32(&chain), [1]);
        });
    }
}

/// A harmonizer's period: `MAX` runs no step (it never comes) and the pool keeps working;
/// zero is refused with a typed error (a step on every ask would be no period at all).
#[test]
fn a_harmonizer_s_period() {
    use agentbox::harmonizer::{Harmonizer, HarmonizerError};
    let pool = thread_pool::Builder::new()
        .thread_limits(1, 1, 2)
        .build()
        .unwrap();
    let zero = Harmonizer::builder()
        .dispatcher(&pool)
        .period(Duration::ZERO)
        .build();
    assert!(matches!(zero, Err(HarmonizerError::ZeroPeriod)));
    let _never = Harmonizer::builder()
        .dispatcher(&pool)
        .period(Duration::MAX)
        .build()
        .unwrap();
    assert_eq!(
        ping_pong(pool.binder()),
        (0..20).collect::<Vec<_>>(),
        "harmonized with period MAX"
    );
}
