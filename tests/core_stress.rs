//! Stress tests of the core under concurrency: subscription churn beside a steady stream
//! to a direct mbox, coops coming and going while an MPMC mbox is busy, and repeated
//! registrations on `adv_thread_pool`. Each is bounded (a few seconds on a loaded 2-core
//! machine) and asserts exact counts, never speed; every wait has a patience bound that
//! turns a hang into a failure naming what did not happen.

mod common;

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use agentbox::dispatcher::{active_obj, adv_thread_pool, thread_pool};
use agentbox::prelude::*;
use agentbox::{EnvParams, SubscribeError, ThreadSafeContext};
use common::PATIENCE;

// ---------------------------------------------------------------------------------------
// Bounded runs.

/// What a bounded body reports: the last step it reached (with when), and failures.
#[derive(Clone)]
struct Watch {
    tx: mpsc::Sender<Result<(), String>>,
    note: Arc<Mutex<(String, Instant)>>,
}

impl Watch {
    /// Records the step the body has reached; the patience bound restarts from here.
    fn note(&self, s: impl Into<String>) {
        *self.note.lock() = (s.into(), Instant::now());
    }

    /// Waits until `cond` holds; if it does not within [`PATIENCE`], reports a failure with
    /// what `describe` says then, and returns `false`.
    fn wait_until(
        &self,
        mut cond: impl FnMut() -> bool,
        describe: impl FnOnce() -> String,
    ) -> bool {
        let deadline = Instant::now() + PATIENCE;
        while !cond() {
            if Instant::now() >= deadline {
                self.fail(format!("not within {PATIENCE:?}: {}", describe()));
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Fails the test at once with `msg` (the body may stay blocked; it is abandoned).
    fn fail(&self, msg: String) {
        let _ = self.tx.send(Err(msg));
    }
}

/// Runs `body` on its own thread and fails the test if it panics, reports a failure, or
/// makes no progress (no [`Watch::note`]) for [`PATIENCE`]: a hang becomes a failure that
/// names the last step reached, instead of a test that never ends.
fn run_bounded(name: &str, body: impl FnOnce(&Watch) + Send + 'static) {
    // One stress test at a time: on two cores, three at once would mostly measure the
    // scheduler, and the races each one provokes would become rarer.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = mpsc::channel();
    let watch = Watch {
        tx: tx.clone(),
        note: Arc::new(Mutex::new(("starting".into(), Instant::now()))),
    };
    let w = watch.clone();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| body(&w)));
        let _ = tx.send(r.map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into())
        }));
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Ok(())) => return,
            Ok(Err(msg)) => panic!("{name}: {msg} (last step: {})", watch.note.lock().0),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{name}: body vanished"),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let (step, since) = watch.note.lock().clone();
                if since.elapsed() > PATIENCE {
                    panic!("{name}: hung: no progress for {PATIENCE:?} after step `{step}`");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// a. Subscription churn of other types beside a steady stream to a direct mbox.

/// From sender `.0`, number `.1`; four types subscribed throughout (each sender sends
/// them in turn), so that at least one of them sits where the churn moves it about.
struct Kept<const K: usize>(u32, u32);
const KEPT_TYPES: u32 = 4;

fn send_kept(to: &Mbox, sender: u32, n: u32) {
    match n % KEPT_TYPES {
        0 => send(to, Kept::<0>(sender, n)),
        1 => send(to, Kept::<1>(sender, n)),
        2 => send(to, Kept::<2>(sender, n)),
        _ => send(to, Kept::<3>(sender, n)),
    }
    .unwrap();
}

fn sub_kept<const K: usize>(ctx: &mut Context<Churner>) -> Result<(), SubscribeError> {
    ctx.subscribe_self()
        .event(|a: &mut Churner, ctx, k: &Kept<K>| a.kept(ctx, k.0, k.1))
}

/// Tells the churner to report.
struct Stop;
/// Types subscribed and unsubscribed while `Kept` flows.
struct Ty<const N: usize>;

type SubFn = fn(&mut Context<Churner>) -> Result<(), SubscribeError>;
type UnsubFn = fn(&mut Context<Churner>) -> bool;

fn sub_ty<const N: usize>(ctx: &mut Context<Churner>) -> Result<(), SubscribeError> {
    ctx.subscribe_self()
        .event(|_: &mut Churner, _, _: &Ty<N>| {})
}
fn unsub_ty<const N: usize>(ctx: &mut Context<Churner>) -> bool {
    let (me, default) = (ctx.direct_mbox(), ctx.default_state().clone());
    ctx.unsubscribe::<Ty<N>>(&me, &default)
}

macro_rules! ty_ops {
    ($($n:literal),*) => { [$((sub_ty::<$n> as SubFn, unsub_ty::<$n> as UnsubFn)),*] };
}

const CHURN_TYPES: usize = 10;
const TYS: [(SubFn, UnsubFn); CHURN_TYPES] = ty_ops!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9);

