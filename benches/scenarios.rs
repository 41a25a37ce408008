//! Benchmark scenarios shared by `examples/bench.rs` and the criterion benches. Each runs
//! one environment, verifies its own counts, and returns the elapsed time.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::prelude::*;

/// Ping or pong carrying a payload of `N` bytes.
struct Ball<const N: usize>([u8; N]);
struct Hello(Mbox);

struct Pinger<const N: usize> {
    out: Mbox,
    limits: bool,
    rounds: u64,
    done: u64,
    started: Arc<parking_lot::Mutex<Option<Instant>>>,
}

struct Ponger<const N: usize> {
    limits: bool,
    back: Option<Mbox>,
    count: Arc<AtomicU64>,
}

impl<const N: usize> Agent for Pinger<N> {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if self.limits {
            ctx.limit_then_drop::<Ball<N>>(1000)?;
        }
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, b: &Ball<N>| {
                a.done += 1;
                if a.done < a.rounds {
                    send(&a.out, Ball(b.0)).unwrap();
                } else {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        send(&self.out, Hello(ctx.direct_mbox())).unwrap();
        *self.started.lock() = Some(Instant::now());
        send(&self.out, Ball([0u8; N])).unwrap();
    }
}

impl<const N: usize> Agent for Ponger<N> {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if self.limits {
            ctx.limit_then_drop::<Ball<N>>(1000)?;
            ctx.limit_then_drop::<Hello>(1)?;
        }
        ctx.subscribe_self()
            .event(|a: &mut Self, _, h: &Hello| a.back = Some(h.0.clone()))?;
        ctx.subscribe_self().event(|a: &mut Self, _, b: &Ball<N>| {
            a.count.fetch_add(1, Ordering::Relaxed);
            send(a.back.as_ref().unwrap(), Ball(b.0)).unwrap();
        })?;
        Ok(())
    }
}

/// Two agents on the default one_thread dispatcher, direct mboxes; `rounds` round trips.
/// Returns the time for `2 * rounds` messages.
pub fn ping_pong_direct<const N: usize>(rounds: u64) -> Duration {
    ping_pong_on::<N>(rounds, false, false)
}

/// [`ping_pong_direct`] with message limits declared by both agents (never reached).
pub fn ping_pong_limits(rounds: u64) -> Duration {
    ping_pong_on::<8>(rounds, false, true)
}

/// Ping-pong between two agents on `active_obj`: every message crosses threads.
pub fn ping_pong_cross_thread(rounds: u64) -> Duration {
    ping_pong_on::<8>(rounds, true, false)
}

fn ping_pong_on<const N: usize>(rounds: u64, cross_thread: bool, limits: bool) -> Duration {
    let started = Arc::new(parking_lot::Mutex::new(None));
    let count = Arc::new(AtomicU64::new(0));
    let (s, c) = (started.clone(), count.clone());
    Environment::launch(move |env| {
        env.introduce_coop(|coop| {
            if cross_thread {
                let disp = agentbox::dispatcher::active_obj::Builder::new()
                    .build()
                    .unwrap();
                coop.set_binder(disp.binder());
            }
            let ponger = coop.add_agent(Ponger::<N> {
                limits,
                back: None,
                count: c,
            });
            coop.add_agent(Pinger::<N> {
                out: ponger,
                limits,
                rounds,
                done: 0,
                started: s,
            });
        })
        .unwrap();
    })
    .unwrap();
    let elapsed = started.lock().expect("started").elapsed();
    assert_eq!(count.load(Ordering::Relaxed), rounds, "ping-pong count");
    elapsed
}

struct MpmcSide {
    listen: Mbox,
    out: Mbox,
    rounds: u64,
    seen: u64,
    first: bool,
    started: Arc<parking_lot::Mutex<Option<Instant>>>,
}

impl Agent for MpmcSide {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let listen = self.listen.clone();
        ctx.subscribe(&listen).event(|a: &mut Self, ctx, n: &u64| {
            a.seen += 1;
            if *n + 1 < 2 * a.rounds {
                send(&a.out, n + 1).unwrap();
            } else {
                ctx.deregister_coop(DeregReason::Normal);
            }
        })?;
        Ok(())
    }
    fn on_start(&mut self, _ctx: &mut Context<Self>) {
        if self.first {
            *self.started.lock() = Some(Instant::now());
            send(&self.out, 0u64).unwrap();
        }
    }
}

