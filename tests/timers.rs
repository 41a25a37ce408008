//! Timers: delayed and periodic sends, handles, revocation, state time limits.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams, ReceiveStatus};
use agentbox::prelude::*;
use agentbox::{send_delayed, send_delayed_mutable, send_periodic, TimerError};
use common::{with_env, within_patience, Log, PATIENCE};

#[test]
fn a_zero_delay_is_delivered() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        send_delayed(&chain.as_mbox(), Duration::ZERO, 7u8)
            .unwrap()
            .detach();
        let mut got = None;
        let r = receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on(|v: &u8| got = Some(*v)),
        );
        assert_eq!(r.status, ReceiveStatus::Completed);
        assert_eq!(got, Some(7));
    });
}

#[test]
fn a_periodic_timer_delivers_the_same_instance_each_period() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let timer = send_periodic(
            &chain.as_mbox(),
            Duration::ZERO,
            Duration::from_millis(1),
            String::from("tick"),
        )
        .unwrap();
        let mut addresses = Vec::new();
        receive(
            &chain,
            ReceiveParams::new().handle_n(3).total_time(PATIENCE),
            &mut Handlers::new().on(|s: &String| addresses.push(s as *const String as usize)),
        );
        drop(timer);
        assert_eq!(addresses.len(), 3);
        assert!(addresses.windows(2).all(|w| w[0] == w[1]), "{addresses:?}");
    });
}

#[test]
fn dropping_the_last_handle_cancels_but_a_clone_keeps_it() {
    with_env(|env| {
        // Kept by a clone: delivered.
        let chain = env.create_mchain(MChainParams::unbounded());
        let timer = send_delayed(&chain.as_mbox(), Duration::from_millis(20), 1u8).unwrap();
        let clone = timer.clone();
        drop(timer);
        let r = receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on(|_: &u8| {}),
        );
        assert_eq!(r.handled, 1);
        drop(clone);
        // The last handle dropped: never handled (even if it fired before the drop, on a
        // slow machine: its copy is revoked).
        let timer = send_delayed(&chain.as_mbox(), Duration::from_millis(20), 2u8).unwrap();
        drop(timer);
        assert_eq!(env.pending_timers(), 0);
        let r = receive(
            &chain,
            ReceiveParams::new().empty_timeout(Duration::from_millis(100)),
            &mut Handlers::new().on(|_: &u8| {}),
        );
        assert_eq!(r.handled, 0);
    });
}

#[test]
fn a_detached_timer_fires_and_cancel_after_firing_revokes_the_queued_copy() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        send_delayed(&chain.as_mbox(), Duration::ZERO, 1u8)
            .unwrap()
            .detach();
        let revoked = send_delayed(&chain.as_mbox(), Duration::ZERO, 2u8).unwrap();
        // Both fired (the chain holds both copies); then one is cancelled.
        let deadline = Instant::now() + PATIENCE;
        while chain.len() < 2 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(!revoked.is_active()); // a one-shot timer that fired is no longer active
        revoked.cancel();
        let mut got = Vec::new();
        let r = receive(
            &chain,
            ReceiveParams::new().no_wait(),
            &mut Handlers::new().on(|v: &u8| got.push(*v)),
        );
        assert_eq!(r.extracted, 2);
        assert_eq!(r.handled, 1);
        assert_eq!(got, [1]);
    });
}

#[test]
fn mutable_timer_messages_follow_the_mutable_rules() {
    with_env(|env| {
        let mpmc = env.create_mbox();
        assert!(matches!(
            send_delayed_mutable(&mpmc, Duration::ZERO, 1u8),
            Err(TimerError::MutableToMultiConsumer { .. })
        ));
        let chain = env.create_mchain(MChainParams::unbounded());
        assert!(matches!(
            agentbox::schedule_message(
                &chain.as_mbox(),
                agentbox::Message::new_mutable(1u8),
                Duration::ZERO,
                Some(Duration::from_millis(1)),
            ),
            Err(TimerError::MutablePeriodic { .. })
        ));
        send_delayed_mutable(&chain.as_mbox(), Duration::ZERO, String::from("moved"))
            .unwrap()
            .detach();
        let mut got = String::new();
        receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on_mutable(|s: String| got = s),
        );
        assert_eq!(got, "moved");
    });
}