const SENDERS: usize = 2;
const PER_SENDER: u32 = 3_000;
/// Rounds, each with a new churner.
const CHURN_ROUNDS: usize = 2;
/// How far a sender may run ahead of the receiver: keeps the queue short, so that sends
/// and subscription changes really happen at the same time.
const AHEAD: u32 = 64;
/// Subscription changes at each `Kept`.
const CHURNS_PER_MSG: usize = 16;
/// `Ty` types subscribed at a time: this or one more. With the four `Kept` and `Stop`, the
/// direct mbox holds 7 or 8 types: the lock-free copy is in use, rewritten at each change.
const CHURN_LOW: usize = 2;

/// What the churner saw when it was told to stop.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// Per sender, how many of its messages arrived.
    received: Vec<u32>,
    /// Messages that did not come right after the previous one of their sender.
    out_of_order: usize,
}

/// Receives the `Kept` types (subscribed throughout) and, at each message, subscribes or
/// unsubscribes `Ty` types `CHURNS_PER_MSG` times: after 15 types at first, its direct
/// mbox keeps 7 or 8, so senders use the lock-free copy while it is rewritten at each
/// change, with the `Kept` types moving about in it. Reports at `Stop`.
struct Churner {
    /// Per sender, the number after the last one handled (read by the senders).
    next: Arc<Vec<AtomicU32>>,
    received: Vec<u32>,
    out_of_order: usize,
    subscribed: [bool; CHURN_TYPES],
    rng: u64,
    stopped: bool,
    report: mpsc::Sender<Seen>,
}

impl Churner {
    fn random(&mut self) -> usize {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % CHURN_TYPES as u64) as usize
    }

    /// Subscribes one unsubscribed `Ty` or unsubscribes one subscribed, in turn.
    fn churn(&mut self, ctx: &mut Context<Self>) {
        let want = self.subscribed.iter().filter(|&&s| s).count() <= CHURN_LOW;
        let mut i = self.random();
        while self.subscribed[i] == want {
            i = (i + 1) % CHURN_TYPES;
        }
        if want {
            (TYS[i].0)(ctx).unwrap();
        } else {
            assert!((TYS[i].1)(ctx), "Ty<{i}> was subscribed");
        }
        self.subscribed[i] = want;
    }

    fn kept(&mut self, ctx: &mut Context<Self>, sender: u32, n: u32) {
        let next = &self.next[sender as usize];
        if n != next.load(Ordering::SeqCst) {
            self.out_of_order += 1;
        }
        next.store(n + 1, Ordering::SeqCst);
        self.received[sender as usize] += 1;
        for _ in 0..CHURNS_PER_MSG {
            self.churn(ctx);
        }
    }
}

impl Agent for Churner {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        // The `Kept` types among the churn types (15 types at first: the tables spill).
        let kept: [SubFn; KEPT_TYPES as usize] =
            [sub_kept::<0>, sub_kept::<1>, sub_kept::<2>, sub_kept::<3>];
        for (i, (sub, _)) in TYS.iter().enumerate() {
            sub(ctx)?;
            if i % 2 == 1 && i / 2 < kept.len() {
                kept[i / 2](ctx)?;
            }
        }
        self.subscribed = [true; CHURN_TYPES];
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Stop| {
            if !a.stopped {
                a.stopped = true;
                let _ = a.report.send(Seen {
                    received: a.received.clone(),
                    out_of_order: a.out_of_order,
                });
                ctx.deregister_coop(DeregReason::Normal);
            }
        })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        while self.subscribed.iter().filter(|&&s| s).count() > CHURN_LOW {
            self.churn(ctx);
        }
    }
}

