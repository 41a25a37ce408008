//! Jobs over a cluster-wide mbox: three nodes on 127.0.0.1 in one process, one command,
//! ends by itself.
//!
//! `cargo run --release --example cluster_jobs [-- --serve 127.0.0.1:8880]`
//!
//! - Every node builds two cluster mboxes (`agentbox::bridge::ClusterMbox`): `jobs`, of the
//!   round-robin kind (each job goes to one worker in the cluster), and `audit`, of the
//!   fan-out kind (each audit record to every subscriber).
//! - A **producer** agent on node 1 sends jobs to `jobs`, each carrying the `ActorId` of the
//!   producer's endpoint; the worker that handles a job answers that id with `Done`.
//! - **Workers**, agents written the SObjectizer way, on nodes 2 (two of them) and 3 (one):
//!   a state `fresh` (the first job warms the worker up) and a state `warm`, a message
//!   limit on jobs, and an `Audit` record to `audit` per job handled.
//! - A **monitor** on node 1 subscribes to `audit` with a shippable delivery filter (urgent
//!   jobs only): the other records are filtered on the workers' nodes and never cross.
//!
//! Three phases of 90 jobs: with node 3 (node 2 takes two thirds, node 3 one third);
//! with node 3 stopped (its interconnect first, then its environment: its subscriptions
//! vanish on node 1, node 2 takes every job); with node 3 restarted on the same port (a
//! new environment; its subscriptions are announced again, and it gets work again). The
//! program prints the counts per node and phase and checks them: every job answered
//! exactly once, nothing handled twice, the monitor saw every urgent job.
//!
//! Built with `--features monitor`, `--serve ADDR` serves node 1's live introspection page
//! (`agentbox::monitor`: its agents, its actor system, its sessions with nodes 2 and 3) on
//! `ADDR`, a loopback address, from the start; after the checks the program then keeps
//! running until killed instead of ending.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::bridge::{
    ClusterKey, ClusterMbox, ClusterMboxEvents, ClusterView, Endpoint, Exposed, ShippableFilter,
};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::prelude::*;
use agentbox::{ActorId, State, WrappedEnv};
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 40);
const JOBS_PER_PHASE: u64 = 90;
/// Every tenth job is urgent.
const URGENT: u64 = 9;
const PATIENCE: Duration = Duration::from_secs(60);

/// A job, and where to answer it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    id: u64,
    priority: u64,
    reply_to: ActorId,
}
impl Event for Job {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Job {
    type Codec = Serde;
}

/// A worker's answer to the producer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Done {
    job: u64,
    node: u32,
}
impl Event for Done {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Done {
    type Codec = Serde;
}

/// A record of a handled job, for whoever audits.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Audit {
    job: u64,
    node: u32,
    priority: u64,
}
impl Event for Audit {
    const EVENT_TYPE: u32 = SPACE + 3;
}
impl RemoteEvent for Audit {
    type Codec = Serde;
}
impl ClusterKey for Audit {
    fn cluster_key(&self) -> u64 {
        self.priority
    }
}

/// The producer's order: send jobs `from..from + count`.
struct Go {
    from: u64,
    count: u64,
    reply_to: ActorId,
}

/// The cluster mboxes of one node.
struct Boxes {
    jobs: Mbox,
    jobs_view: ClusterView,
    audit: Mbox,
    audit_view: ClusterView,
}

fn boxes(system: &ActorSystem, ic: &Interconnect) -> Boxes {
    let (jobs, jobs_view) = ClusterMbox::new(system, ic, "jobs")
        .event::<Job>()
        .round_robin()
        .build_with_view()
        .expect("the jobs mbox");
    let (audit, audit_view) = ClusterMbox::new(system, ic, "audit")
        .keyed_event::<Audit>()
        .channel(1)
        .build_with_view()
        .expect("the audit mbox");
    Boxes {
        jobs,
        jobs_view,
        audit,
        audit_view,
    }
}

/// A worker: `fresh` until its first job, then `warm`.
struct Worker {
    node: u32,
    system: ActorSystem,
    jobs: Mbox,
    audit: Mbox,
    warm: State,
}

