//! Two nodes in one process, with the live introspection page (feature `monitor`).
//!
//! `cargo run --release --features monitor --example monitor [-- --serve 127.0.0.1:8880]`
//!
//! One environment runs:
//!
//! - a coop of SObjectizer-style agents on an elastic thread pool (1 to 3 threads,
//!   moved by a harmonizer every second) with activity tracking: a
//!   `Ticker` that ticks every 100 ms and switches between its states `even` and `odd`,
//!   and a `Counter` that counts the ticks (from the named mbox `ticks`); a child coop with
//!   a `Reporter` on its own thread (`active_obj`) that hears every tenth tick (from the
//!   named mbox `report`);
//! - two YDB actor systems, nodes 1 and 2, joined by the interconnect on 127.0.0.1 (ports
//!   the OS picks): a `Pinger` on node 1 pings the `ponger` service of node 2 every 20 ms
//!   and counts the answers; one event goes to an actor nobody has, a dead letter.
//!
//! Without `--serve` it plays 50 round trips and 20 ticks, prints `ok` and ends by itself.
//! With `--serve ADDR` it serves the page on `ADDR` (a loopback address; port 0 lets the
//! OS pick one), prints `monitor: http://…/`, and runs until killed (or for `--seconds N`).

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::dispatcher::{active_obj, thread_pool};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::prelude::*;
use agentbox::{ActorId, State};
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 60);
const ROUND_TRIPS: u64 = 50;
const TICKS: u64 = 20;

#[derive(Serialize, Deserialize)]
struct Ping(u64);
impl Event for Ping {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Ping {
    type Codec = Serde;
}

#[derive(Serialize, Deserialize)]
struct Pong(u64);
impl Event for Pong {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Pong {
    type Codec = Serde;
}

/// The pinger's own timer.
struct Again;
impl Event for Again {
    const EVENT_TYPE: u32 = SPACE + 3;
}

/// Node 2's `ponger` service: answers every ping.
struct Ponger;
impl Actor for Ponger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::serving);
    }
}
impl Ponger {
    fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(Ping(n)) = ev.get::<Ping>() else {
            return ev.unhandled();
        };
        ctx.send(ev.sender(), Pong(*n));
        Handled::Yes
    }
}

/// Node 1's pinger: a ping every 20 ms, counts the pongs.
struct Pinger {
    ponger: ActorId,
    pongs: Arc<AtomicU64>,
}
impl Actor for Pinger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::playing);
        ctx.send(self.ponger, Ping(0));
    }
}
impl Pinger {
    fn playing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if let Some(Pong(n)) = ev.get::<Pong>() {
            self.pongs.fetch_add(1, Ordering::Relaxed);
            let _ = n;
            ctx.schedule(Duration::from_millis(20), Again);
            return Handled::Yes;
        }
        if ev.get::<Again>().is_some() {
            ctx.send(self.ponger, Ping(self.pongs.load(Ordering::Relaxed)));
            return Handled::Yes;
        }
        ev.unhandled()
    }
}

struct Tick(u64);

/// Ticks every 100 ms (a periodic timer), alternating its states `even` and `odd`.
struct Ticker {
    out: Mbox,
    even: State,
    odd: State,
    ticks: u64,
    timer: Option<TimerHandle>,
}
impl Agent for Ticker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        for state in [self.even.clone(), self.odd.clone()] {
            ctx.subscribe(&me)
                .in_state(&state)
                .event(|a: &mut Self, ctx, _: &Tick| {
                    let next = if ctx.is_in_state(&a.even) {
                        a.odd.clone()
                    } else {
                        a.even.clone()
                    };
                    let _ = ctx.change_state(&next);
                    a.ticks += 1;
                    let _ = send(&a.out, Tick(a.ticks));
                })?;
        }
        ctx.change_state(&self.even.clone())?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        self.timer = send_periodic(&me, Duration::ZERO, Duration::from_millis(100), Tick(0)).ok();
    }
}

/// Counts the ticks; every tenth goes on to the reporter.
struct Counter {
    ticks: Mbox,
    report: Mbox,
    seen: Arc<AtomicU64>,
}
impl Agent for Counter {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let ticks = self.ticks.clone();
        ctx.subscribe(&ticks).event(|a: &mut Self, _, _: &Tick| {
            let n = a.seen.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(10) {
                let _ = send(&a.report, Tick(n));
            }
        })?;
        Ok(())
    }
}

/// Hears every tenth tick.
struct Reporter {
    report: Mbox,
}
impl Agent for Reporter {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let report = self.report.clone();
        ctx.subscribe(&report).event(|_: &mut Self, _, t: &Tick| {
            println!("{} ticks", t.0);
        })?;
        Ok(())
    }
}

