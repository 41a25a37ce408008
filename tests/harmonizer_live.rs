//! The harmonizer on a real machine: two elastic thread pools, a CPU-bound load that
//! moves from one to the other. The loaded pool gains threads (never above its max), and
//! once the load has moved, the idle pool goes back to its default while the other grows.
//! Only directions and bounds are asserted, each awaited with a generous deadline.
//!
//! The test machine is shared with other builds, so the OS preempts our threads at
//! random; the harmonizer treats a preempted pool as starved (and sheds its extra threads
//! when the pools overbook the budget). To test the thread moves themselves, each pool is
//! wrapped so that it reports its CPU time equal to its busy time (the preemption signal
//! masked); everything else — threads, busy time, ticks on the workers, count changes —
//! is real.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::dispatcher::elastic::{
    ElasticPool, HarmonizerCounters, PoolSample, ThreadLimits, Tick,
};
use agentbox::dispatcher::thread_pool;
use agentbox::harmonizer::Harmonizer;
use agentbox::prelude::*;
use agentbox::{BindParams, Fifo, WrappedEnv};

/// An elastic pool whose threads seem never preempted (CPU time := busy time).
struct NoPreemption(Arc<dyn ElasticPool>);

impl ElasticPool for NoPreemption {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn limits(&self) -> ThreadLimits {
        self.0.limits()
    }
    fn thread_count(&self) -> usize {
        self.0.thread_count()
    }
    fn set_thread_count(&self, n: usize) {
        self.0.set_thread_count(n)
    }
    fn sample(&self) -> PoolSample {
        let mut s = self.0.sample();
        for t in &mut s.threads {
            t.cpu_ns = t.busy_ns;
        }
        s
    }
    fn counters(&self) -> &HarmonizerCounters {
        self.0.counters()
    }
    fn set_tick(&self, tick: Option<Tick>) {
        self.0.set_tick(tick)
    }
    fn run_foreign_slice(&self, deadline: Instant) -> usize {
        self.0.run_foreign_slice(deadline)
    }
    fn set_lend_targets(&self, targets: Vec<Arc<dyn ElasticPool>>) {
        self.0.set_lend_targets(targets)
    }
}

struct Burn;

/// Burns CPU in 1 ms steps while its switch is on.
struct Burner {
    on: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
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
            while start.elapsed() < Duration::from_millis(1) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            a.done.fetch_add(1, Ordering::Relaxed);
            let _ = send(&ctx.direct_mbox(), Burn);
        })?;
        Ok(())
    }
}

