//! The benchmark figures, one `RESULT name=… value=… unit=…` line each.
//!
//! `cargo run --release --example bench [-- --quick]` (quick: well under 20 s in all).
//! Every scenario verifies its own counts. Compare figures as ratios within one run: the
//! machine may be shared and noisy.

#[path = "../benches/scenarios.rs"]
mod scenarios;

#[path = "bench_harmonizer/mod.rs"]
mod harmonizer;

#[cfg(feature = "interconnect")]
#[path = "bench_ic/mod.rs"]
mod ic;

#[cfg(feature = "interconnect")]
#[path = "bench_cluster/mod.rs"]
mod cluster;

use std::time::Duration;

/// A ping-pong scenario: runs `rounds` round trips, returns the time they took.
type PingPong = fn(u64) -> Duration;

/// Prints one rate figure: `count` things done in `time`.
fn rate(name: &str, count: u64, time: Duration, unit: &str) {
    println!(
        "RESULT name={name} value={:.0} unit={unit}",
        count as f64 / time.as_secs_f64()
    );
}

/// `rounds` round trips of an 8-byte payload between two plain threads over two crossbeam
/// channels: what a hand-written program pays, for comparison with the agents' figure.
fn raw_threads_cross_thread(rounds: u64) -> Duration {
    let (ping_tx, ping_rx) = crossbeam_channel::unbounded::<[u8; 8]>();
    let (pong_tx, pong_rx) = crossbeam_channel::unbounded::<[u8; 8]>();
    let ponger = std::thread::spawn(move || {
        let mut count = 0u64;
        while let Ok(b) = ping_rx.recv() {
            count += 1;
            if pong_tx.send(b).is_err() {
                break;
            }
        }
        count
    });
    let started = std::time::Instant::now();
    ping_tx.send([0u8; 8]).expect("the ponger is alive");
    for done in 1..=rounds {
        let b = pong_rx.recv().expect("the ponger is alive");
        if done < rounds {
            ping_tx.send(b).expect("the ponger is alive");
        }
    }
    let elapsed = started.elapsed();
    drop(ping_tx);
    assert_eq!(
        ponger.join().expect("the ponger"),
        rounds,
        "raw ping-pong count"
    );
    elapsed
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only NAME` runs one figure (for profiling).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let scale = if quick { 1 } else { 5 };

    // Ping-pong figures: `rounds` round trips are `2 * rounds` messages.
    let ping_pongs: [(&str, u64, PingPong); 5] = [
        (
            "ping_pong_one_thread",
            2_000_000,
            scenarios::ping_pong_direct::<8>,
        ),
        ("ping_pong_limits", 2_000_000, scenarios::ping_pong_limits),
        ("ping_pong_mpmc", 1_000_000, scenarios::ping_pong_mpmc),
        (
            "ping_pong_cross_thread",
            200_000,
            scenarios::ping_pong_cross_thread,
        ),
        ("mchain_ping_pong", 200_000, scenarios::mchain_ping_pong),
    ];
    for (name, rounds, scenario) in ping_pongs {
        if run(name) {
            let rounds = rounds * scale;
            rate(name, 2 * rounds, scenario(rounds), "msg/s");
        }
    }
    if run("raw_threads_cross_thread") {
        // The baseline for `ping_pong_cross_thread`: the same round trips of an 8-byte
        // payload between two plain threads over two crossbeam channels.
        let rounds = 200_000 * scale;
        rate(
            "raw_threads_cross_thread",
            2 * rounds,
            raw_threads_cross_thread(rounds),
            "msg/s",
        );
    }
    if run("fanout_16") {
        let (t, deliveries) = scenarios::fanout(16, 1000 * scale);
        rate("fanout_16", deliveries, t, "deliveries/s");
    }
    if run("ring_50k") {
        let (t, hops) = scenarios::ring(50_000, 2_000_000 * scale);
        rate("ring_50k", hops, t, "hops/s");
    }
    if run("ring_50k_thread_pool") {
        let (t, hops) = scenarios::ring_thread_pool(50_000, 500_000 * scale);
        rate("ring_50k_thread_pool", hops, t, "hops/s");
    }
    if run("thread_pool_many_agents") {
        let (t, handled) = scenarios::thread_pool_many_agents(1024, 64, 100);
        rate("thread_pool_many_agents", handled, t, "msg/s");
    }
    if only.as_deref() == Some("skynet_100k") {
        // For profiling only (`--only skynet_100k`): one level less.
        let (t, sum, _) = scenarios::skynet(5);
        assert_eq!(sum, 4_999_950_000, "skynet sum");
        println!(
            "RESULT name=skynet_100k value={:.3} unit=s",
            t.as_secs_f64()
        );
    }
    if run("skynet_1m") {
        let (t, sum, _with_teardown) = scenarios::skynet(6);
        assert_eq!(sum, 499_999_500_000, "skynet sum");
        println!("RESULT name=skynet_1m value={:.3} unit=s", t.as_secs_f64());
    }
    if matches!(
        only.as_deref(),
        Some("queued_bytes_per_msg" | "queued_peak_bytes_per_msg")
    ) {
        // Resident-set growth per queued 8-byte message, 1 M queued (not scaled); and the
        // peak's growth per message once they are all handled (the drain's cost).
        let (bytes, peak) = scenarios::queued_bytes_per_msg(1_000_000);
        println!("RESULT name=queued_bytes_per_msg value={bytes:.1} unit=B");
        println!("RESULT name=queued_peak_bytes_per_msg value={peak:.1} unit=B");
    } else if only.is_none() {
        // In a fresh process: memory the other scenarios freed would be reused unseen.
        let exe = std::env::current_exe().expect("the bench's own path");
        let out = std::process::Command::new(exe)
            .args(["--only", "queued_bytes_per_msg"])
            .output()
            .expect("the queued_bytes_per_msg process");
        assert!(out.status.success(), "queued_bytes_per_msg failed");
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    if run("timer_schedule_cancel") {
        let n = 1_000_000 * scale;
        rate(
            "timer_schedule_cancel",
            n,
            scenarios::timer_schedule_cancel(n),
            "timers/s",
        );
    }
    if run("coop_reg") {
        let coops = 20_000 * scale;
        rate("coop_reg", coops, scenarios::coop_reg(coops), "coops/s");
    }
    if run("spawn_stop") {
        // Peerbench's spawn workload: one-agent coops spawned, then stopped (ns per agent).
        // `SPAWN_N` overrides the count (callgrind: the difference of two counts).
        let n = std::env::var("SPAWN_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000 * scale);
        let (spawn, stop) = scenarios::spawn_stop(n);
        for (name, t) in [("spawn", spawn), ("stop", stop)] {
            println!(
                "RESULT name={name} value={:.1} unit=ns",
                t.as_nanos() as f64 / n as f64
            );
        }
    }
    if run("ydb_ping_pong_one_thread") {
        let rounds = 2_000_000 * scale;
        let t = ydb::ping_pong_one_thread(rounds);
        rate("ydb_ping_pong_one_thread", 2 * rounds, t, "msg/s");
    }
    if run("ydb_send_by_id") {
        let n = 1_000_000 * scale;
        let t = ydb::send_by_id(n);
        println!(
            "RESULT name=ydb_send_by_id value={:.1} unit=ns",
            t.as_nanos() as f64 / n as f64
        );
    }
    if run("ydb_register") {
        let n = 100_000 * scale;
        rate("ydb_register", n, ydb::register(n), "actors/s");
    }
    // The interconnect over loopback: 64-byte events (at most 64 Ki unacknowledged,
    // acknowledged every 8 Ki), 1 MiB events (at most 16 unacknowledged), and the same
    // framing over a plain socket pair.
    #[cfg(feature = "interconnect")]
    interconnect(&run, scale);
    // YDB's harmonizer: interactive beside batch, fixed / harmonized / shared threads.
    if run("harmonizer") {
        harmonizer::report(quick);
    }
}

/// The interconnect's figures.
#[cfg(feature = "interconnect")]
fn interconnect(run: &dyn Fn(&str) -> bool, scale: u64) {
    if run("ic_small_events") {
        let n = 400_000 * scale;
        rate(
            "ic_small_events",
            n,
            ic::stream(n, 64, 65_536, 8_192),
            "events/s",
        );
    }
    if run("ic_large_events") {
        let n = 200 * scale;
        let t = ic::stream(n, 1 << 20, 16, 4);
        rate("ic_large_events", n * (1 << 20) / 1_000_000, t, "MB/s");
    }
    if run("raw_tcp_framed") {
        let n = 2_000_000 * scale;
        rate("raw_tcp_framed", n, ic::raw_tcp_framed(n, 64), "events/s");
    }
    if run("ic_ping_pong_rtt") {
        let rtt = ic::rtt::ping_pong_rtt(4_000 * scale);
        println!(
            "RESULT name=ic_ping_pong_rtt value={:.1} unit=us",
            rtt.as_nanos() as f64 / 1000.0
        );
    }
    // The floor of the line above on this machine: two threads, one socket pair.
    if run("raw_tcp_ping_pong_rtt") {
        let rtt = ic::rtt::raw_tcp_ping_pong_rtt(4_000 * scale);
        println!(
            "RESULT name=raw_tcp_ping_pong_rtt value={:.1} unit=us",
            rtt.as_nanos() as f64 / 1000.0
        );
    }
    // The cluster mbox (`bridge::ClusterMbox`) between two nodes over loopback: a stream
    // to one subscriber on the other node; one send to 16 subscribers, 8 per node.
    if run("cluster_mbox_stream") {
        let (t, n) = cluster::stream(200_000 * scale);
        rate("cluster_mbox_stream", n, t, "msg/s");
    }
    if run("cluster_mbox_fanout") {
        let (t, deliveries) = cluster::fanout(20_000 * scale);
        rate("cluster_mbox_fanout", deliveries, t, "deliveries/s");
    }
}

/// The scenarios of the YDB actor layer (`agentbox::actors`).
mod ydb {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use agentbox::actors::*;
    use agentbox::{ActorId, Environment};

    const SPACE: u32 = event_space_begin(ES_USERSPACE);

    /// Empty, as YDB's `TEvPing` of its `01_ping_pong`.
    struct Ping;
    impl Event for Ping {
        const EVENT_TYPE: u32 = SPACE + 1;
    }
    struct Pong;
    impl Event for Pong {
        const EVENT_TYPE: u32 = SPACE + 2;
    }

    type Elapsed = Arc<parking_lot::Mutex<Option<Duration>>>;

    struct Ponger;
    impl Actor for Ponger {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            ctx.become_state(Self::serving);
        }
    }
    impl Ponger {
        fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
            if ev.event_type() == Ping::EVENT_TYPE {
                ctx.send(ev.sender(), Pong);
                return Handled::Yes;
            }
            ev.unhandled()
        }
    }

    struct Pinger {
        ponger: ActorId,
        rounds: u64,
        done: u64,
        started: Instant,
        elapsed: Elapsed,
    }
    impl Actor for Pinger {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            ctx.become_state(Self::playing);
            self.started = Instant::now();
            ctx.send(self.ponger, Ping);
        }
    }
    impl Pinger {
        fn playing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
            if ev.event_type() != Pong::EVENT_TYPE {
                return ev.unhandled();
            }
            self.done += 1;
            if self.done < self.rounds {
                ctx.send(self.ponger, Ping);
            } else {
                *self.elapsed.lock() = Some(self.started.elapsed());
                ctx.send(self.ponger, Poison);
                let _ = ctx.pass_away();
            }
            Handled::Yes
        }
    }

    /// Two actors on a one-thread pool bounce `rounds` round trips by `ActorId`.
    pub fn ping_pong_one_thread(rounds: u64) -> Duration {
        let elapsed = Elapsed::default();
        let e = elapsed.clone();
        Environment::launch(move |env| {
            let sys = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let ponger = sys.register(Ponger).unwrap();
            sys.register(Pinger {
                ponger,
                rounds,
                done: 0,
                started: Instant::now(),
                elapsed: e,
            })
            .unwrap();
        })
        .unwrap();
        let t = elapsed.lock().take().expect("the pinger finished");
        t
    }

    /// Counts what it gets; passes away after `n`.
    struct Sink {
        n: u64,
        got: u64,
    }
    impl Actor for Sink {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            ctx.become_state(Self::counting);
        }
    }
    impl Sink {
        fn counting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
            if ev.event_type() != Ping::EVENT_TYPE {
                return ev.unhandled();
            }
            self.got += 1;
            if self.got == self.n {
                let _ = ctx.pass_away();
            }
            Handled::Yes
        }
    }

    /// Next batch of sends, from the sender to itself.
    struct Next;
    impl Event for Next {
        const EVENT_TYPE: u32 = SPACE + 3;
    }

    /// Sends `n` events by id to a sink on its own one-thread pool, in batches of 1000
    /// (each batch handled before the next, so the queue stays short), each one routed
    /// through the pool's table (the system handle has no route cache); adds up the time
    /// of the sends alone.
    struct Sender {
        sink: ActorId,
        left: u64,
        spent: Duration,
        elapsed: Elapsed,
    }
    impl Actor for Sender {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            ctx.become_state(Self::sending);
            ctx.send(ctx.self_id(), Next);
        }
    }
    impl Sender {
        fn sending(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
            if ev.event_type() != Next::EVENT_TYPE {
                return ev.unhandled();
            }
            let sys = ctx.system();
            let batch = self.left.min(1000);
            let start = Instant::now();
            for _ in 0..batch {
                sys.send(self.sink, Ping);
            }
            self.spent += start.elapsed();
            self.left -= batch;
            if self.left == 0 {
                *self.elapsed.lock() = Some(self.spent);
                let _ = ctx.pass_away();
            } else {
                ctx.send(ctx.self_id(), Next);
            }
            Handled::Yes
        }
    }

    pub fn send_by_id(n: u64) -> Duration {
        let elapsed = Elapsed::default();
        let e = elapsed.clone();
        Environment::launch(move |env| {
            let sys = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let sink = sys.register(Sink { n, got: 0 }).unwrap();
            sys.register(Sender {
                sink,
                left: n,
                spent: Duration::ZERO,
                elapsed: e,
            })
            .unwrap();
        })
        .unwrap();
        let t = elapsed.lock().take().expect("the sender finished");
        t
    }

    /// Passes away in its bootstrap.
    struct Brief(Arc<AtomicU64>);
    impl Actor for Brief {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            self.0.fetch_add(1, Ordering::Relaxed);
            let _ = ctx.pass_away();
        }
    }

    /// Registers `n` actors from outside (register + bootstrap + pass away each), until
    /// the environment has finalized them all.
    pub fn register(n: u64) -> Duration {
        let count = Arc::new(AtomicU64::new(0));
        let c = count.clone();
        let start = Instant::now();
        Environment::launch(move |env| {
            let sys = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            for _ in 0..n {
                sys.register(Brief(c.clone())).unwrap();
            }
        })
        .unwrap();
        let t = start.elapsed();
        assert_eq!(count.load(Ordering::Relaxed), n, "every actor bootstrapped");
        t
    }
}