struct Args {
    serve: Option<String>,
    seconds: Option<u64>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        serve: None,
        seconds: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--serve" => a.serve = Some(it.next().ok_or("--serve takes an address")?),
            "--seconds" => {
                let v = it.next().ok_or("--seconds takes a number")?;
                a.seconds = Some(v.parse().map_err(|_| format!("bad --seconds {v}"))?);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn run(
    env: &Environment,
    args: &Args,
    keep: &mut Vec<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    // The agents.
    // An elastic pool: 1 to 3 threads, 2 at the start, moved by a harmonizer.
    let pool = thread_pool::Builder::new()
        .name("workers")
        .thread_limits(1, 2, 3)
        .activity_tracking(true)
        .build()
        .map_err(|x| e(&x))?;
    let harmonizer = agentbox::harmonizer::Harmonizer::builder()
        .dispatcher(&pool)
        .build()
        .map_err(|x| e(&x))?;
    // Named: the page lists them with their message types and subscribers.
    let ticks = env.named_mbox("ticks");
    let report = env.named_mbox("report");
    let seen = Arc::new(AtomicU64::new(0));
    let parent = {
        let mut coop = env.make_coop();
        coop.set_binder(pool.binder());
        coop.add_agent(Ticker {
            out: ticks.clone(),
            even: State::new("even"),
            odd: State::new("odd"),
            ticks: 0,
            timer: None,
        });
        coop.add_agent(Counter {
            ticks: ticks.clone(),
            report: report.clone(),
            seen: seen.clone(),
        });
        env.register_coop(coop).map_err(|x| e(&x))?
    };
    let reporter_disp = active_obj::Builder::new()
        .name("reporter")
        .activity_tracking(true)
        .build()
        .map_err(|x| e(&x))?;
    let mut child = env.make_child_coop(&parent);
    child.add_agent_with_binder(Reporter { report }, reporter_disp.binder());
    env.register_coop(child).map_err(|x| e(&x))?;

    // The two nodes.
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|x| e(&x));
    let (l1, l2) = (bind()?, bind()?);
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).unwrap_or(0);
    let names = NameService::new()
        .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
        .node(2, NodeAddress::new("127.0.0.1", port(&l2)));
    let mut systems = Vec::new();
    let mut nodes = Vec::new();
    for (id, listener) in [(1, l1), (2, l2)] {
        let setup = SystemSetup::new(id).pool(PoolConfig::new("user").activity_tracking(true));
        let system = ActorSystem::start(env, setup).map_err(|x| e(&x))?;
        let ic_setup = InterconnectSetup::new(names.clone())
            .listener(listener)
            .event::<Ping>()
            .event::<Pong>()
            .ping_period(Duration::from_millis(500));
        nodes.push(Interconnect::start(&system, ic_setup).map_err(|x| e(&x))?);
        systems.push(system);
    }
    let service = ActorId::service(2, b"ponger").map_err(|x| e(&x))?;
    let ponger = systems[1].register(Ponger).map_err(|x| e(&x))?;
    systems[1]
        .register_local_service(service, ponger)
        .map_err(|x| e(&x))?;
    let pongs = Arc::new(AtomicU64::new(0));
    systems[0]
        .register(Pinger {
            ponger: service,
            pongs: pongs.clone(),
        })
        .map_err(|x| e(&x))?;
    if let Some(addr) = &args.serve {
        serve(env, addr, &systems, &nodes, &harmonizer, keep)?;
        // Nobody lives there: a dead letter for the page.
        systems[0].send(ActorId::new(1, 999_999, 0), Ping(0));
        let deadline = args
            .seconds
            .map(|s| Instant::now() + Duration::from_secs(s));
        while deadline.is_none_or(|d| Instant::now() < d) {
            std::thread::sleep(Duration::from_millis(200));
        }
    } else {
        let deadline = Instant::now() + Duration::from_secs(60);
        while (pongs.load(Ordering::Relaxed) < ROUND_TRIPS || seen.load(Ordering::Relaxed) < TICKS)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (p, t) = (pongs.load(Ordering::Relaxed), seen.load(Ordering::Relaxed));
        println!("{p} round trips between nodes 1 and 2, {t} ticks");
        if p < ROUND_TRIPS || t < TICKS {
            return Err("timed out".into());
        }
    }
    keep.push(Box::new(nodes));
    keep.push(Box::new((harmonizer, pool, reporter_disp)));
    Ok(())
}

/// Starts the page on `addr` with both systems and nodes attached; kept in `keep`.
#[cfg(feature = "monitor")]
fn serve(
    env: &Environment,
    addr: &str,
    systems: &[ActorSystem],
    nodes: &[Interconnect],
    harmonizer: &agentbox::harmonizer::Harmonizer,
    keep: &mut Vec<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    let monitor = agentbox::monitor::Monitor::start(env, addr).map_err(|e| e.to_string())?;
    monitor.add_harmonizer(harmonizer);
    for s in systems {
        monitor.add_system(s).map_err(|e| e.to_string())?;
    }
    for n in nodes {
        monitor.add_node(n);
    }
    println!("monitor: {}", monitor.url());
    keep.push(Box::new(monitor));
    Ok(())
}

#[cfg(not(feature = "monitor"))]
fn serve(
    _: &Environment,
    addr: &str,
    _: &[ActorSystem],
    _: &[Interconnect],
    _: &agentbox::harmonizer::Harmonizer,
    _: &mut Vec<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    Err(format!(
        "--serve {addr}: build with `--features monitor` to serve the page"
    ))
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("monitor: {e}");
            return ExitCode::from(2);
        }
    };
    let mut outcome = Ok(());
    // Held until the environment has stopped (the interconnects' stop guards need their
    // nodes alive; the monitor serves until then).
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let launched = Environment::launch(|env| {
        outcome = run(env, &args, &mut keep);
        env.stop();
    });
    drop(keep);
    match launched.map_err(|e| e.to_string()).and(outcome) {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("monitor: {e}");
            ExitCode::FAILURE
        }
    }
}
