//! The talk's claim (YDB's harmonizer): an interactive pool of short events beside a batch
//! pool of long CPU-bound events on the same machine.
//!
//! Three set-ups, each pool sized for its peak (`cores` threads at most; `cores` is the
//! machine's, or `--threads N` to size the pools for `N` cores):
//! - `fixed`: both pools run `cores` threads all the time (2 × cores threads on `cores`
//!   cores: the OS time-slices them, and interactive events wait behind batch events);
//! - `harmonized`: the same maxima, defaults `cores / 2` and `cores − cores / 2`, and a
//!   harmonizer with a budget of `cores` (period 100 ms) moves threads by measured load;
//! - `shared`: as `harmonized`, and each pool has a shared thread that serves the other
//!   pool when its own has no work; the interactive pool keeps at least one full thread
//!   besides its shared thread (YDB's shape: full threads plus a shared one), so that its
//!   events never wait for the batch event its shared thread has in hand.
//!
//! Load: the batch pool runs 2 ms events back to back on `2 × cores` agents; the
//! interactive pool gets 50 µs events from a generator thread at a fixed rate (0.1 core
//! in a first phase, 0.25 core in the second), spread over 8 agents. Measured:
//! interactive activation latency (send to handler start), p50 and p99 over both phases,
//! and the batch events per second. At the end of each set-up the harmonizer's counters
//! are printed (as `#` comments). `--quick` runs each set-up three times: the `RESULT`
//! lines give the median, the comments every run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbox::dispatcher::elastic::ThreadLimits;
use agentbox::dispatcher::thread_pool;
use agentbox::harmonizer::{Harmonizer, HarmonizerStats};
use agentbox::prelude::*;
use agentbox::{BindParams, DispatcherHandle, Fifo, WrappedEnv};

/// Which set-up to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Fixed,
    Harmonized,
    Shared,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub p50_us: f64,
    pub p99_us: f64,
    pub interactive_events: usize,
    pub interactive_sent: u64,
    pub batch_per_s: f64,
    pub interactive_threads_end: usize,
    pub batch_threads_end: usize,
    /// The harmonizer's figures at the end (`None`: fixed pools).
    pub stats: Option<HarmonizerStats>,
}

fn burn(d: Duration) {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

struct Tick;

struct BatchAgent {
    on: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
}

impl Agent for BatchAgent {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        ctx.subscribe(&me).event(|a: &mut Self, ctx, _: &Tick| {
            if !a.on.load(Ordering::Relaxed) {
                return;
            }
            burn(Duration::from_millis(2));
            a.done.fetch_add(1, Ordering::Relaxed);
            let _ = send(&ctx.direct_mbox(), Tick);
        })?;
        Ok(())
    }
}

struct Request(Instant);

struct InteractiveAgent {
    latencies: Arc<Mutex<Vec<u32>>>,
}

impl Agent for InteractiveAgent {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        ctx.subscribe(&me).event(|a: &mut Self, _, r: &Request| {
            let us = u32::try_from(r.0.elapsed().as_micros()).unwrap_or(u32::MAX);
            if let Ok(mut l) = a.latencies.lock() {
                l.push(us);
            }
            burn(Duration::from_micros(50));
        })?;
        Ok(())
    }
}

fn pool(name: &str, mode: Mode, cores: usize, default: usize, priority: i32) -> DispatcherHandle {
    let b = thread_pool::Builder::new().name(name);
    // The interactive pool (priority 1) with a shared thread keeps a full thread too.
    let min = if mode == Mode::Shared && priority > 0 {
        2
    } else {
        1
    };
    let b = match mode {
        Mode::Fixed => b.threads(cores),
        Mode::Harmonized | Mode::Shared => b.limits(ThreadLimits {
            priority,
            has_shared_thread: mode == Mode::Shared,
            ..ThreadLimits::new(min, default.max(min), cores.max(min))
        }),
    };
    b.build().expect("pool")
}