/// Ping-pong over two MPMC mboxes; returns the time for `2 * rounds` messages.
pub fn ping_pong_mpmc(rounds: u64) -> Duration {
    let started = Arc::new(parking_lot::Mutex::new(None));
    let s = started.clone();
    Environment::launch(move |env| {
        let (a, b) = (env.create_mbox(), env.create_mbox());
        env.introduce_coop(|coop| {
            coop.add_agent(MpmcSide {
                listen: a.clone(),
                out: b.clone(),
                rounds,
                seen: 0,
                first: true,
                started: s.clone(),
            });
            coop.add_agent(MpmcSide {
                listen: b,
                out: a,
                rounds,
                seen: 0,
                first: false,
                started: s,
            });
        })
        .unwrap();
    })
    .unwrap();
    let elapsed = started.lock().expect("started").elapsed();
    elapsed
}

struct Item(u64);
struct Ack;

struct Broadcaster {
    news: Mbox,
    receivers: u64,
    batches: u64,
    batch: u64,
    acks: u64,
    sent_batches: u64,
    started: Arc<parking_lot::Mutex<Option<Instant>>>,
}

impl Broadcaster {
    fn send_batch(&mut self) {
        for i in 0..self.batch {
            send(&self.news, Item(i)).unwrap();
        }
        self.sent_batches += 1;
    }
}

impl Agent for Broadcaster {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Ack| {
            a.acks += 1;
            if a.acks.is_multiple_of(a.receivers) {
                if a.sent_batches < a.batches {
                    a.send_batch();
                } else {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            }
        })?;
        Ok(())
    }
    fn on_start(&mut self, _ctx: &mut Context<Self>) {
        *self.started.lock() = Some(Instant::now());
        self.send_batch();
    }
}

struct Subscriber {
    news: Mbox,
    ack: Mbox,
    batch: u64,
    got: Arc<AtomicU64>,
}

impl Agent for Subscriber {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let news = self.news.clone();
        ctx.subscribe(&news).event(|a: &mut Self, _, item: &Item| {
            a.got.fetch_add(1, Ordering::Relaxed);
            if item.0 + 1 == a.batch {
                send(&a.ack, Ack).unwrap();
            }
        })?;
        Ok(())
    }
}

/// One MPMC mbox, `receivers` subscribers; `batches` batches of 1000 sends, each acked by
/// every subscriber. Returns (time, deliveries).
pub fn fanout(receivers: u64, batches: u64) -> (Duration, u64) {
    let batch = 1000;
    let started = Arc::new(parking_lot::Mutex::new(None));
    let got = Arc::new(AtomicU64::new(0));
    let (s, g) = (started.clone(), got.clone());
    Environment::launch(move |env| {
        let news = env.create_mbox();
        env.introduce_coop(|coop| {
            let ack = coop.add_agent(Broadcaster {
                news: news.clone(),
                receivers,
                batches,
                batch,
                acks: 0,
                sent_batches: 0,
                started: s,
            });
            for _ in 0..receivers {
                coop.add_agent(Subscriber {
                    news: news.clone(),
                    ack: ack.clone(),
                    batch,
                    got: g.clone(),
                });
            }
        })
        .unwrap();
    })
    .unwrap();
    let elapsed = started.lock().expect("started").elapsed();
    let deliveries = got.load(Ordering::Relaxed);
    assert_eq!(
        deliveries,
        receivers * batches * batch,
        "fan-out deliveries"
    );
    (elapsed, deliveries)
}

struct Token(u64);
struct Next(Mbox);

struct RingNode {
    next: Option<Mbox>,
    hops: Arc<AtomicU64>,
}

impl Agent for RingNode {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, n: &Next| a.next = Some(n.0.clone()))?;
        ctx.subscribe_self().event(|a: &mut Self, ctx, t: &Token| {
            a.hops.fetch_add(1, Ordering::Relaxed);
            if t.0 == 0 {
                ctx.deregister_coop(DeregReason::Normal);
            } else {
                send(a.next.as_ref().unwrap(), Token(t.0 - 1)).unwrap();
            }
        })?;
        Ok(())
    }
}

/// A token passed `hops` times around a ring of `nodes` agents. Returns (time, hops).
pub fn ring(nodes: usize, hops: u64) -> (Duration, u64) {
    ring_on(nodes, hops, false)
}

/// [`ring`] with the agents on a 2-thread `thread_pool` (individual FIFO).
pub fn ring_thread_pool(nodes: usize, hops: u64) -> (Duration, u64) {
    ring_on(nodes, hops, true)
}