/// One churner, fed by `SENDERS` threads until each has sent `PER_SENDER`; what it saw.
fn churn_round(env: &Environment, w: &Watch, round: usize) -> Option<Seen> {
    let next: Arc<Vec<AtomicU32>> = Arc::new((0..SENDERS).map(|_| AtomicU32::new(0)).collect());
    let (report_tx, report_rx) = mpsc::channel();
    let target = env
        .introduce_coop(|coop| {
            coop.add_agent(Churner {
                next: next.clone(),
                received: vec![0; SENDERS],
                out_of_order: 0,
                subscribed: [false; CHURN_TYPES],
                rng: 0x9E37_79B9_7F4A_7C15 ^ round as u64,
                stopped: false,
                report: report_tx,
            })
        })
        .unwrap();
    w.note(format!("round {round}: sending"));
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (target, next) = (target.clone(), next.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + PATIENCE;
                for n in 0..PER_SENDER {
                    send_kept(&target, s as u32, n);
                    // A lost message never comes: stop waiting for it at the deadline (the
                    // count then tells).
                    while n >= next[s].load(Ordering::SeqCst) + AHEAD && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    // Every `Kept` that was queued is ahead of the first `Stop` that is queued. (Resent
    // until one arrives: `Stop` goes through the same path as `Kept`.)
    w.note(format!("round {round}: stopping the churner"));
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        send(&target, Stop).unwrap();
        if let Ok(seen) = report_rx.recv_timeout(Duration::from_millis(50)) {
            return Some(seen);
        }
    }
    w.fail(format!(
        "round {round}: the churner did not stop within {PATIENCE:?}"
    ));
    None
}

#[test]
fn a_type_subscribed_throughout_gets_every_message_while_other_types_churn() {
    run_bounded("churn beside a steady stream", |watch| {
        let w = watch.clone();
        let mut seen = Vec::new();
        Environment::launch(|env| {
            // Each round a new agent: its tables lay the types out anew.
            for round in 0..CHURN_ROUNDS {
                match churn_round(env, &w, round) {
                    Some(s) => seen.push(s),
                    None => return,
                }
            }
            w.note("shutting down");
        })
        .unwrap();
        let expected: Vec<Seen> = (0..CHURN_ROUNDS)
            .map(|_| Seen {
                received: vec![PER_SENDER; SENDERS],
                out_of_order: 0,
            })
            .collect();
        assert_eq!(seen, expected, "every Kept arrives, in each sender's order");
    });
}

// ---------------------------------------------------------------------------------------
// b. Coops registered and deregistered while messages flow to an MPMC mbox.

struct Tick(u64);

#[derive(Default)]
struct CoopStats {
    started: AtomicUsize,
    finished: AtomicUsize,
    /// Ticks seen by transient agents out of send order (should stay 0).
    out_of_order: AtomicUsize,
    transient_ticks: AtomicU64,
}

/// Lives for the whole test: must see every tick, in order.
#[derive(Clone, Default)]
struct WitnessCounts {
    /// The number after the last tick seen.
    next: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    out_of_order: Arc<AtomicUsize>,
}

struct Witness {
    news: Mbox,
    counts: WitnessCounts,
}

impl Agent for Witness {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.news.clone())
            .event(|a: &mut Self, _, t: &Tick| {
                let c = &a.counts;
                if t.0 != c.next.load(Ordering::SeqCst) {
                    c.out_of_order.fetch_add(1, Ordering::SeqCst);
                }
                c.received.fetch_add(1, Ordering::SeqCst);
                c.next.store(t.0 + 1, Ordering::SeqCst);
            })?;
        Ok(())
    }
}

/// Subscribes to the ticks of `news` in `define`; leaves its coop after `quit_after` of
/// them, if given.
struct Transient {
    news: Mbox,
    stats: Arc<CoopStats>,
    last: Option<u64>,
    got: u64,
    quit_after: Option<u64>,
}

