//! async_op: the first outcome wins, timeouts, cancellation, activation errors.
//!
//! Each agent writes what happened to a log; a dead-letter handler of the agent's own
//! records messages that found no subscription (so "not handled by the operation" is an
//! entry, not an absence). Messages an agent sends to itself are handled in the order sent,
//! and a timer whose deadline is later is delivered later (one timer thread, deadline
//! order), so every log is exact. The only timing assumption is that timers never fire
//! early.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use agentbox::prelude::*;
use agentbox::SubscribeError;
use agentbox_extra::async_op::{
    time_limited, time_unlimited, ActivateError, CancellationPoint, Status,
};
use parking_lot::Mutex;

const PATIENCE: Duration = Duration::from_secs(60);
/// How long the timeouts of these tests are.
const TIMEOUT: Duration = Duration::from_millis(50);
/// How long after a timeout's deadline a test looks again (generous: nothing relies on it
/// but "timers never fire early" and deadline order).
const MARGIN: Duration = Duration::from_millis(500);

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: impl Into<String>) {
    log.lock().push(what.into());
}

fn within_patience(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        panic!("test did not finish in {PATIENCE:?}");
    }
    t.join().unwrap();
}

/// Runs `agent` alone in a coop until it deregisters; returns the log.
fn run<A: Agent>(log: Log, agent: A) -> Vec<String> {
    within_patience(move || {
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(agent);
            })
            .unwrap();
        })
        .unwrap();
    });
    let v = log.lock().clone();
    v
}

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

// Completion messages, the timeout, and the test's own steps.
struct Ra;
struct Rb;
struct Timeout(u32);
struct Activate;
struct Finish;