fn wait_for(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_loaded_pool_gains_threads_and_the_idle_one_returns_to_its_default() {
    let a = thread_pool::Builder::new()
        .name("a")
        .thread_limits(1, 1, 3)
        .build()
        .unwrap();
    let b = thread_pool::Builder::new()
        .name("b")
        .thread_limits(1, 1, 3)
        .build()
        .unwrap();
    let (ea, eb) = (a.elastic().unwrap(), b.elastic().unwrap());
    let harmonizer = Harmonizer::builder()
        .pool(Arc::new(NoPreemption(ea.clone())))
        .pool(Arc::new(NoPreemption(eb.clone())))
        .cpu_budget(8.0)
        .period(Duration::from_millis(100))
        .build()
        .unwrap();
    let (on_a, on_b) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    let done = Arc::new(AtomicU64::new(0));
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment();
    let (mut on_a_boxes, mut on_b_boxes) = (Vec::new(), Vec::new());
    env.introduce_coop(|coop| {
        for _ in 0..4 {
            let burner = |on: &Arc<AtomicBool>| Burner {
                on: on.clone(),
                done: done.clone(),
            };
            on_a_boxes.push(coop.add_agent_with_binder(
                burner(&on_a),
                a.binder_with(BindParams::new().fifo(Fifo::Individual)),
            ));
            on_b_boxes.push(coop.add_agent_with_binder(
                burner(&on_b),
                b.binder_with(BindParams::new().fifo(Fifo::Individual)),
            ));
        }
    })
    .unwrap();
    for m in &on_a_boxes {
        send(m, Burn).unwrap();
    }
    let limits = |p: &Arc<dyn ElasticPool>| {
        let n = p.thread_count();
        assert!((1..=3).contains(&n), "{} has {n} threads", p.name());
    };

    // Phase 1: the load is on `a`: `a` grows above its default, `b` stays at it.
    wait_for("pool a to gain a thread", Duration::from_secs(60), || {
        limits(&ea);
        limits(&eb);
        ea.thread_count() > 1 && harmonizer.stats().pools[0].current_thread_count > 1
    });
    assert_eq!(eb.thread_count(), 1);
    let st = harmonizer.stats();
    assert!(st.pools[0].counters.increasing_threads_by_needy_state >= 1);
    assert!(
        ea.counters()
            .increasing_threads_by_needy_state
            .load(Ordering::Relaxed)
            >= 1
    );

    // Phase 2: the load moves to `b`: `b` grows, `a` goes back to its default.
    on_a.store(false, Ordering::Relaxed);
    on_b.store(true, Ordering::Relaxed);
    for m in &on_b_boxes {
        send(m, Burn).unwrap();
    }
    wait_for(
        "b to grow and a to return to 1",
        Duration::from_secs(90),
        || {
            limits(&ea);
            limits(&eb);
            // The stats are published at the end of a step: wait for them too.
            let st = harmonizer.stats();
            eb.thread_count() > 1
                && ea.thread_count() == 1
                && st.pools[1].current_thread_count > 1
                && st.pools[0].current_thread_count == 1
        },
    );
    let st = harmonizer.stats();
    assert!(st.pools[0].counters.decreasing_threads_by_hoggish_state >= 1);
    assert!(st.pools[1].counters.increasing_threads_by_needy_state >= 1);
    assert!(st.iterations >= 2);
    assert!(done.load(Ordering::Relaxed) > 0);

    on_b.store(false, Ordering::Relaxed);
    drop(harmonizer);
    wrapped.stop_then_join().unwrap();
}

#[test]
fn a_thread_pool_and_an_adv_thread_pool_share_one_budget_and_idle_ones_shrink_to_min() {
    use agentbox::dispatcher::adv_thread_pool;
    let interactive = thread_pool::Builder::new()
        .name("interactive")
        .thread_limits(1, 2, 3)
        .build()
        .unwrap();
    let batch = adv_thread_pool::Builder::new()
        .name("batch")
        .thread_limits(1, 2, 3)
        .build()
        .unwrap();
    let h = Harmonizer::builder()
        .dispatcher(&interactive)
        .dispatcher(&batch)
        .cpu_budget(4.0)
        .period(Duration::from_secs(3600))
        .build()
        .unwrap();
    // Steps by hand, one simulated second apart: both pools are idle (hoggish), so each
    // step takes one thread from each until its minimum.
    let t0 = h.origin();
    for s in 1..=4 {
        h.harmonize_at(t0 + Duration::from_secs(s));
    }
    let st = h.stats();
    assert_eq!(st.total_cores, 4.0);
    for p in &st.pools {
        // `is_hoggish` is not asserted after the last step: at one thread a pool is hoggish
        // only if that thread was idle for the whole window, and a worker's own wake-ups (at
        // least once a second, to tick) count as busy time on a loaded machine. The counter
        // below is the evidence that the hoggish rule ran.
        assert_eq!(p.current_thread_count, 1, "{p:?}");
        assert_eq!(p.min_thread_count, 1, "{p:?}");
        assert_eq!(p.counters.decreasing_threads_by_hoggish_state, 1);
    }
    assert_eq!(interactive.elastic().unwrap().thread_count(), 1);
    assert_eq!(batch.elastic().unwrap().thread_count(), 1);
}

/// A pool's samples show a thread busy while it runs events back to back on one queue
/// (no other queue waiting, so it never asks for work and never brought its figures up to
/// date: it looked idle, and the harmonizer shrank its pool as hoggish).
#[test]
fn a_thread_that_keeps_one_queue_of_long_events_is_seen_busy() {
    let pool = thread_pool::Builder::new()
        .name("one")
        .thread_limits(1, 1, 1)
        .build()
        .unwrap();
    let e = pool.elastic().unwrap();
    let on = Arc::new(AtomicBool::new(true));
    let done = Arc::new(AtomicU64::new(0));
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let mbox = wrapped
        .environment()
        .introduce_coop(|coop| {
            coop.add_agent_with_binder(
                Burner {
                    on: on.clone(),
                    done: done.clone(),
                },
                pool.binder_with(BindParams::new().fifo(Fifo::Individual)),
            )
        })
        .unwrap();
    send(&mbox, Burn).unwrap();
    wait_for("the burner to run", Duration::from_secs(60), || {
        done.load(Ordering::Relaxed) > 0
    });
    let busy = |s: &PoolSample| s.threads.iter().map(|t| t.busy_ns).sum::<u64>();
    let (s0, t0) = (e.sample(), Instant::now());
    std::thread::sleep(Duration::from_millis(300));
    let (s1, wall) = (e.sample(), t0.elapsed());
    let seen = Duration::from_nanos(busy(&s1) - busy(&s0));
    on.store(false, Ordering::Relaxed);
    // Busy time is wall time not parked: it grows with the wall clock even when the OS
    // preempts the thread.
    assert!(
        seen >= wall / 2,
        "busy {seen:?} in {wall:?} of back-to-back events"
    );
    let cpu = |s: &PoolSample| s.threads.iter().map(|t| t.cpu_ns).sum::<u64>();
    assert!(cpu(&s1) >= cpu(&s0));
    wrapped.stop_then_join().unwrap();
}

struct Nap;

/// Sleeps in its handler (a demand that takes wall time but no CPU), then tells the test.
struct Sleeper {
    started: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
}

impl Agent for Sleeper {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, _: &Nap| {
            a.started.store(true, Ordering::Release);
            std::thread::sleep(Duration::from_millis(300));
            a.done.store(true, Ordering::Release);
        })?;
        Ok(())
    }
}