#[test]
fn a_hundred_thousand_pending_timers_fire_in_deadline_order_and_cancel() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let mbox = chain.as_mbox();
        // 100 000 far timers, half cancelled at once (compaction), then three near ones
        // scheduled in reverse deadline order.
        let mut far = Vec::new();
        for i in 0..100_000u32 {
            far.push(send_delayed(&mbox, Duration::from_secs(3600), i).unwrap());
        }
        assert_eq!(env.pending_timers(), 100_000);
        far.truncate(50_000);
        assert_eq!(env.pending_timers(), 50_000);
        // Each timer's deadline is known to lie between `before + delay` and `after +
        // delay` around its `send_delayed` call. Where those windows do not overlap the
        // order is fixed, whatever the machine's speed; a stalled scheduling thread only
        // widens the windows and removes pairs from the check.
        let mut windows = Vec::new();
        for (ms, v) in [(30u64, 3u8), (20, 2u8), (10, 1u8)] {
            let delay = Duration::from_millis(ms);
            let before = Instant::now();
            send_delayed(&mbox, delay, v).unwrap().detach();
            windows.push((v, before + delay, Instant::now() + delay));
        }
        let mut got = Vec::new();
        receive(
            &chain,
            ReceiveParams::new().handle_n(3).total_time(PATIENCE),
            &mut Handlers::new().on(|v: &u8| got.push(*v)),
        );
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, [1, 2, 3], "each near timer fired once");
        let pos = |v: u8| got.iter().position(|&g| g == v).unwrap();
        for &(a, _, a_latest) in &windows {
            for &(b, b_earliest, _) in &windows {
                if a_latest < b_earliest {
                    assert!(pos(a) < pos(b), "{a} is due before {b}: got {got:?}");
                }
            }
        }
        // On an idle machine the windows are microseconds wide: reverse scheduling order,
        // deadline order of firing.
        drop(far);
        assert_eq!(env.pending_timers(), 0);
    });
}

#[test]
fn a_timer_to_a_gone_environment_is_a_typed_error() {
    within_patience(|| {
        let mut kept = None;
        Environment::launch(|env| kept = Some(env.create_mbox())).unwrap();
        let mbox = kept.unwrap();
        assert!(matches!(
            send_delayed(&mbox, Duration::ZERO, 1u8),
            Err(TimerError::NotRunning { .. })
        ));
    });
}

// ---- state time limits ----

struct Probe;
struct Leave;
struct Rearm;
struct Busy;

/// Enters `limited` (time limit → `expired`) at start; logs each state entered.
struct Limited {
    log: Log,
    limited: State,
    expired: State,
    other: State,
    limit: Duration,
    on_start: fn(&mut Limited, &mut Context<Limited>),
}

impl Agent for Limited {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.time_limit(&self.limited, self.limit, &self.expired)?;
        for s in [&self.limited, &self.other] {
            let log = self.log.clone();
            let name = s.name().to_owned();
            ctx.on_enter(s, move |_, _| log.push(format!("enter {name}")));
        }
        let expired = self.expired.clone();
        let log = self.log.clone();
        ctx.on_enter(&expired, move |_, ctx| {
            *EXPIRED.lock().unwrap() = Some(Instant::now());
            log.push("enter expired");
            ctx.deregister_coop(DeregReason::Normal);
        });
        let (limited, other) = (self.limited.clone(), self.other.clone());
        ctx.subscribe_self()
            .in_state(&limited)
            .just_switch_to::<Leave>(&other)?;
        ctx.subscribe_self()
            .in_state(&other)
            .event(|_: &mut Self, ctx, _: &Probe| ctx.deregister_coop(DeregReason::Normal))?;
        ctx.subscribe_self()
            .in_state(&limited)
            .event(|_: &mut Self, _, _: &Busy| {
                let until = Instant::now() + Duration::from_millis(50);
                while Instant::now() < until {
                    std::thread::yield_now();
                }
            })?;
        ctx.subscribe_self()
            .in_state(&limited)
            .event(|a: &mut Self, ctx, _: &Rearm| {
                let (l, e) = (a.limited.clone(), a.expired.clone());
                // Taken before the countdown starts, so that `expired - rearmed >= 80 ms`
                // holds however long this thread is descheduled in between.
                *REARMED.lock().unwrap() = Some(Instant::now());
                ctx.time_limit(&l, Duration::from_millis(80), &e).unwrap();
                a.log.push("rearmed");
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        // What the scenario sends is queued before the state (and its countdown) is
        // entered, so no expiry can be queued ahead of it, however slow this thread is.
        (self.on_start)(self, ctx);
        ctx.change_state(&self.limited.clone()).unwrap();
    }
}

fn run_limited(limit: Duration, on_start: fn(&mut Limited, &mut Context<Limited>)) -> Vec<String> {
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Limited {
                    log: l,
                    limited: State::new("limited"),
                    expired: State::new("expired"),
                    other: State::new("other"),
                    limit,
                    on_start,
                });
            })
            .unwrap();
        })
        .unwrap();
        log.get()
    })
}