fn ring_on(nodes: usize, hops: u64, pool: bool) -> (Duration, u64) {
    let counted = Arc::new(AtomicU64::new(0));
    let c = counted.clone();
    let mut elapsed = Duration::ZERO;
    let e = &mut elapsed;
    Environment::launch(move |env| {
        let mboxes = env
            .introduce_coop(|coop| {
                if pool {
                    let disp = agentbox::dispatcher::thread_pool::Builder::new()
                        .threads(2)
                        .build()
                        .unwrap();
                    coop.set_binder(
                        disp.binder_with(
                            agentbox::BindParams::new().fifo(agentbox::Fifo::Individual),
                        ),
                    );
                }
                (0..nodes)
                    .map(|_| {
                        coop.add_agent(RingNode {
                            next: None,
                            hops: c.clone(),
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap();
        for (i, m) in mboxes.iter().enumerate() {
            send(m, Next(mboxes[(i + 1) % nodes].clone())).unwrap();
        }
        let start = Instant::now();
        send(&mboxes[0], Token(hops - 1)).unwrap();
        // Wait here (off the worker) for the token's last hop.
        while c.load(Ordering::Relaxed) < hops {
            std::thread::yield_now();
        }
        *e = start.elapsed();
    })
    .unwrap();
    let h = counted.load(Ordering::Relaxed);
    assert_eq!(h, hops, "ring hops");
    (elapsed, h)
}

struct Member {
    first: bool,
    finished: Arc<AtomicU64>,
}

impl Agent for Member {
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if self.first {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }
}

/// Registers `coops` coops of 10 agents each; every coop deregisters itself at start.
/// Returns the time until the last one is gone.
pub fn coop_reg(coops: u64) -> Duration {
    let finished = Arc::new(AtomicU64::new(0));
    let f = finished.clone();
    let start = Instant::now();
    Environment::launch(move |env| {
        for _ in 0..coops {
            env.introduce_coop(|coop| {
                for i in 0..10 {
                    coop.add_agent(Member {
                        first: i == 0,
                        finished: f.clone(),
                    });
                }
            })
            .unwrap();
        }
    })
    .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(
        finished.load(Ordering::Relaxed),
        coops * 10,
        "coop members finished"
    );
    elapsed
}

struct Burst {
    count: u32,
    left: u32,
    total: Arc<AtomicU64>,
    /// Agents of this coop still busy; the last one deregisters the coop.
    coop_busy: Arc<AtomicU64>,
}

impl Agent for Burst {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &u32| {
            a.total.fetch_add(1, Ordering::Relaxed);
            a.left -= 1;
            if a.left == 0 && a.coop_busy.fetch_sub(1, Ordering::AcqRel) == 1 {
                ctx.deregister_coop(DeregReason::Normal);
            }
        })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        for i in 0..self.count {
            send(&me, i).unwrap();
        }
    }
}

/// `coops` coops of `agents` agents on a 2-thread pool (cooperation FIFO); each agent
/// sends itself `messages` messages. Returns (time, messages handled).
pub fn thread_pool_many_agents(coops: u64, agents: u64, messages: u32) -> (Duration, u64) {
    let total = Arc::new(AtomicU64::new(0));
    let t = total.clone();
    let start = Instant::now();
    Environment::launch(move |env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .threads(2)
            .build()
            .unwrap();
        for _ in 0..coops {
            env.introduce_coop(|coop| {
                coop.set_binder(pool.binder());
                let busy = Arc::new(AtomicU64::new(agents));
                for _ in 0..agents {
                    coop.add_agent(Burst {
                        count: messages,
                        left: messages,
                        total: t.clone(),
                        coop_busy: busy.clone(),
                    });
                }
            })
            .unwrap();
        }
    })
    .unwrap();
    let elapsed = start.elapsed();
    let handled = total.load(Ordering::Relaxed);
    assert_eq!(
        handled,
        coops * agents * u64::from(messages),
        "many-agents count"
    );
    (elapsed, handled)
}

struct Sum(u64);

struct SkyNode {
    level: u32,
    ordinal: u64,
    parent: Option<Mbox>,
    sum: u64,
    received: u32,
    binder: agentbox::Binder,
    result: Arc<parking_lot::Mutex<Option<(u64, Instant)>>>,
}

impl Agent for SkyNode {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, ctx, s: &Sum| {
            a.sum += s.0;
            a.received += 1;
            if a.received == 10 {
                match &a.parent {
                    Some(p) => send(p, Sum(a.sum)).unwrap(),
                    None => {
                        *a.result.lock() = Some((a.sum, Instant::now()));
                        ctx.deregister_coop(DeregReason::Normal);
                    }
                }
            }
        })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if self.level == 0 {
            send(self.parent.as_ref().unwrap(), Sum(self.ordinal)).unwrap();
            return;
        }
        let me = ctx.direct_mbox();
        let parent = ctx.coop().unwrap();
        let mut coop = ctx.environment().make_child_coop(&parent);
        coop.set_binder(self.binder.clone());
        for i in 0..10 {
            coop.add_agent(SkyNode {
                level: self.level - 1,
                ordinal: self.ordinal * 10 + i,
                parent: Some(me.clone()),
                sum: 0,
                received: 0,
                binder: self.binder.clone(),
                result: self.result.clone(),
            });
        }
        ctx.environment().register_coop(coop).unwrap();
    }
}

/// Skynet: a 10-ary tree of `levels` levels below the root, one child coop per inner node,
/// on a 2-thread pool; every leaf reports its ordinal, inner nodes add up. Returns (time
/// to the root's sum, the sum, time including the teardown of every agent).
pub fn skynet(levels: u32) -> (Duration, u64, Duration) {
    let result = Arc::new(parking_lot::Mutex::new(None));
    let r = result.clone();
    let start = Instant::now();
    Environment::launch(move |env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .threads(2)
            .build()
            .unwrap();
        env.introduce_coop(|coop| {
            coop.set_binder(pool.binder());
            coop.add_agent(SkyNode {
                level: levels,
                ordinal: 0,
                parent: None,
                sum: 0,
                received: 0,
                binder: pool.binder(),
                result: r,
            });
        })
        .unwrap();
    })
    .unwrap();
    let total = start.elapsed();
    let (sum, at) = result.lock().expect("the root got its sum");
    (at - start, sum, total)
}

