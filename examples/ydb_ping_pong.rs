//! YDB's `01_ping_pong` on agentbox's actor layer: pairs of actors bounce Ping/Pong by
//! `ActorId`; a reporter wakes up every second and prints `Handled N over T ms`.
//!
//! `cargo run --release --example ydb_ping_pong [-- --threads 1 --pairs 1 --seconds 3]`
//!
//! Ends by itself after `--seconds`: the reporter poisons every actor, then passes away,
//! and the environment shuts down when the last actor is gone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::{ActorId, Environment};

const EVENTS: u32 = event_space_begin(ES_USERSPACE);

/// The ball going to the ponger.
struct Ping;
impl Event for Ping {
    const EVENT_TYPE: u32 = EVENTS + 1;
}

/// The ball coming back.
struct Pong;
impl Event for Pong {
    const EVENT_TYPE: u32 = EVENTS + 2;
}

/// Answers every Ping with a Pong; Poison (unhandled) passes it away.
struct Ponger;

impl Actor for Ponger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
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

/// Serves Pings to its ponger and counts the Pongs.
struct Pinger {
    ponger: ActorId,
    handled: Arc<AtomicU64>,
}

impl Actor for Pinger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        ctx.become_state(Self::playing);
        ctx.send(self.ponger, Ping);
    }
}

impl Pinger {
    fn playing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if ev.event_type() == Pong::EVENT_TYPE {
            self.handled.fetch_add(1, Ordering::Relaxed);
            ctx.send(self.ponger, Ping);
            return Handled::Yes;
        }
        ev.unhandled()
    }
}

/// Prints the figures every second; after `seconds` stops the game.
struct Reporter {
    handled: Arc<AtomicU64>,
    players: Vec<ActorId>,
    seconds: u64,
    ticks: u64,
    last: Instant,
    last_handled: u64,
}

impl Actor for Reporter {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        ctx.become_state(Self::reporting);
        self.last = Instant::now();
        ctx.schedule(Duration::from_secs(1), Wakeup::default());
    }
}

impl Reporter {
    fn reporting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if !ev.is::<Wakeup>() {
            return ev.unhandled();
        }
        let now = Instant::now();
        let handled = self.handled.load(Ordering::Relaxed);
        println!(
            "Handled {} over {} ms",
            handled - self.last_handled,
            now.duration_since(self.last).as_millis()
        );
        (self.last, self.last_handled) = (now, handled);
        self.ticks += 1;
        if self.ticks < self.seconds {
            ctx.schedule(Duration::from_secs(1), Wakeup::default());
        } else {
            for &p in &self.players {
                ctx.send(p, Poison);
            }
            let _ = ctx.pass_away();
        }
        Handled::Yes
    }
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = arg(&args, "--threads", 1).max(1) as usize;
    let pairs = arg(&args, "--pairs", 1).max(1);
    let seconds = arg(&args, "--seconds", 3).max(1);
    println!("{pairs} pairs on {threads} threads for {seconds} s");

    Environment::launch(|env| {
        let setup = SystemSetup::new(1).pool(PoolConfig::new(PoolConfig::USER).threads(threads));
        let system = ActorSystem::start(env, setup).expect("the actor system starts");
        let handled = Arc::new(AtomicU64::new(0));
        let mut players = Vec::new();
        for _ in 0..pairs {
            let ponger = system.register(Ponger).expect("register");
            let pinger = system
                .register(Pinger {
                    ponger,
                    handled: handled.clone(),
                })
                .expect("register");
            players.extend([ponger, pinger]);
        }
        system
            .register(Reporter {
                handled,
                players,
                seconds,
                ticks: 0,
                last: Instant::now(),
                last_handled: 0,
            })
            .expect("register");
    })
    .expect("the environment runs");
    println!("done");
}