#[test]
fn leaving_the_state_disarms_its_time_limit() {
    // Leave at once; the probe comes long after the limit would have expired.
    let log = run_limited(Duration::from_millis(10), |_, ctx| {
        let me = ctx.direct_mbox();
        send(&me, Leave).unwrap();
        send_delayed(&me, Duration::from_millis(100), Probe)
            .unwrap()
            .detach();
    });
    assert_eq!(log, ["enter limited", "enter other"]);
}

#[test]
fn a_stale_expiry_already_queued_is_ignored() {
    // In `limited`, the agent stays busy past the limit, so the expiry is queued behind
    // `Leave`: by the time it is handled the state was left, and it must not switch.
    let log = run_limited(Duration::from_millis(5), |_, ctx| {
        let me = ctx.direct_mbox();
        send(&me, Busy).unwrap();
        send(&me, Leave).unwrap();
        send_delayed(&me, Duration::from_millis(50), Probe)
            .unwrap()
            .detach();
    });
    assert_eq!(log, ["enter limited", "enter other"]);
}

#[test]
fn setting_the_limit_again_while_active_restarts_it_from_zero() {
    // Limit 40 ms from entry; a `Rearm` (queued before the entry, so before any expiry)
    // sets it again to 80 ms. The first countdown is then void; the switch comes no sooner
    // than 80 ms after the re-arm (timers never fire early, so this lower bound holds on
    // any machine), while the first countdown would have ended 40 ms after the entry,
    // which is before the re-arm.
    let log = run_limited(Duration::from_millis(40), |_, ctx| {
        send(&ctx.direct_mbox(), Rearm).unwrap();
    });
    assert_eq!(log, ["enter limited", "rearmed", "enter expired"]);
    let rearmed = REARMED.lock().unwrap().expect("re-arm time");
    let expired = EXPIRED.lock().unwrap().expect("expiry time");
    assert!(expired - rearmed >= Duration::from_millis(80));
}

static REARMED: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
static EXPIRED: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// `just_switch_to` on a timer message: cancelled with its copy queued, it switches nothing.
struct Switcher {
    log: Log,
    next: State,
}

impl Agent for Switcher {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let next = self.next.clone();
        ctx.subscribe_self().just_switch_to::<Probe>(&next)?;
        let log = self.log.clone();
        ctx.on_enter(&next, move |_, _| log.push("switched"));
        ctx.subscribe_self()
            .in_state(&next)
            .event(|_: &mut Self, ctx, _: &Leave| ctx.deregister_coop(DeregReason::Normal))?;
        ctx.subscribe_self()
            .event(|_: &mut Self, ctx, _: &Leave| ctx.deregister_coop(DeregReason::Normal))?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let timer = send_delayed(&me, Duration::ZERO, Probe).unwrap();
        while ctx.environment().pending_timers() > 0 {
            std::thread::yield_now();
        }
        timer.cancel();
        send(&me, Leave).unwrap();
    }
}

#[test]
fn a_cancelled_timer_message_switches_no_state() {
    let log = within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Switcher {
                    log: l,
                    next: State::new("next"),
                });
            })
            .unwrap();
        })
        .unwrap();
        log.get()
    });
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn a_panicking_delivery_filter_does_not_stop_the_timer_thread() {
    struct Picky {
        source: Mbox,
        got: Log,
    }
    impl Agent for Picky {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.set_delivery_filter(&self.source.clone(), |v: &u8| {
                assert!(*v != 1, "the filter panics on 1");
                true
            })?;
            ctx.subscribe(&self.source.clone())
                .event(|a: &mut Self, ctx, v: &u8| {
                    a.got.push(format!("{v}"));
                    ctx.deregister_coop(DeregReason::Normal);
                })?;
            Ok(())
        }
        fn exception_reaction(&self) -> ExceptionReaction {
            ExceptionReaction::Ignore
        }
    }
    let errors = Log::new();
    let got = Log::new();
    let (e, g) = (errors.clone(), got.clone());
    within_patience(move || {
        let params = agentbox::EnvParams::new().error_logger(move |l| e.push(l));
        Environment::launch_with(params, move |env| {
            let source = env.create_mbox();
            env.introduce_coop(|coop| {
                coop.add_agent(Picky {
                    source: source.clone(),
                    got: g,
                });
            })
            .unwrap();
            send_delayed(&source, Duration::ZERO, 1u8).unwrap().detach();
            send_delayed(&source, Duration::from_millis(5), 2u8)
                .unwrap()
                .detach();
        })
        .unwrap();
    });
    assert_eq!(got.get(), ["2"]);
    assert!(errors
        .get()
        .iter()
        .any(|l| l.contains("failed in a delivery filter")));
}