impl Worker {
    fn handle(&mut self, job: &Job) {
        self.system.send(
            job.reply_to,
            Done {
                job: job.id,
                node: self.node,
            },
        );
        let _ = send(
            &self.audit,
            Audit {
                job: job.id,
                node: self.node,
                priority: job.priority,
            },
        );
    }
}

impl Agent for Worker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let jobs = self.jobs.clone();
        // More queued jobs than this are dropped (none here: the producer is fair).
        ctx.limit_then_drop::<Job>(1000)?;
        ctx.subscribe(&jobs).event(|w: &mut Self, ctx, job: &Job| {
            w.handle(job); // the first job warms the worker up
            let warm = w.warm.clone();
            ctx.change_state(&warm).expect("warm");
        })?;
        ctx.subscribe(&jobs)
            .in_state(&self.warm.clone())
            .event(|w: &mut Self, _, job: &Job| w.handle(job))?;
        Ok(())
    }
}

/// Sends the jobs it is told to.
struct Producer {
    jobs: Mbox,
}
impl Agent for Producer {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|p: &mut Self, _, go: &Go| {
            for id in go.from..go.from + go.count {
                let priority = if id % 10 == 0 { URGENT } else { id % 5 };
                let job = Job {
                    id,
                    priority,
                    reply_to: go.reply_to,
                };
                send(&p.jobs, job).expect("a job");
            }
        })?;
        Ok(())
    }
}

/// Collects the producer's answers (the endpoint delivers `Done` to this agent).
struct Tally {
    tx: Sender<Done>,
}
impl Agent for Tally {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|t: &mut Self, _, done: &Done| {
            let _ = t.tx.send(done.clone());
        })?;
        Ok(())
    }
}

/// Counts the urgent audit records it is shown.
struct Monitor {
    audit: Mbox,
    urgent: Arc<Mutex<Vec<u64>>>,
}
impl Agent for Monitor {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let audit = self.audit.clone();
        ShippableFilter::<Audit>::key_eq(URGENT).set(ctx, &audit)?;
        ctx.subscribe(&audit).event(|m: &mut Self, _, a: &Audit| {
            assert_eq!(a.priority, URGENT, "the filter lets urgent records only");
            m.urgent.lock().expect("urgent").push(a.job);
        })?;
        Ok(())
    }
}

fn setup(names: &NameService, listener: TcpListener) -> InterconnectSetup {
    InterconnectSetup::new(names.clone())
        .listener(listener)
        .cluster_mbox_events()
        .event::<Job>()
        .event::<Done>()
        .event::<Audit>()
        // A stopped node's session ends (and its subscriptions vanish) after 1 s.
        .lost_connection_timeout(Duration::from_secs(1))
        .ping_period(Duration::from_millis(300))
}

/// One worker node: its environment, system, interconnect and mboxes.
struct WorkerNode {
    env: WrappedEnv,
    ic: Interconnect,
    boxes: Boxes,
    started: Instant,
}

impl WorkerNode {
    /// Whether this node knows that node 1 wants urgent audit records.
    fn knows_the_monitor(&self) -> bool {
        let urgent = Audit {
            job: 0,
            node: 0,
            priority: URGENT,
        };
        self.boxes.audit_view.nodes_for(urgent) == [1]
    }
}