/// A sample estimates a running demand's CPU time from the wall clock; a demand that
/// waited (here, slept) used less. The thread's own reading, taken once the demand is
/// over, is then below the earlier estimate: a slot's figures must still never go down
/// from one sample to the next (the harmonizer's histories and any reader subtracting
/// two samples rely on it).
#[test]
fn a_slot_s_cpu_and_busy_time_never_go_down_between_samples() {
    let pool = thread_pool::Builder::new()
        .name("napper")
        .thread_limits(1, 1, 1)
        .build()
        .unwrap();
    let e = pool.elastic().unwrap();
    let (started, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let mbox = wrapped
        .environment()
        .introduce_coop(|coop| {
            coop.add_agent_with_binder(
                Sleeper {
                    started: started.clone(),
                    done: done.clone(),
                },
                pool.binder(),
            )
        })
        .unwrap();
    send(&mbox, Nap).unwrap();
    wait_for("the nap to start", Duration::from_secs(60), || {
        started.load(Ordering::Acquire)
    });
    let mut last = e.sample();
    let mut samples = 1;
    let end = Instant::now() + Duration::from_secs(60);
    // Sample through the nap and well after it (the thread parks and reads its clock).
    let mut after_done = None;
    while after_done.is_none_or(|t: Instant| t.elapsed() < Duration::from_millis(200)) {
        assert!(Instant::now() < end, "the nap never ended");
        std::thread::sleep(Duration::from_millis(5));
        let s = e.sample();
        samples += 1;
        for (a, b) in last.threads.iter().zip(&s.threads) {
            assert!(b.cpu_ns >= a.cpu_ns, "cpu went down: {a:?} then {b:?}");
            assert!(b.busy_ns >= a.busy_ns, "busy went down: {a:?} then {b:?}");
        }
        last = s;
        if after_done.is_none() && done.load(Ordering::Acquire) {
            after_done = Some(Instant::now());
        }
    }
    // At least one sample during the nap and one after it (a loaded machine may give few).
    assert!(samples >= 3, "{samples} samples");
    wrapped.stop_then_join().unwrap();
}