/// Schedules `n` far-off timers and cancels each at once (dropping its handle); returns the
/// time for the `n` pairs.
pub fn timer_schedule_cancel(n: u64) -> Duration {
    let mut elapsed = Duration::ZERO;
    Environment::launch(|env| {
        let mbox = env.create_mbox();
        let start = Instant::now();
        for i in 0..n {
            let h = agentbox::send_delayed(&mbox, Duration::from_secs(3600), i).unwrap();
            drop(h);
        }
        elapsed = start.elapsed();
        assert_eq!(env.pending_timers(), 0, "every timer cancelled");
    })
    .unwrap();
    elapsed
}

/// Two threads bouncing a counter over two mchains; returns the time for `2 * rounds`
/// messages.
pub fn mchain_ping_pong(rounds: u64) -> Duration {
    use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams};
    let mut elapsed = Duration::ZERO;
    Environment::launch(|env| {
        let ping = env.create_mchain(MChainParams::unbounded());
        let pong = env.create_mchain(MChainParams::unbounded());
        let (ping2, pong2) = (ping.clone(), pong.clone());
        let start = Instant::now();
        let other = std::thread::spawn(move || {
            let mut seen = 0u64;
            receive(
                &ping2,
                ReceiveParams::new().handle_n(rounds as usize),
                &mut Handlers::new().on(|n: &u64| {
                    seen += 1;
                    pong2.send(*n).unwrap();
                }),
            );
            seen
        });
        ping.send(0u64).unwrap();
        let mut last = 0;
        receive(
            &pong,
            ReceiveParams::new().handle_n(rounds as usize),
            &mut Handlers::new().on(|n: &u64| {
                last = *n;
                if n + 1 < rounds {
                    ping.send(n + 1).unwrap();
                }
            }),
        );
        elapsed = start.elapsed();
        assert_eq!(other.join().unwrap(), rounds, "mchain ping count");
        assert_eq!(last, rounds - 1, "mchain pong count");
    })
    .unwrap();
    elapsed
}

/// An 8-byte message.
struct Small(u64);
/// Makes the receiver wait until the sender has queued everything.
struct Hold;

struct Backlog {
    blocked: std::sync::mpsc::Sender<()>,
    release: std::sync::mpsc::Receiver<()>,
    n: u64,
    got: u64,
    sum: Arc<AtomicU64>,
}

impl Agent for Backlog {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, _: &Hold| {
            let _ = a.blocked.send(());
            let _ = a.release.recv();
        })?;
        ctx.subscribe_self().event(|a: &mut Self, ctx, m: &Small| {
            a.got += 1;
            a.sum.fetch_add(m.0, Ordering::Relaxed);
            if a.got == a.n {
                ctx.deregister_coop(DeregReason::Normal);
            }
        })?;
        Ok(())
    }
}