fn start_worker_node(id: u32, workers: u32, names: &NameService, l: TcpListener) -> WorkerNode {
    let env = WrappedEnv::new(|_| {}).expect("an environment");
    let system = ActorSystem::start(env.environment(), SystemSetup::new(id)).expect("a system");
    let ic = Interconnect::start(&system, setup(names, l)).expect("an interconnect");
    let b = boxes(&system, &ic);
    env.environment()
        .introduce_coop(|coop| {
            for _ in 0..workers {
                coop.add_agent(Worker {
                    node: id,
                    system: system.clone(),
                    jobs: b.jobs.clone(),
                    audit: b.audit.clone(),
                    warm: State::new("warm"),
                });
            }
        })
        .expect("the workers");
    WorkerNode {
        env,
        ic,
        boxes: b,
        started: Instant::now(),
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("never happened: {what}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Runs one phase: `JOBS_PER_PHASE` jobs from `from`; the answers by node.
fn phase(
    producer: &Mbox,
    reply_to: ActorId,
    from: u64,
    done: &Receiver<Done>,
    seen: &mut BTreeMap<u64, u32>,
) -> Result<BTreeMap<u32, u64>, String> {
    send(
        producer,
        Go {
            from,
            count: JOBS_PER_PHASE,
            reply_to,
        },
    )
    .map_err(|e| e.to_string())?;
    let mut per_node = BTreeMap::new();
    let deadline = Instant::now() + PATIENCE;
    for _ in 0..JOBS_PER_PHASE {
        let left = deadline.saturating_duration_since(Instant::now());
        let d = done
            .recv_timeout(left)
            .map_err(|_| format!("jobs from {from}: not all answered ({per_node:?})"))?;
        if let Some(node) = seen.insert(d.job, d.node) {
            return Err(format!(
                "job {} handled twice (nodes {node}, {})",
                d.job, d.node
            ));
        }
        *per_node.entry(d.node).or_insert(0) += 1;
    }
    Ok(per_node)
}

fn run() -> Result<(), String> {
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string());
    let (l1, l2, l3) = (bind()?, bind()?, bind()?);
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).unwrap_or(0);
    let p3 = port(&l3);
    let names = NameService::new()
        .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
        .node(2, NodeAddress::new("127.0.0.1", port(&l2)))
        .node(3, NodeAddress::new("127.0.0.1", p3));
    println!("nodes on 127.0.0.1:{}, :{}, :{}", port(&l1), port(&l2), p3);

    // Node 1: the producer, its answers' endpoint, the monitor.
    let env1 = WrappedEnv::new(|_| {}).map_err(|e| e.to_string())?;
    let system1 =
        ActorSystem::start(env1.environment(), SystemSetup::new(1)).map_err(|e| e.to_string())?;
    let ic1 = Interconnect::start(&system1, setup(&names, l1)).map_err(|e| e.to_string())?;
    let b1 = boxes(&system1, &ic1);
    let serving = serve_page(env1.environment(), &system1, &ic1)?;
    let (done_tx, done_rx) = mpsc::channel();
    let urgent = Arc::new(Mutex::new(Vec::new()));
    let (producer, tally) = env1
        .environment()
        .introduce_coop(|coop| {
            coop.add_agent(Monitor {
                audit: b1.audit.clone(),
                urgent: urgent.clone(),
            });
            (
                coop.add_agent(Producer {
                    jobs: b1.jobs.clone(),
                }),
                coop.add_agent(Tally { tx: done_tx }),
            )
        })
        .map_err(|e| e.to_string())?;
    let answers: Exposed = Endpoint::new(&tally)
        .event::<Done>()
        .expose(&system1)
        .map_err(|e| e.to_string())?;

    let node2 = start_worker_node(2, 2, &names, l2);
    let mut node3 = start_worker_node(3, 1, &names, l3);
    let ready = |n3: bool| {
        let jobs = if n3 { vec![2, 3] } else { vec![2] };
        b1.jobs_view.nodes_wanting::<Job>() == jobs
            && b1.jobs_view.subscribers_on::<Job>(2) == 2
            && b1.jobs_view.subscribers_on::<Job>(3) == u32::from(n3)
    };
    wait_until("node 1 sees the workers of nodes 2 and 3", || ready(true))?;
    wait_until("nodes 2 and 3 see the monitor", || {
        node2.knows_the_monitor() && node3.knows_the_monitor()
    })?;

    let mut seen = BTreeMap::new();
    let mut rows = Vec::new();
    let a = phase(&producer, answers.id(), 0, &done_rx, &mut seen)?;
    rows.push(("with node 3", a));

    // Node 3 stops: its interconnect first (it announces nothing), then everything.
    node3.ic.stop();
    wait_until("node 3's workers vanish on node 1", || ready(false))?;
    let started3 = node3.started;
    node3.env.stop_then_join().map_err(|e| e.to_string())?;
    let b = phase(&producer, answers.id(), JOBS_PER_PHASE, &done_rx, &mut seen)?;
    rows.push(("node 3 stopped", b));

    // Node 3 restarts on the same port (its session ids must be from a later second).
    while started3.elapsed() < Duration::from_millis(1100) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + PATIENCE;
    let l3 = loop {
        match TcpListener::bind(("127.0.0.1", p3)) {
            Ok(l) => break l,
            Err(e) if Instant::now() > deadline => return Err(e.to_string()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    node3 = start_worker_node(3, 1, &names, l3);
    wait_until("node 3's workers are announced again", || ready(true))?;
    wait_until("node 3 sees the monitor again", || {
        node3.knows_the_monitor()
    })?;
    let c = phase(
        &producer,
        answers.id(),
        2 * JOBS_PER_PHASE,
        &done_rx,
        &mut seen,
    )?;
    rows.push(("node 3 back", c));

    // The monitor's urgent records: every urgent job, once (fan-out after the answers;
    // wait for the last ones).
    let urgent_jobs: Vec<u64> = (0..3 * JOBS_PER_PHASE).filter(|id| id % 10 == 0).collect();
    wait_until(
        &format!("the monitor sees every urgent job ({urgent:?})"),
        || {
            urgent
                .lock()
                .map(|u| u.len() >= urgent_jobs.len())
                .unwrap_or(false)
        },
    )?;
    let mut monitored = urgent.lock().map_err(|e| e.to_string())?.clone();
    monitored.sort_unstable();

    println!("{:<16} {:>8} {:>8}", "phase", "node 2", "node 3");
    for (name, per) in &rows {
        let get = |n| per.get(&n).copied().unwrap_or(0);
        println!("{name:<16} {:>8} {:>8}", get(2), get(3));
    }
    println!(
        "answered {} jobs once each; the monitor saw {} urgent jobs (filtered on the workers' nodes)",
        seen.len(),
        monitored.len()
    );
    let expect = [
        (2 * JOBS_PER_PHASE / 3, JOBS_PER_PHASE / 3),
        (JOBS_PER_PHASE, 0),
        (2 * JOBS_PER_PHASE / 3, JOBS_PER_PHASE / 3),
    ];
    for ((name, per), (n2, n3)) in rows.iter().zip(expect) {
        let got = (
            per.get(&2).copied().unwrap_or(0),
            per.get(&3).copied().unwrap_or(0),
        );
        if got != (n2, n3) {
            return Err(format!(
                "{name}: nodes 2 and 3 handled {got:?}, expected {:?}",
                (n2, n3)
            ));
        }
    }
    if seen.len() as u64 != 3 * JOBS_PER_PHASE {
        return Err(format!("{} jobs answered", seen.len()));
    }
    if monitored != urgent_jobs {
        return Err(format!("the monitor saw {monitored:?}"));
    }
    if let Some(page) = &serving {
        println!("checks passed; serving {page:?} until killed");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    drop(answers);
    node3.env.stop_then_join().map_err(|e| e.to_string())?;
    node2.env.stop_then_join().map_err(|e| e.to_string())?;
    drop(b1);
    env1.stop_then_join().map_err(|e| e.to_string())?;
    Ok(())
}

/// With `--serve ADDR`: node 1's introspection page on `ADDR` (feature `monitor`).
#[cfg(feature = "monitor")]
fn serve_page(
    env: &Environment,
    system: &ActorSystem,
    ic: &Interconnect,
) -> Result<Option<agentbox::monitor::Monitor>, String> {
    let Some(addr) = serve_arg()? else {
        return Ok(None);
    };
    let monitor =
        agentbox::monitor::Monitor::start(env, addr.as_str()).map_err(|e| e.to_string())?;
    monitor.add_system(system).map_err(|e| e.to_string())?;
    monitor.add_node(ic);
    println!("monitor: {}", monitor.url());
    Ok(Some(monitor))
}

#[cfg(not(feature = "monitor"))]
fn serve_page(_: &Environment, _: &ActorSystem, _: &Interconnect) -> Result<Option<()>, String> {
    match serve_arg()? {
        Some(addr) => Err(format!("--serve {addr}: build with `--features monitor`")),
        None => Ok(None),
    }
}

/// The address after `--serve`, if given.
fn serve_arg() -> Result<Option<String>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().position(|a| a == "--serve") {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .cloned()
            .map(Some)
            .ok_or_else(|| "--serve takes an address".to_owned()),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cluster_jobs: {e}");
            ExitCode::FAILURE
        }
    }
}