impl Agent for Transient {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.news.clone())
            .event(|a: &mut Self, ctx, t: &Tick| {
                if a.last.is_some_and(|l| t.0 <= l) {
                    a.stats.out_of_order.fetch_add(1, Ordering::Relaxed);
                }
                a.last = Some(t.0);
                a.got += 1;
                a.stats.transient_ticks.fetch_add(1, Ordering::Relaxed);
                if Some(a.got) == a.quit_after {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
    fn on_start(&mut self, _: &mut Context<Self>) {
        self.stats.started.fetch_add(1, Ordering::SeqCst);
    }
    fn on_finish(&mut self, _: &mut Context<Self>) {
        self.stats.finished.fetch_add(1, Ordering::SeqCst);
    }
}

const ROUNDS: usize = 1500;
const AGENTS_PER_COOP: usize = 3;

#[test]
fn coops_come_and_go_while_an_mpmc_mbox_is_busy_and_every_count_adds_up() {
    run_bounded("coops churning beside an MPMC stream", |watch| {
        let stats = Arc::new(CoopStats::default());
        let witness = WitnessCounts::default();
        let registered = Arc::new(AtomicUsize::new(0));
        let sent_total = Arc::new(AtomicU64::new(0));
        let (st, wc, reg, sent_t) = (
            stats.clone(),
            witness.clone(),
            registered.clone(),
            sent_total.clone(),
        );
        let w = watch.clone();
        Environment::launch_with(EnvParams::new().disable_autoshutdown(), move |env| {
            let news = env.create_mbox();
            let pool = thread_pool::Builder::new().threads(2).build().unwrap();
            let active = active_obj::Builder::new().build().unwrap();
            env.introduce_coop(|coop| {
                coop.add_agent(Witness {
                    news: news.clone(),
                    counts: wc.clone(),
                });
            })
            .unwrap();

            // The stream: one sender thread, kept at most 2048 ticks ahead of the witness.
            let done = Arc::new(AtomicBool::new(false));
            let sender = {
                let (news, done, next) = (news.clone(), done.clone(), wc.next.clone());
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !done.load(Ordering::SeqCst) {
                        send(&news, Tick(i)).unwrap();
                        i += 1;
                        while i > next.load(Ordering::SeqCst) + 2048 && !done.load(Ordering::SeqCst)
                        {
                            std::thread::yield_now();
                        }
                    }
                    i
                })
            };

            let mut live: VecDeque<CoopHandle> = VecDeque::new();
            for round in 0..ROUNDS {
                w.note(format!("registering coop {round}"));
                let mut coop = env.make_coop();
                match round % 3 {
                    0 => {}
                    1 => {
                        coop.set_binder(pool.binder());
                    }
                    _ => {
                        coop.set_binder(active.binder());
                    }
                }
                for k in 0..AGENTS_PER_COOP {
                    coop.add_agent(Transient {
                        news: news.clone(),
                        stats: st.clone(),
                        last: None,
                        got: 0,
                        quit_after: (round % 2 == 0).then_some(2 + k as u64),
                    });
                }
                let handle = env.register_coop(coop).unwrap();
                reg.fetch_add(AGENTS_PER_COOP, Ordering::SeqCst);
                if round % 10 == 5 {
                    // A child that goes with its parent.
                    env.introduce_child_coop(&handle, |coop| {
                        coop.add_agent(Transient {
                            news: news.clone(),
                            stats: st.clone(),
                            last: None,
                            got: 0,
                            quit_after: None,
                        });
                    })
                    .unwrap();
                    reg.fetch_add(1, Ordering::SeqCst);
                }
                live.push_back(handle);
                if live.len() > 4 {
                    live.pop_front()
                        .unwrap()
                        .deregister(DeregReason::User(round as u32));
                }
            }
            for h in live {
                h.deregister(DeregReason::Normal);
            }
            done.store(true, Ordering::SeqCst);
            let sent = sender.join().unwrap();
            sent_t.store(sent, Ordering::SeqCst);
            w.note(format!("waiting for the witness to get {sent} ticks"));
            if !w.wait_until(
                || wc.next.load(Ordering::SeqCst) >= sent,
                || {
                    format!(
                        "the witness got up to tick {} of {sent}",
                        wc.next.load(Ordering::SeqCst)
                    )
                },
            ) {
                return;
            }
            w.note("waiting for every transient coop to be final");
            if !w.wait_until(
                || env.coop_count() == 1,
                || {
                    format!(
                        "{} coops left, expected only the witness's",
                        env.coop_count()
                    )
                },
            ) {
                return;
            }
            w.note("shutting down");
            env.stop();
        })
        .unwrap();
        let sent = sent_total.load(Ordering::SeqCst);
        assert!(sent > 0);
        assert_eq!(witness.received.load(Ordering::SeqCst), sent);
        assert_eq!(witness.next.load(Ordering::SeqCst), sent);
        assert_eq!(witness.out_of_order.load(Ordering::SeqCst), 0);
        let registered = registered.load(Ordering::SeqCst);
        assert_eq!(registered, ROUNDS * AGENTS_PER_COOP + ROUNDS / 10);
        assert_eq!(stats.started.load(Ordering::SeqCst), registered);
        assert_eq!(stats.finished.load(Ordering::SeqCst), registered);
        assert_eq!(stats.out_of_order.load(Ordering::SeqCst), 0);
        assert!(stats.transient_ticks.load(Ordering::SeqCst) <= sent * registered as u64);
    });
}

// ---------------------------------------------------------------------------------------
// c. Repeated registrations on adv_thread_pool.

struct Work;
struct Exclusive;