/// Subscribes the agent's own dead-letter handlers for `Ra` (direct mbox) and `Rb`
/// (`other`), and `Finish` (in the default state and `states`), which runs `check` and
/// then deregisters if it returns `true`.
fn common<A: Agent>(
    ctx: &mut Context<A>,
    log: &Log,
    other: &Mbox,
    states: &[&State],
    check: impl FnMut(&mut A, &mut Context<A>) -> bool + Send + 'static,
) -> Result<(), DefineError> {
    let l = log.clone();
    ctx.subscribe_self()
        .dead_letter(move |_: &mut A, _, _: &Ra| note(&l, "dead: Ra"))?;
    let l = log.clone();
    ctx.subscribe(other)
        .dead_letter(move |_: &mut A, _, _: &Rb| note(&l, "dead: Rb"))?;
    let l = log.clone();
    let mut check = check;
    let default = ctx.default_state().clone();
    let mut finish = ctx.subscribe_self().in_state(&default);
    for s in states {
        finish = finish.in_state(s);
    }
    finish.event(move |a: &mut A, ctx, _: &Finish| {
        let done = check(a, ctx);
        note(&l, "finish");
        if done {
            ctx.deregister_coop(DeregReason::Normal);
        }
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The first completion wins.

struct FirstWins {
    log: Log,
    other: Option<Mbox>,
    rb_first: bool,
    limited: bool,
    cp: Option<CancellationPoint<Self>>,
}

impl Agent for FirstWins {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        let me = ctx.direct_mbox();
        let s = ctx.default_state().clone();
        common(ctx, &self.log, &other, &[], move |a: &mut Self, ctx| {
            let cp = a.cp.as_ref().unwrap();
            assert_eq!(cp.status(), Status::Completed);
            assert!(!cp.is_cancellable());
            assert!(!cp.cancel(ctx), "a completed operation is not cancelled");
            assert!(!ctx.has_subscription::<Ra>(&me, &s));
            assert!(!ctx.has_subscription::<Rb>(a.other.as_ref().unwrap(), &s));
            true
        })
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let other = self.other.clone().unwrap();
        let s = ctx.default_state().clone();
        let on_ra = |a: &mut Self, _: &mut Context<Self>, _: &Ra| note(&a.log, "op: Ra");
        let on_rb = |a: &mut Self, _: &mut Context<Self>, _: &Rb| note(&a.log, "op: Rb");
        let cp = if self.limited {
            time_limited::make(ctx)
                .completed_on(&me, &s, on_ra)
                .completed_on(&other, &s, on_rb)
                .timeout_handler(&s, |a: &mut Self, _, _: &Timeout| note(&a.log, "timeout"))
                .activate(ctx, Duration::from_secs(3600), Timeout(0))
                .unwrap()
        } else {
            time_unlimited::make(ctx)
                .completed_on(&me, &s, on_ra)
                .completed_on(&other, &s, on_rb)
                .activate(ctx)
                .unwrap()
        };
        assert_eq!(cp.status(), Status::Activated);
        assert!(cp.is_cancellable());
        assert!(ctx.has_subscription::<Ra>(&me, &s));
        assert!(ctx.has_subscription::<Rb>(&other, &s));
        self.cp = Some(cp);
        if self.rb_first {
            send(&other, Rb).unwrap();
            send(&me, Ra).unwrap();
        } else {
            send(&me, Ra).unwrap();
            send(&other, Rb).unwrap();
        }
        send(&me, Finish).unwrap();
    }
}

fn first_wins(rb_first: bool, limited: bool) -> Vec<String> {
    let log = new_log();
    run(
        log.clone(),
        FirstWins {
            log,
            other: None,
            rb_first,
            limited,
            cp: None,
        },
    )
}

#[test]
fn the_first_completion_wins_and_the_other_finds_no_handler() {
    assert_eq!(first_wins(false, false), ["op: Ra", "dead: Rb", "finish"]);
    assert_eq!(first_wins(true, false), ["op: Rb", "dead: Ra", "finish"]);
}

#[test]
fn the_first_completion_wins_in_a_time_limited_operation() {
    assert_eq!(first_wins(false, true), ["op: Ra", "dead: Rb", "finish"]);
    assert_eq!(first_wins(true, true), ["op: Rb", "dead: Ra", "finish"]);
}

// ---------------------------------------------------------------------------------------
// Timeouts.

/// How the `Timeouts` agent sets up its operation.
#[derive(Clone, Copy, PartialEq)]
enum TimeoutCase {
    /// A timeout handler in the default state; no completion comes.
    Plain,
    /// A timeout handler only in another state, and a default timeout handler.
    DefaultHandler,
    /// A timeout handler only in another state, no default one.
    NoHandler,
    /// A timeout handler in a parent state; the agent is in its substate.
    ParentState,
    /// A completion comes at once; the timeout must never be handled.
    CompletionFirst,
}

struct Timeouts {
    log: Log,
    case: TimeoutCase,
    other: Option<Mbox>,
    cp: Option<CancellationPoint<Self>>,
    parent: State,
    child: State,
    elsewhere: State,
}

impl Agent for Timeouts {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        let me = ctx.direct_mbox();
        let s = ctx.default_state().clone();
        let child = self.child.clone();
        let parent = self.parent.clone();
        common(
            ctx,
            &self.log,
            &other,
            &[&parent],
            move |a: &mut Self, ctx| {
                let status = a.cp.as_ref().unwrap().status();
                note(&a.log, format!("status: {status:?}"));
                // A timer that was not cancelled would have delivered to the operation's
                // timeout mbox with nobody subscribed any more: a drop.
                note(
                    &a.log,
                    format!("drops: {}", ctx.environment().drop_counts().no_subscribers),
                );
                assert!(!ctx.has_subscription::<Ra>(&me, &s));
                assert!(!ctx.has_subscription::<Ra>(&me, &child));
                // A completion after the outcome is not the operation's.
                send(&me, Ra).unwrap();
                send(&me, Finish2).unwrap();
                false
            },
        )?;
        let l = self.log.clone();
        let default = ctx.default_state().clone();
        ctx.subscribe_self()
            .in_state(&default)
            .in_state(&parent)
            .event(move |_: &mut Self, ctx, _: &Finish2| {
                note(&l, "finish 2");
                ctx.deregister_coop(DeregReason::Normal);
            })?;
        if self.case == TimeoutCase::ParentState {
            ctx.change_state(&self.child)?;
        }
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let s = ctx.current_state().clone();
        let on_ra = |a: &mut Self, ctx: &mut Context<Self>, _: &Ra| {
            note(&a.log, "op: Ra");
            // Look again well after the timeout's deadline.
            send_delayed(&ctx.direct_mbox(), TIMEOUT + MARGIN, Finish)
                .unwrap()
                .detach();
        };
        let on_timeout = |a: &mut Self, ctx: &mut Context<Self>, t: &Timeout| {
            assert_eq!(a.cp.as_ref().unwrap().status(), Status::TimedOut);
            assert!(!ctx.has_subscription::<Ra>(&ctx.direct_mbox(), ctx.current_state()));
            note(&a.log, format!("timeout {}", t.0));
            send(&ctx.direct_mbox(), Finish).unwrap();
        };
        let on_default = |a: &mut Self, ctx: &mut Context<Self>, t: &Timeout| {
            note(&a.log, format!("default timeout {}", t.0));
            send(&ctx.direct_mbox(), Finish).unwrap();
        };
        let op = time_limited::make(ctx).completed_on(&me, &s, on_ra);
        let op = match self.case {
            TimeoutCase::Plain | TimeoutCase::CompletionFirst => op
                .timeout_handler(&s, on_timeout)
                .default_timeout_handler(on_default),
            TimeoutCase::DefaultHandler => op
                .timeout_handler(&self.elsewhere, on_timeout)
                .default_timeout_handler(on_default),
            TimeoutCase::NoHandler => op.timeout_handler(&self.elsewhere, on_timeout),
            TimeoutCase::ParentState => op.timeout_handler(&self.parent, on_timeout),
        };
        if self.case == TimeoutCase::CompletionFirst {
            // Queued before the timer is even scheduled, so surely before the timeout;
            // handled after activation, so by the operation.
            send(&me, Ra).unwrap();
        }
        self.cp = Some(op.activate(ctx, TIMEOUT, Timeout(7)).unwrap());
        if self.case == TimeoutCase::NoHandler {
            // Nothing handles the timeout: look again well after its deadline.
            send_delayed(&me, TIMEOUT + MARGIN, Finish)
                .unwrap()
                .detach();
        }
    }
}

struct Finish2;

fn timeouts(case: TimeoutCase) -> Vec<String> {
    let log = new_log();
    let parent = State::new("parent");
    let child = parent.initial_substate("child").unwrap();
    run(
        log.clone(),
        Timeouts {
            log,
            case,
            other: None,
            cp: None,
            parent,
            child,
            elsewhere: State::new("elsewhere"),
        },
    )
}

#[test]
fn the_timeout_fires_when_no_completion_comes() {
    assert_eq!(
        timeouts(TimeoutCase::Plain),
        [
            "timeout 7",
            "status: TimedOut",
            "drops: 0",
            "finish",
            "dead: Ra",
            "finish 2"
        ]
    );
}

#[test]
fn a_timeout_handler_of_a_parent_state_handles_the_timeout_in_a_substate() {
    assert_eq!(
        timeouts(TimeoutCase::ParentState),
        [
            "timeout 7",
            "status: TimedOut",
            "drops: 0",
            "finish",
            "dead: Ra",
            "finish 2"
        ]
    );
}

#[test]
fn a_timeout_in_a_state_without_a_timeout_handler_goes_to_the_default_one() {
    assert_eq!(
        timeouts(TimeoutCase::DefaultHandler),
        [
            "default timeout 7",
            "status: TimedOut",
            "drops: 0",
            "finish",
            "dead: Ra",
            "finish 2"
        ]
    );
}

#[test]
fn a_timeout_without_any_handler_still_ends_the_operation() {
    assert_eq!(
        timeouts(TimeoutCase::NoHandler),
        [
            "status: TimedOut",
            "drops: 0",
            "finish",
            "dead: Ra",
            "finish 2"
        ]
    );
}

#[test]
fn a_completion_before_the_timeout_cancels_the_timer() {
    // `Finish` is due `MARGIN` after the timeout's deadline: had the timeout been delivered,
    // its handler (or the default one) would have logged before "finish".
    assert_eq!(
        timeouts(TimeoutCase::CompletionFirst),
        [
            "op: Ra",
            "status: Completed",
            "drops: 0",
            "finish",
            "dead: Ra",
            "finish 2"
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Nothing is subscribed before activation.

struct Deferred {
    log: Log,
    other: Option<Mbox>,
    pending: Option<time_limited::Definition<Timeout, Self>>,
    cp: Option<CancellationPoint<Self>>,
}

impl Agent for Deferred {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        common(ctx, &self.log, &other, &[], |a: &mut Self, _| {
            assert_eq!(a.cp.as_ref().unwrap().status(), Status::Completed);
            true
        })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, _: &Activate| {
                let me = ctx.direct_mbox();
                let s = ctx.default_state().clone();
                let op = a.pending.take().unwrap();
                a.cp = Some(
                    op.activate(ctx, Duration::from_secs(3600), Timeout(0))
                        .unwrap(),
                );
                assert!(ctx.has_subscription::<Ra>(&me, &s));
                note(&a.log, "activated");
                send(&me, Ra).unwrap();
                send(&me, Finish).unwrap();
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let s = ctx.default_state().clone();
        // A definition dropped without activation leaves nothing behind.
        drop(
            time_unlimited::make(ctx).completed_on(&me, &s, |a: &mut Self, _, _: &Ra| {
                note(&a.log, "dropped op: Ra")
            }),
        );
        self.pending = Some(
            time_limited::make(ctx)
                .completed_on(&me, &s, |a: &mut Self, _, _: &Ra| note(&a.log, "op: Ra"))
                .timeout_handler(&s, |a: &mut Self, _, _: &Timeout| note(&a.log, "timeout")),
        );
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        // Handled before `Activate`: the operation is only defined.
        send(&me, Ra).unwrap();
        send(&me, Activate).unwrap();
    }
}

#[test]
fn nothing_is_subscribed_before_activation() {
    let log = new_log();
    let got = run(
        log.clone(),
        Deferred {
            log,
            other: None,
            pending: None,
            cp: None,
        },
    );
    assert_eq!(got, ["dead: Ra", "activated", "op: Ra", "finish"]);
}

// ---------------------------------------------------------------------------------------
// Cancellation.

struct Cancels {
    log: Log,
    other: Option<Mbox>,
    cp: Option<CancellationPoint<Self>>,
}

impl Agent for Cancels {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        common(ctx, &self.log, &other, &[], |a: &mut Self, ctx| {
            assert_eq!(a.cp.as_ref().unwrap().status(), Status::Cancelled);
            // The cancelled timer delivered nothing to its now empty mbox.
            note(
                &a.log,
                format!("drops: {}", ctx.environment().drop_counts().no_subscribers),
            );
            true
        })
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let other = self.other.clone().unwrap();
        let s = ctx.default_state().clone();
        let cp = time_limited::make(ctx)
            .completed_on(&me, &s, |a: &mut Self, _, _: &Ra| note(&a.log, "op: Ra"))
            .completed_on(&other, &s, |a: &mut Self, _, _: &Rb| note(&a.log, "op: Rb"))
            .timeout_handler(&s, |a: &mut Self, _, _: &Timeout| note(&a.log, "timeout"))
            .default_timeout_handler(|a: &mut Self, _, _: &Timeout| note(&a.log, "default timeout"))
            .activate(ctx, TIMEOUT, Timeout(1))
            .unwrap();
        // Queued before the cancellation: not handled by the operation either.
        send(&me, Ra).unwrap();
        assert!(cp.cancel(ctx));
        assert!(!cp.cancel(ctx), "cancelling twice does nothing");
        assert_eq!(cp.status(), Status::Cancelled);
        assert!(!cp.is_cancellable());
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        assert!(!ctx.has_subscription::<Rb>(&other, &s));
        self.cp = Some(cp);
        send(&other, Rb).unwrap();
        // Well after the cancelled timeout's deadline.
        send_delayed(&me, TIMEOUT + MARGIN, Finish)
            .unwrap()
            .detach();
    }
}

#[test]
fn cancel_unsubscribes_everything_and_cancels_the_timer() {
    let log = new_log();
    let got = run(
        log.clone(),
        Cancels {
            log,
            other: None,
            cp: None,
        },
    );
    assert_eq!(got, ["dead: Ra", "dead: Rb", "drops: 0", "finish"]);
}

// ---------------------------------------------------------------------------------------
// Handlers in several states; mutable completions.

struct States {
    log: Log,
    other: Option<Mbox>,
    s1: State,
    s2: State,
}

impl Agent for States {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        let me = ctx.direct_mbox();
        let (s1, s2) = (self.s1.clone(), self.s2.clone());
        common(
            ctx,
            &self.log,
            &other,
            &[&s2.clone()],
            move |_: &mut Self, ctx| {
                assert!(!ctx.has_subscription::<Ra>(&me, &s1));
                assert!(!ctx.has_subscription::<Ra>(&me, &s2));
                assert!(!ctx.has_subscription::<Mutable<String>>(&me, &s2));
                true
            },
        )?;
        ctx.change_state(&self.s2)?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        time_unlimited::make(ctx)
            .completed_on(&me, &self.s1, |a: &mut Self, _, _: &Ra| {
                note(&a.log, "op in s1: Ra")
            })
            .completed_on(&me, &self.s2, |a: &mut Self, _, _: &Ra| {
                note(&a.log, "op in s2: Ra")
            })
            .completed_on_mutable(&me, &self.s2, |a: &mut Self, _, v: String| {
                note(&a.log, format!("op: {v}"))
            })
            .activate(ctx)
            .unwrap();
        assert!(ctx.has_subscription::<Ra>(&me, &self.s1));
        assert!(ctx.has_subscription::<Ra>(&me, &self.s2));
        assert!(ctx.has_subscription::<Mutable<String>>(&me, &self.s2));
        send_mutable(&me, "first".to_string()).unwrap();
        send(&me, Ra).unwrap();
        send_mutable(&me, "second".to_string()).unwrap();
        send(&me, Finish).unwrap();
    }
}

#[test]
fn handlers_in_several_states_and_mutable_completions() {
    let log = new_log();
    let got = run(
        log.clone(),
        States {
            log,
            other: None,
            s1: State::new("s1"),
            s2: State::new("s2"),
        },
    );
    assert_eq!(got, ["op: first", "dead: Ra", "finish"]);
}

// ---------------------------------------------------------------------------------------
// Activation errors.

struct Errors {
    log: Log,
    other: Option<Mbox>,
    elsewhere: State,
}

impl Agent for Errors {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = ctx.environment().create_mbox();
        self.other = Some(other.clone());
        let me = ctx.direct_mbox();
        let elsewhere = self.elsewhere.clone();
        common(ctx, &self.log, &other, &[&elsewhere], |_: &mut Self, _| {
            true
        })?;
        // The agent's own subscription, which a failed activation must leave alone.
        ctx.subscribe(&other)
            .in_state(&elsewhere)
            .event(|a: &mut Self, _, _: &Rb| note(&a.log, "own: Rb"))?;
        ctx.subscribe_self()
            .event(move |_: &mut Self, ctx, _: &Activate| {
                ctx.change_state(&elsewhere).unwrap();
                send(&me, Ra).unwrap();
                send(&other, Rb).unwrap();
                send(&me, Finish).unwrap();
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        let other = self.other.clone().unwrap();
        let s = ctx.default_state().clone();
        let third = State::new("third");

        // No completion handler (time-unlimited).
        let e = time_unlimited::make(ctx).activate(ctx).unwrap_err();
        assert_eq!(e, ActivateError::NoCompletionHandler);
        note(&self.log, e.to_string());

        // The same (mbox, type, state) twice in one operation: nothing stays subscribed.
        let e = time_unlimited::make(ctx)
            .completed_on(&me, &s, |_: &mut Self, _, _: &Ra| {})
            .completed_on(&other, &s, |_: &mut Self, _, _: &Rb| {})
            .completed_on(&me, &s, |_: &mut Self, _, _: &Ra| {})
            .activate(ctx)
            .unwrap_err();
        assert!(
            matches!(
                e,
                ActivateError::Subscribe(SubscribeError::Duplicate { .. })
            ),
            "{e:?}"
        );
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        assert!(!ctx.has_subscription::<Rb>(&other, &s));
        note(&self.log, "duplicate in the operation");

        // A duplicate of the agent's own subscription (`Rb` from `other` in `elsewhere`):
        // the operation's other handlers are taken back, the agent's own stays.
        let e = time_limited::make(ctx)
            .completed_on(&me, &s, |_: &mut Self, _, _: &Ra| {})
            .timeout_handler(&s, |_: &mut Self, _, _: &Timeout| {})
            .completed_on(&other, &self.elsewhere, |_: &mut Self, _, _: &Rb| {})
            .default_timeout_handler(|a: &mut Self, _, _: &Timeout| note(&a.log, "timeout"))
            .activate(ctx, Duration::ZERO, Timeout(0))
            .unwrap_err();
        assert!(
            matches!(
                e,
                ActivateError::Subscribe(SubscribeError::Duplicate { .. })
            ),
            "{e:?}"
        );
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        assert!(ctx.has_subscription::<Rb>(&other, &self.elsewhere));
        note(&self.log, "duplicate of the agent's own");

        // Two timeout handlers for one state (time-limited): the completions go too, and
        // no timer runs (a zero timeout would otherwise reach the default handler).
        let e = time_limited::make(ctx)
            .completed_on(&me, &s, |_: &mut Self, _, _: &Ra| {})
            .timeout_handler(&third, |_: &mut Self, _, _: &Timeout| {})
            .timeout_handler(&third, |_: &mut Self, _, _: &Timeout| {})
            .default_timeout_handler(|a: &mut Self, _, _: &Timeout| note(&a.log, "timeout"))
            .activate(ctx, Duration::ZERO, Timeout(0))
            .unwrap_err();
        assert!(
            matches!(
                e,
                ActivateError::Subscribe(SubscribeError::Duplicate { .. })
            ),
            "{e:?}"
        );
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        note(&self.log, "duplicate timeout handler");

        // A mutable completion from a multi-consumer mbox.
        let e = time_unlimited::make(ctx)
            .completed_on(&me, &s, |_: &mut Self, _, _: &Ra| {})
            .completed_on_mutable(&other, &s, |_: &mut Self, _, _: String| {})
            .activate(ctx)
            .unwrap_err();
        assert!(
            matches!(
                e,
                ActivateError::Subscribe(SubscribeError::MutableFromMultiConsumer { .. })
            ),
            "{e:?}"
        );
        assert!(!ctx.has_subscription::<Ra>(&me, &s));
        note(&self.log, "mutable from multi-consumer");

        // Then, in `elsewhere`: `Ra` finds no handler, `Rb` the agent's own.
        send(&me, Activate).unwrap();
    }
}

#[test]
fn activation_errors_are_typed_and_leave_nothing_subscribed() {
    let log = new_log();
    let got = run(
        log.clone(),
        Errors {
            log,
            other: None,
            elsewhere: State::new("elsewhere"),
        },
    );
    assert_eq!(
        got,
        [
            "an async operation without a completion handler cannot be activated",
            "duplicate in the operation",
            "duplicate of the agent's own",
            "duplicate timeout handler",
            "mutable from multi-consumer",
            "dead: Ra",
            "own: Rb",
            "finish"
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Another agent's context.

struct Go;

#[derive(Default)]
struct TwinShared {
    definition: Option<time_unlimited::Definition<Twin>>,
    cp: Option<CancellationPoint<Twin>>,
    first: Option<Mbox>,
}

struct Twin {
    log: Log,
    first: bool,
    shared: Arc<Mutex<TwinShared>>,
}

impl Agent for Twin {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if !self.first {
            let go = ctx.environment().named_mbox("async_op-twins");
            ctx.subscribe(&go).event(|a: &mut Self, ctx, _: &Go| {
                let (definition, cp, first) = {
                    let mut sh = a.shared.lock();
                    (
                        sh.definition.take().unwrap(),
                        sh.cp.take().unwrap(),
                        sh.first.take().unwrap(),
                    )
                };
                match definition.activate(ctx).unwrap_err() {
                    ActivateError::WrongAgent {
                        made_by,
                        activated_by,
                    } => {
                        assert_eq!(activated_by, ctx.agent_id());
                        assert_ne!(made_by, activated_by);
                    }
                    e => panic!("{e:?}"),
                }
                note(&a.log, "activated by another agent: WrongAgent");
                let cancelled = catch_unwind(AssertUnwindSafe(|| cp.cancel(ctx)));
                assert!(cancelled.is_err());
                assert_eq!(cp.status(), Status::Activated);
                note(&a.log, "cancel by another agent panics");
                send(&first, Ra).unwrap();
            })?;
        }
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if !self.first {
            return;
        }
        let me = ctx.direct_mbox();
        let s = ctx.default_state().clone();
        let definition =
            time_unlimited::make(ctx)
                .completed_on(&me, &s, |a: &mut Self, _, _: &Rb| note(&a.log, "never"));
        let cp = time_unlimited::make(ctx)
            .completed_on(&me, &s, |a: &mut Self, ctx, _: &Ra| {
                note(&a.log, "op: Ra");
                ctx.deregister_coop(DeregReason::Normal);
            })
            .activate(ctx)
            .unwrap();
        *self.shared.lock() = TwinShared {
            definition: Some(definition),
            cp: Some(cp),
            first: Some(me),
        };
        send(&ctx.environment().named_mbox("async_op-twins"), Go).unwrap();
    }
}

#[test]
fn only_the_agent_that_made_an_operation_activates_or_cancels_it() {
    let log = new_log();
    let shared = Arc::new(Mutex::new(TwinShared::default()));
    let l = log.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                for first in [true, false] {
                    coop.add_agent(Twin {
                        log: l.clone(),
                        first,
                        shared: shared.clone(),
                    });
                }
            })
            .unwrap();
        })
        .unwrap();
    });
    assert_eq!(
        *log.lock(),
        [
            "activated by another agent: WrongAgent",
            "cancel by another agent panics",
            "op: Ra"
        ]
    );
}