// ---- durations too long for an `Instant` ----

/// A delay past what `Instant` can hold is "never": no panic in the caller, nothing
/// delivered, and the timer thread goes on serving other timers.
#[test]
fn a_delay_too_long_for_an_instant_never_fires_and_nothing_panics() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let mbox = chain.as_mbox();
        let never = send_delayed(&mbox, Duration::MAX, 1u8).unwrap();
        assert!(never.is_active());
        // Fires once at once, then its next tick would be past `Instant`'s range.
        send_periodic(&mbox, Duration::ZERO, Duration::MAX, 2u8)
            .unwrap()
            .detach();
        let mut got = Vec::new();
        receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on(|v: &u8| got.push(*v)),
        );
        assert_eq!(got, [2]);
        // The timer thread survived the periodic re-arm: a later timer still fires.
        send_delayed(&mbox, Duration::from_millis(1), 3u8)
            .unwrap()
            .detach();
        receive(
            &chain,
            ReceiveParams::new().handle_n(1).total_time(PATIENCE),
            &mut Handlers::new().on(|v: &u8| got.push(*v)),
        );
        assert_eq!(got, [2, 3]);
        never.cancel();
        assert!(!never.is_active());
    });
}

struct Forever {
    limited: State,
    expired: State,
    log: Log,
}

impl Agent for Forever {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let (l, e) = (self.limited.clone(), self.expired.clone());
        ctx.time_limit(&l, Duration::MAX, &e).unwrap();
        ctx.subscribe_self()
            .in_state(&l)
            .event(|a: &mut Self, ctx, _: &Probe| {
                a.log.push("probe in limited");
                ctx.deregister_coop(DeregReason::Normal);
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        // The probe comes after a timer that is due long before it: had the countdown
        // panicked the timer thread, the probe would never arrive.
        send_delayed(&ctx.direct_mbox(), Duration::from_millis(5), Probe)
            .unwrap()
            .detach();
        ctx.change_state(&self.limited.clone()).unwrap();
    }
}

#[test]
fn a_state_time_limit_of_duration_max_never_expires() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Forever {
                    limited: State::new("limited"),
                    expired: State::new("expired"),
                    log: l,
                });
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(log.get(), ["probe in limited"]);
    });
}

// ---- cancelling releases the message ----

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn cancelling_a_timer_frees_its_message_at_once() {
    with_env(|env| {
        let mbox = env.create_mbox();
        let freed = Arc::new(AtomicBool::new(false));
        let timer =
            send_delayed(&mbox, Duration::from_secs(3600), DropFlag(freed.clone())).unwrap();
        assert!(!freed.load(Ordering::SeqCst));
        timer.cancel();
        assert!(
            freed.load(Ordering::SeqCst),
            "freed by cancel, not at the deadline"
        );

        let freed = Arc::new(AtomicBool::new(false));
        let periodic = send_periodic(
            &mbox,
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            DropFlag(freed.clone()),
        )
        .unwrap();
        drop(periodic); // dropping the last handle cancels
        assert!(freed.load(Ordering::SeqCst));
        assert_eq!(env.pending_timers(), 0);

        // A timer too far away for `Instant` is pending until cancelled.
        let never = send_delayed(&mbox, Duration::MAX, 1u8).unwrap();
        assert_eq!(env.pending_timers(), 1);
        drop(never);
        assert_eq!(env.pending_timers(), 0);
    });
}

#[test]
fn a_cancelled_timer_with_a_queued_copy_frees_the_message_with_that_copy() {
    with_env(|env| {
        let chain = env.create_mchain(MChainParams::unbounded());
        let freed = Arc::new(AtomicBool::new(false));
        let timer =
            send_delayed(&chain.as_mbox(), Duration::ZERO, DropFlag(freed.clone())).unwrap();
        // Wait until the copy is queued in the chain, then cancel.
        let until = Instant::now() + PATIENCE;
        while chain.is_empty() && Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(chain.len(), 1);
        timer.cancel();
        assert!(
            !freed.load(Ordering::SeqCst),
            "the queued copy still holds it"
        );
        let r = receive(
            &chain,
            ReceiveParams::new().no_wait(),
            &mut Handlers::new().on(|_: &DropFlag| panic!("a revoked copy is not handled")),
        );
        assert_eq!(r.handled, 0);
        assert!(freed.load(Ordering::SeqCst));
    });
}