const ADV_COOPS: usize = 2000;
const ADV_AGENTS: usize = 3;
const ADV_MSGS: usize = 16;
/// Coops in flight at once.
const ADV_WINDOW: usize = 8;

/// Per coop: its agents that started, and that finished.
#[derive(Default)]
struct Progress {
    started: AtomicUsize,
    finished: AtomicUsize,
}

/// A thread-safe agent: `on_start` sends itself `ADV_MSGS` works (handled in parallel) and
/// one exclusive message in the middle; the last agent of its coop to finish its works
/// deregisters the coop.
struct Parallel {
    handled: AtomicUsize,
    coop_done: Arc<AtomicUsize>,
    progress: Arc<Vec<Progress>>,
    coop_no: usize,
}

impl Parallel {
    /// Counts one handled message; true for the last one of the coop's last agent.
    fn one_done(&self) -> bool {
        self.handled.fetch_add(1, Ordering::SeqCst) + 1 == ADV_MSGS + 1
            && self.coop_done.fetch_add(1, Ordering::SeqCst) + 1 == ADV_AGENTS
    }
}

impl Agent for Parallel {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event_thread_safe(|a: &Self, ctx: &ThreadSafeContext, _: &Work| {
                if a.one_done() {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, _: &Exclusive| {
                if a.one_done() {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        self.progress[self.coop_no]
            .started
            .fetch_add(1, Ordering::SeqCst);
        let me = ctx.direct_mbox();
        for i in 0..ADV_MSGS {
            if i == ADV_MSGS / 2 {
                send(&me, Exclusive).unwrap();
            }
            send(&me, Work).unwrap();
        }
    }
    fn on_finish(&mut self, _: &mut Context<Self>) {
        self.progress[self.coop_no]
            .finished
            .fetch_add(1, Ordering::SeqCst);
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Ignore
    }
}

/// `coop 7: 2 of 3 agents started, 0 finished` for each coop below `upto` not finished.
fn unfinished(progress: &[Progress], upto: usize) -> Vec<String> {
    progress[..upto]
        .iter()
        .enumerate()
        .filter(|(_, p)| p.finished.load(Ordering::SeqCst) < ADV_AGENTS)
        .map(|(i, p)| {
            format!(
                "coop {i}: {} of {ADV_AGENTS} agents started, {} finished",
                p.started.load(Ordering::SeqCst),
                p.finished.load(Ordering::SeqCst)
            )
        })
        .collect()
}

#[test]
fn adv_thread_pool_registrations_under_load_each_start_and_finish_and_the_environment_stops() {
    run_bounded("adv_thread_pool registrations", |watch| {
        let progress: Arc<Vec<Progress>> =
            Arc::new((0..ADV_COOPS).map(|_| Progress::default()).collect());
        let p = progress.clone();
        let w = watch.clone();
        let mut reached_stop = false;
        Environment::launch(|env| {
            let pool = adv_thread_pool::Builder::new().threads(4).build().unwrap();
            for n in 0..ADV_COOPS {
                if n >= ADV_WINDOW {
                    let oldest = n - ADV_WINDOW;
                    w.note(format!("waiting for coop {oldest} before registering {n}"));
                    if !w.wait_until(
                        || p[oldest].finished.load(Ordering::SeqCst) == ADV_AGENTS,
                        || format!("{:?}", unfinished(&p, oldest + 1)),
                    ) {
                        return;
                    }
                }
                w.note(format!("registering coop {n}"));
                let coop_done = Arc::new(AtomicUsize::new(0));
                env.introduce_coop(|coop| {
                    coop.set_binder(pool.binder());
                    for _ in 0..ADV_AGENTS {
                        coop.add_thread_safe_agent(Parallel {
                            handled: AtomicUsize::new(0),
                            coop_done: coop_done.clone(),
                            progress: p.clone(),
                            coop_no: n,
                        });
                    }
                })
                .unwrap();
            }
            w.note("waiting for the last coops");
            if !w.wait_until(
                || unfinished(&p, ADV_COOPS).is_empty(),
                || format!("{:?}", unfinished(&p, ADV_COOPS)),
            ) {
                return;
            }
            reached_stop = true;
            w.note("stopping the environment");
            env.stop();
        })
        .unwrap();
        assert!(reached_stop);
        assert!(unfinished(&progress, ADV_COOPS).is_empty());
        let started: usize = progress
            .iter()
            .map(|p| p.started.load(Ordering::SeqCst))
            .sum();
        assert_eq!(started, ADV_COOPS * ADV_AGENTS);
    });
}
