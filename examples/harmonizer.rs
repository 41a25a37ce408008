//! Two thread pools and YDB's harmonizer: a CPU-bound load runs on pool `a` for 4 s, then
//! moves to pool `b`. Every second the example prints each pool's thread count, its CPU
//! (last second, in cores), its time not parked, its state and its activation latency
//! (p99 of the last period: time from a queue's becoming ready to its first demand on a
//! thread). The loaded pool gets the threads it can use (its ready queues) at the first
//! step, as far as the CPU budget allows; the idle one gives them back, one per step.
//! Ends by itself after about 9 s; debug and release builds decide alike.
//!
//! On a machine busy with other work the OS preempts the pools' threads: the harmonizer
//! then sees CPU time below busy time and calls the pool "starved"; it keeps its threads
//! as long as the pools do not outnumber the budget (the CPU goes to the other work).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::dispatcher::thread_pool;
use agentbox::harmonizer::{Harmonizer, PoolHarmonizerStats};
use agentbox::prelude::*;
use agentbox::{BindParams, Fifo, WrappedEnv};

struct Burn;

/// Runs 2 ms CPU-bound events back to back while its switch is on.
struct Burner {
    on: Arc<AtomicBool>,
}

impl Agent for Burner {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        ctx.subscribe(&me).event(|a: &mut Self, ctx, _: &Burn| {
            if !a.on.load(Ordering::Relaxed) {
                return;
            }
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(2) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            let _ = send(&ctx.direct_mbox(), Burn);
        })?;
        Ok(())
    }
}

fn line(p: &PoolHarmonizerStats) -> String {
    let state = match p.state_name() {
        "balanced" => "-",
        other => other,
    };
    let p99 = p
        .latency_p99
        .map_or_else(|| "-".to_owned(), |d| format!("{}us", d.as_micros()));
    format!(
        "{}: {} thr, cpu {:.2}, busy {:.2}, {:<7}, p99 {:>8}",
        p.name, p.current_thread_count, p.last_second_cpu, p.last_second_elapsed, state, p99
    )
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let max = cores.max(2);
    let a = thread_pool::Builder::new()
        .name("a")
        .thread_limits(1, 1, max)
        .build()
        .expect("pool a");
    let b = thread_pool::Builder::new()
        .name("b")
        .thread_limits(1, 1, max)
        .build()
        .expect("pool b");
    let harmonizer = Harmonizer::builder()
        .dispatcher(&a)
        .dispatcher(&b)
        .build()
        .expect("harmonizer");
    println!(
        "{cores} cores; pools a and b: 1..={max} threads, default 1; budget {} cores",
        harmonizer.stats().total_cores
    );

    let on_a = Arc::new(AtomicBool::new(true));
    let on_b = Arc::new(AtomicBool::new(false));
    let wrapped = WrappedEnv::new(|_| {}).expect("environment");
    let (mut to_a, mut to_b) = (Vec::new(), Vec::new());
    wrapped
        .environment()
        .introduce_coop(|coop| {
            for _ in 0..max + 1 {
                let on = on_a.clone();
                let bind = a.binder_with(BindParams::new().fifo(Fifo::Individual));
                to_a.push(coop.add_agent_with_binder(Burner { on }, bind));
                let on = on_b.clone();
                let bind = b.binder_with(BindParams::new().fifo(Fifo::Individual));
                to_b.push(coop.add_agent_with_binder(Burner { on }, bind));
            }
        })
        .expect("coop");
    for m in &to_a {
        send(m, Burn).expect("send");
    }
    let start = Instant::now();
    for second in 1..=9 {
        std::thread::sleep(Duration::from_secs(1));
        if second == 4 {
            println!("-- the load moves from a to b --");
            on_a.store(false, Ordering::Relaxed);
            on_b.store(true, Ordering::Relaxed);
            for m in &to_b {
                send(m, Burn).expect("send");
            }
        }
        let st = harmonizer.stats();
        println!(
            "t={:>4.1}s budget {:>5.2} | {} | {}",
            start.elapsed().as_secs_f64(),
            st.budget,
            line(&st.pools[0]),
            line(&st.pools[1])
        );
    }
    on_b.store(false, Ordering::Relaxed);
    for p in harmonizer.stats().pools {
        let ops: Vec<String> = p
            .counters
            .named()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        println!("{}: {}", p.name, ops.join(" "));
    }
    drop(harmonizer);
    wrapped.stop_then_join().expect("stop");
}