/// The process's resident set, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The process's peak resident set so far, in bytes (Linux; 0 elsewhere).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Queues `n` 8-byte messages to one agent on the default dispatcher while it waits in a
/// handler, and returns the growth of the resident set per queued message (bytes), and
/// the growth of the peak resident set per message once the agent has handled them all
/// (the backlog's cost while the worker drains it; the sum is checked).
pub fn queued_bytes_per_msg(n: u64) -> (f64, f64) {
    let sum = Arc::new(AtomicU64::new(0));
    let s = sum.clone();
    let mut per_msg = 0.0;
    let out = &mut per_msg;
    let before = Arc::new(AtomicU64::new(0));
    let before_in = before.clone();
    Environment::launch(move |env| {
        let (blocked_tx, blocked_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let mbox = env
            .introduce_coop(|coop| {
                coop.add_agent(Backlog {
                    blocked: blocked_tx,
                    release: release_rx,
                    n,
                    got: 0,
                    sum: s,
                })
            })
            .unwrap();
        send(&mbox, Hold).unwrap();
        blocked_rx.recv().unwrap();
        let before = rss_bytes();
        before_in.store(before, Ordering::Relaxed);
        for i in 0..n {
            send(&mbox, Small(i)).unwrap();
        }
        let after = rss_bytes();
        *out = after.saturating_sub(before) as f64 / n as f64;
        release_tx.send(()).unwrap();
    })
    .unwrap();
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2, "backlog sum");
    let peak = peak_rss_bytes().saturating_sub(before.load(Ordering::Relaxed));
    (per_msg, peak as f64 / n as f64)
}

/// Counts lifecycle hooks; the one that reaches the target tells the driver.
struct Countdown {
    target: u64,
    counted: AtomicU64,
    driver: Mbox,
    milestone: Milestone,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Milestone {
    AllStarted,
    AllStopped,
}

impl Countdown {
    fn count_down(&self) {
        if self.counted.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            send(&self.driver, self.milestone).unwrap();
        }
    }
}

/// One agent in a coop of its own, as in peerbench's spawn workload.
struct Lifecycle {
    started: Arc<Countdown>,
    stopped: Arc<Countdown>,
}

impl Agent for Lifecycle {
    fn on_start(&mut self, _: &mut Context<Self>) {
        self.started.count_down();
    }
    fn on_finish(&mut self, _: &mut Context<Self>) {
        self.stopped.count_down();
    }
}

struct SpawnGo;

/// Spawns `actors` one-agent coops from an agent on the default dispatcher, then (once
/// every `on_start` ran) deregisters them all, as peerbench's `spawn_stop` does.
struct SpawnDriver {
    actors: u64,
    coops: Vec<CoopHandle>,
    start: Option<Instant>,
    out: Arc<parking_lot::Mutex<(Duration, Duration)>>,
}

impl Agent for SpawnDriver {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, _: &SpawnGo| {
                let countdown = |milestone| {
                    Arc::new(Countdown {
                        target: a.actors,
                        counted: AtomicU64::new(0),
                        driver: ctx.direct_mbox(),
                        milestone,
                    })
                };
                let (started, stopped) = (
                    countdown(Milestone::AllStarted),
                    countdown(Milestone::AllStopped),
                );
                a.coops.reserve(a.actors as usize);
                let env = ctx.environment();
                let binder = env.default_binder();
                a.start = Some(Instant::now());
                for _ in 0..a.actors {
                    let mut coop = env.make_coop();
                    coop.set_binder(binder.clone());
                    coop.add_agent(Lifecycle {
                        started: started.clone(),
                        stopped: stopped.clone(),
                    });
                    a.coops.push(env.register_coop(coop).unwrap());
                }
            })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, &m: &Milestone| match m {
                Milestone::AllStarted => {
                    a.out.lock().0 = a.start.unwrap().elapsed();
                    a.start = Some(Instant::now());
                    for coop in &a.coops {
                        coop.deregister(DeregReason::Normal);
                    }
                }
                Milestone::AllStopped => {
                    a.out.lock().1 = a.start.unwrap().elapsed();
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
}

/// Peerbench's spawn workload: `actors` agents, each in a coop of its own, spawned until
/// every `on_start` ran, then stopped until every `on_finish` ran. Returns both times.
pub fn spawn_stop(actors: u64) -> (Duration, Duration) {
    let out = Arc::new(parking_lot::Mutex::new((Duration::ZERO, Duration::ZERO)));
    let o = out.clone();
    Environment::launch(move |env| {
        let driver = env
            .introduce_coop(|coop| {
                coop.add_agent(SpawnDriver {
                    actors,
                    coops: Vec::new(),
                    start: None,
                    out: o,
                })
            })
            .unwrap();
        send(&driver, SpawnGo).unwrap();
    })
    .unwrap();
    let t = *out.lock();
    assert!(t.1 > Duration::ZERO, "every agent stopped");
    t
}