/// The machine's cores (at least 2).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// Runs one set-up with pools sized for `cores`: `phase1` with light interactive load,
/// then `phase2` with heavy.
pub fn run(mode: Mode, cores: usize, phase1: Duration, phase2: Duration) -> Outcome {
    let cores = cores.max(2);
    let interactive = pool("interactive", mode, cores, cores / 2, 1);
    let batch = pool("batch", mode, cores, cores - cores / 2, 0);
    let harmonizer = (mode != Mode::Fixed).then(|| {
        Harmonizer::builder()
            .dispatcher(&interactive)
            .dispatcher(&batch)
            .cpu_budget(cores as f64)
            .period(Duration::from_millis(100))
            .build()
            .expect("harmonizer")
    });
    let wrapped = WrappedEnv::new(|_| {}).expect("environment");
    let on = Arc::new(AtomicBool::new(true));
    let done = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(200_000)));
    let (mut batch_boxes, mut inter_boxes) = (Vec::new(), Vec::new());
    wrapped
        .environment()
        .introduce_coop(|coop| {
            for _ in 0..2 * cores {
                let bind = batch.binder_with(BindParams::new().fifo(Fifo::Individual));
                let agent = BatchAgent {
                    on: on.clone(),
                    done: done.clone(),
                };
                batch_boxes.push(coop.add_agent_with_binder(agent, bind));
            }
            for _ in 0..8 {
                let bind = interactive.binder_with(BindParams::new().fifo(Fifo::Individual));
                let agent = InteractiveAgent {
                    latencies: latencies.clone(),
                };
                inter_boxes.push(coop.add_agent_with_binder(agent, bind));
            }
        })
        .expect("coop");
    for m in &batch_boxes {
        send(m, Tick).expect("send");
    }
    let start = Instant::now();
    let done_at_start = done.load(Ordering::Relaxed);
    // Events per second of 50 µs: 0.05 core, then 0.25 core.
    let light = 0.05 / 50e-6;
    let heavy = 0.25 / 50e-6;
    let mut sent = 0u64;
    let mut next = 0usize;
    loop {
        let t = start.elapsed();
        if t >= phase1 + phase2 {
            break;
        }
        let due = if t < phase1 {
            light * t.as_secs_f64()
        } else {
            light * phase1.as_secs_f64() + heavy * (t - phase1).as_secs_f64()
        } as u64;
        while sent < due {
            let _ = send(
                &inter_boxes[next % inter_boxes.len()],
                Request(Instant::now()),
            );
            next += 1;
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let elapsed = start.elapsed();
    let batch_done = done.load(Ordering::Relaxed) - done_at_start;
    on.store(false, Ordering::Relaxed);
    // Let the interactive events still queued run (bounded), so that every one counts.
    let drain_end = Instant::now() + Duration::from_secs(5);
    while latencies.lock().map_or(0, |l| l.len()) < sent as usize && Instant::now() < drain_end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = harmonizer.as_ref().map(Harmonizer::stats);
    let ends = stats.as_ref().map_or((cores, cores), |st| {
        (
            st.pools[0].current_thread_count,
            st.pools[1].current_thread_count,
        )
    });
    drop(harmonizer);
    wrapped.stop_then_join().expect("stop");
    let mut l = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    l.sort_unstable();
    let q = |p: f64| {
        if l.is_empty() {
            0.0
        } else {
            f64::from(l[((l.len() - 1) as f64 * p) as usize])
        }
    };
    Outcome {
        p50_us: q(0.5),
        p99_us: q(0.99),
        interactive_events: l.len(),
        interactive_sent: sent,
        batch_per_s: batch_done as f64 / elapsed.as_secs_f64(),
        interactive_threads_end: ends.0,
        batch_threads_end: ends.1,
        stats,
    }
}

/// The cost of one harmonizer step over two idle elastic pools of 4 threads at most
/// (sample both, run the model, publish the stats): the harmonizer's overhead is this
/// once per period (1 s by default), on one worker.
pub fn step_cost(steps: u32) -> Duration {
    let a = pool("a", Mode::Harmonized, 4, 2, 1);
    let b = pool("b", Mode::Harmonized, 4, 2, 0);
    let h = Harmonizer::builder()
        .dispatcher(&a)
        .dispatcher(&b)
        .cpu_budget(4.0)
        .period(Duration::from_secs(3600))
        .build()
        .expect("harmonizer");
    let origin = h.origin();
    let start = Instant::now();
    for i in 1..=steps {
        h.harmonize_at(origin + Duration::from_secs(u64::from(i)));
    }
    start.elapsed() / steps
}

/// `--threads N` from the command line: the cores the pools are sized for.
fn threads_arg() -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--threads")?;
    match args.get(i + 1).map(|v| v.parse::<usize>()) {
        Some(Ok(n)) if n >= 1 => Some(n),
        _ => {
            eprintln!("--threads wants a number of cores of at least 1; using the machine's");
            None
        }
    }
}

/// The harmonizer's counters and states at the end of a set-up, as `#` comments.
fn print_counters(tag: &str, st: &HarmonizerStats) {
    println!(
        "#   {tag} harmonizer: {} steps, budget {:.2} (last second {:.2}) of {} cores, lost cpu {:.2}",
        st.iterations, st.budget, st.budget_last_second, st.total_cores, st.lost_cpu
    );
    for p in &st.pools {
        let ops: Vec<String> = p
            .counters
            .named()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        println!(
            "#   {tag} {}: {} threads ({}..={}), {}, elapsed {:.2} cpu {:.2} (last second {:.2} / {:.2}), potential max {:.1}; {}",
            p.name,
            p.current_thread_count,
            p.min_thread_count,
            p.max_thread_count,
            p.state_name(),
            p.elapsed,
            p.cpu,
            p.last_second_elapsed,
            p.last_second_cpu,
            p.potential_max_thread_count,
            ops.join(" ")
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the three set-ups and prints their `RESULT` lines (plus p50, thread counts and
/// the harmonizer's counters as comments). `--threads N` sizes the pools for `N` cores;
/// `quick` runs each set-up three times (short phases) and reports the median.
pub fn report(quick: bool) {
    let step = step_cost(if quick { 2_000 } else { 20_000 });
    println!(
        "RESULT name=harmonizer_step value={:.2} unit=us",
        step.as_nanos() as f64 / 1000.0
    );
    let (p1, p2, reps) = if quick {
        (Duration::from_millis(500), Duration::from_millis(1200), 3)
    } else {
        (Duration::from_secs(2), Duration::from_secs(6), 1)
    };
    let cores = threads_arg().unwrap_or_else(machine_cores);
    println!(
        "# harmonizer: pools sized for {cores} cores ({} here), {reps} run(s) per set-up",
        machine_cores()
    );
    for (mode, tag) in [
        (Mode::Fixed, "fixed"),
        (Mode::Harmonized, "harmonized"),
        (Mode::Shared, "shared"),
    ] {
        let (mut p99s, mut batches) = (Vec::new(), Vec::new());
        for rep in 1..=reps {
            let o = run(mode, cores, p1, p2);
            println!(
                "# harmonizer {tag} run {rep}: p99 {:.0} us, p50 {:.0} us, batch {:.0} events/s, \
                 {}/{} interactive events handled, threads at the end interactive {} batch {}",
                o.p99_us,
                o.p50_us,
                o.batch_per_s,
                o.interactive_events,
                o.interactive_sent,
                o.interactive_threads_end,
                o.batch_threads_end
            );
            if let Some(st) = &o.stats {
                print_counters(tag, st);
            }
            p99s.push(o.p99_us);
            batches.push(o.batch_per_s);
        }
        println!(
            "RESULT name=harmonizer_p99_{tag} value={:.0} unit=us",
            median(p99s)
        );
        println!(
            "RESULT name=harmonizer_batch_{tag} value={:.0} unit=events/s",
            median(batches)
        );
    }
}
