//! Elastic thread pools (`dispatcher::elastic`): the thread count changes while messages
//! stream, without losing, duplicating or reordering a demand; shutdown joins everything;
//! the figures a harmonizer reads; the tick; a shared thread serving another pool.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbox::dispatcher::elastic::ThreadLimits;
use agentbox::dispatcher::{adv_thread_pool, thread_pool};
use agentbox::prelude::*;
use agentbox::{BindParams, Binder, DispatcherHandle, Fifo};
use common::{within_patience, PATIENCE};

dispatcher_suite!(elastic_thread_pool, |_env| {
    agentbox::dispatcher::thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .build()
        .expect("build thread_pool")
        .binder()
});

dispatcher_suite!(elastic_thread_pool_individual, |_env| {
    agentbox::dispatcher::thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .max_demands_at_once(1)
        .build()
        .expect("build thread_pool")
        .binder_with(agentbox::BindParams::new().fifo(agentbox::Fifo::Individual))
});

dispatcher_suite!(elastic_adv_thread_pool, |_env| {
    agentbox::dispatcher::adv_thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .build()
        .expect("build adv_thread_pool")
        .binder()
});

/// Waits (bounded) for a condition; false if it never held.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Checks that its `u32`s arrive as 0, 1, 2, …; counts them; the last one stops the coop.
struct InOrder {
    next: u32,
    seen: Arc<AtomicU64>,
    total: u64,
    out_of_order: Arc<AtomicUsize>,
    /// Handlers wait while this is set.
    hold: Arc<AtomicBool>,
}

impl Agent for InOrder {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut InOrder, ctx, n: &u32| {
                while a.hold.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_micros(200));
                }
                if *n != a.next {
                    a.out_of_order.fetch_add(1, Ordering::SeqCst);
                }
                a.next = n + 1;
                if a.seen.fetch_add(1, Ordering::SeqCst) + 1 == a.total {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
}

struct Run {
    seen: Arc<AtomicU64>,
    out_of_order: Arc<AtomicUsize>,
    hold: Arc<AtomicBool>,
}

/// `agents` agents on `binder`, `per_agent` messages each, sent while `between` runs
/// every `every` messages (it changes the thread count).
fn stream(
    env: &Environment,
    binder: Binder,
    agents: usize,
    per_agent: u32,
    every: u32,
    run: &Run,
    mut between: impl FnMut(u32),
) {
    let total = agents as u64 * u64::from(per_agent);
    let mboxes = env
        .introduce_coop(|coop| {
            coop.set_binder(binder);
            (0..agents)
                .map(|_| {
                    coop.add_agent(InOrder {
                        next: 0,
                        seen: run.seen.clone(),
                        total,
                        out_of_order: run.out_of_order.clone(),
                        hold: run.hold.clone(),
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap();
    for n in 0..per_agent {
        for m in &mboxes {
            send(m, n).unwrap();
        }
        if n % every == 0 {
            between(n);
        }
    }
}

fn new_run() -> Run {
    Run {
        seen: Arc::new(AtomicU64::new(0)),
        out_of_order: Arc::new(AtomicUsize::new(0)),
        hold: Arc::new(AtomicBool::new(false)),
    }
}

fn grow_and_shrink(pool: DispatcherHandle, binder: Binder) {
    let elastic = pool.elastic().expect("elastic");
    let run = new_run();
    let (seen, ooo) = (run.seen.clone(), run.out_of_order.clone());
    let counts = [4, 1, 3, 1, 2, 4, 1];
    let e = elastic.clone();
    Environment::launch(move |env| {
        stream(env, binder, 8, 2000, 100, &run, |n| {
            let c = counts[(n / 100) as usize % counts.len()];
            e.set_thread_count(c);
            assert_eq!(e.thread_count(), c);
        });
    })
    .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 8 * 2000, "every message once");
    assert_eq!(ooo.load(Ordering::SeqCst), 0, "per-agent order kept");
    // A thread adds its events when it next asks for work: the last may lag a little.
    assert!(eventually(|| elastic
        .sample()
        .threads
        .iter()
        .map(|t| t.events)
        .sum::<u64>()
        >= 8 * 2000));
    assert!(elastic.sample().latency.count() > 0);
    drop(pool);
}

#[test]
fn thread_pool_grows_and_shrinks_under_a_stream_without_losing_or_reordering() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(1, 2, 4)
            .max_demands_at_once(3)
            .build()
            .unwrap();
        let binder = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
        grow_and_shrink(pool, binder);
    });
}

#[test]
fn thread_pool_cooperation_fifo_keeps_order_across_count_changes() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(1, 2, 4)
            .build()
            .unwrap();
        let binder = pool.binder();
        grow_and_shrink(pool, binder);
    });
}

#[test]
fn adv_thread_pool_grows_and_shrinks_under_a_stream_without_losing_or_reordering() {
    within_patience(|| {
        let pool = adv_thread_pool::Builder::new()
            .thread_limits(1, 2, 4)
            .build()
            .unwrap();
        let binder = pool.binder();
        grow_and_shrink(pool, binder);
    });
}

#[test]
fn counts_are_clamped_and_new_threads_start_at_once() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(2, 2, 5)
            .build()
            .unwrap();
        let e = pool.elastic().unwrap();
        assert_eq!(e.limits(), ThreadLimits::new(2, 2, 5));
        assert_eq!(e.sample().running_threads, 2);
        e.set_thread_count(100);
        assert_eq!(e.thread_count(), 5);
        assert_eq!(e.sample().running_threads, 5, "started at once");
        assert_eq!(e.sample().threads.iter().filter(|t| t.running).count(), 5);
        e.set_thread_count(0);
        assert_eq!(e.thread_count(), 2);
        // Idle threads are woken and stop.
        assert!(eventually(|| e.sample().running_threads == 2));
    });
}

#[test]
fn fixed_pools_are_not_elastic() {
    let pool = thread_pool::Builder::new().threads(2).build().unwrap();
    assert!(pool.elastic().is_none());
    let pool = adv_thread_pool::Builder::new().threads(2).build().unwrap();
    assert!(pool.elastic().is_none());
    let pool = thread_pool::Builder::new()
        .thread_limits(1, 2, 3)
        .threads(2)
        .build()
        .unwrap();
    assert!(
        pool.elastic().is_none(),
        "threads(n) after limits fixes the count"
    );
}

#[test]
fn shrink_to_min_while_every_thread_is_busy() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(1, 4, 4)
            .max_demands_at_once(1)
            .build()
            .unwrap();
        let e = pool.elastic().unwrap();
        let binder = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
        let run = new_run();
        run.hold.store(true, Ordering::SeqCst);
        let (seen, ooo, hold) = (run.seen.clone(), run.out_of_order.clone(), run.hold.clone());
        let e2 = e.clone();
        Environment::launch(move |env| {
            stream(env, binder, 4, 50, 1000, &run, |_| {});
            // Four handlers are held, one per thread: every thread is busy.
            assert!(eventually(|| e2
                .sample()
                .threads
                .iter()
                .all(|t| !t.running || t.busy_ns > 0)));
            e2.set_thread_count(1);
            assert_eq!(e2.thread_count(), 1);
            // Nobody stops mid-event: all four still run.
            assert_eq!(e2.sample().running_threads, 4);
            hold.store(false, Ordering::SeqCst);
            // They stop when they next ask for work, one is left.
            assert!(eventually(|| e2.sample().running_threads == 1));
        })
        .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 4 * 50);
        assert_eq!(ooo.load(Ordering::SeqCst), 0);
        assert_eq!(e.sample().running_threads, 1);
    });
}

#[test]
fn shutdown_while_shrinking_joins_every_thread() {
    within_patience(|| {
        for _ in 0..20 {
            let pool = thread_pool::Builder::new()
                .thread_limits(1, 4, 4)
                .build()
                .unwrap();
            let e = pool.elastic().unwrap();
            let binder = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
            let run = new_run();
            let seen = run.seen.clone();
            Environment::launch(move |env| {
                stream(env, binder, 4, 200, 50, &run, |_| {
                    e.set_thread_count(1);
                });
            })
            .unwrap();
            // The environment ends with the last message; the pool goes at once, while
            // its threads may still be stopping.
            assert_eq!(seen.load(Ordering::SeqCst), 4 * 200);
            drop(pool);
        }
        // And a pool dropped right after a shrink, without an environment.
        for _ in 0..20 {
            let pool = adv_thread_pool::Builder::new()
                .thread_limits(1, 4, 4)
                .build()
                .unwrap();
            let e = pool.elastic().unwrap();
            e.set_thread_count(1);
            drop(pool);
            // The handle outlives the pool harmlessly.
            e.set_thread_count(4);
            assert_eq!(
                e.run_foreign_slice(Instant::now() + Duration::from_millis(5)),
                0
            );
        }
    });
}

#[test]
fn the_tick_runs_on_workers_that_ask_for_work() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(1, 2, 2)
            .build()
            .unwrap();
        let e = pool.elastic().unwrap();
        let ticks = Arc::new(AtomicU64::new(0));
        let t = ticks.clone();
        e.set_tick(Some(Arc::new(move || {
            t.fetch_add(1, Ordering::SeqCst);
        })));
        let binder = pool.binder();
        let run = new_run();
        Environment::launch(move |env| {
            stream(env, binder, 2, 100, 1000, &run, |_| {});
        })
        .unwrap();
        assert!(ticks.load(Ordering::SeqCst) > 0);
        e.set_tick(None);
        // A tick a worker cloned just before the removal may still run once: let it.
        std::thread::sleep(Duration::from_millis(300));
        let before = ticks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(ticks.load(Ordering::SeqCst), before, "removed");
    });
}

#[test]
fn counters_bumped_by_a_harmonizer_show_in_the_pools_figures() {
    let pool = thread_pool::Builder::new()
        .thread_limits(1, 1, 2)
        .build()
        .unwrap();
    let e = pool.elastic().unwrap();
    e.counters()
        .increasing_threads_by_needy_state
        .fetch_add(2, Ordering::Relaxed);
    e.counters().is_needy.store(true, Ordering::Relaxed);
    let again = pool.elastic().unwrap();
    let c = again.counters().snapshot();
    assert_eq!(c.increasing_threads_by_needy_state, 2);
    assert!(c.is_needy);
}

/// Blocks its thread until `release` is set, then counts `u32`s.
struct Blocker {
    entered: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

impl Agent for Blocker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Blocker, _ctx, _: &()| {
                a.entered.store(true, Ordering::SeqCst);
                while !a.release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_micros(500));
                }
            })?;
        Ok(())
    }
}

#[test]
fn a_shared_thread_serves_a_pool_whose_threads_are_all_blocked() {
    within_patience(|| {
        // `lender` has no work of its own and a shared thread; `busy` has one thread,
        // blocked in a handler until the test ends.
        let lender = thread_pool::Builder::new()
            .limits(ThreadLimits {
                has_shared_thread: true,
                ..ThreadLimits::new(1, 1, 1)
            })
            .build()
            .unwrap();
        let busy = thread_pool::Builder::new()
            .thread_limits(1, 1, 1)
            .build()
            .unwrap();
        let busy_e = busy.elastic().unwrap();
        let (lender_e, target) = (lender.elastic().unwrap(), busy_e.clone());
        let entered = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let run = new_run();
        let (seen, ooo) = (run.seen.clone(), run.out_of_order.clone());
        let (en, re) = (entered.clone(), release.clone());
        let binder = busy.binder_with(BindParams::new().fifo(Fifo::Individual));
        let b2 = binder.clone();
        let progress = Arc::new(Mutex::new(0u64));
        let p = progress.clone();
        Environment::launch(move |env| {
            let blocker = env
                .introduce_coop(|coop| {
                    coop.set_binder(b2);
                    coop.add_agent(Blocker {
                        entered: en.clone(),
                        release: re.clone(),
                    })
                })
                .unwrap();
            send(&blocker, ()).unwrap();
            assert!(eventually(|| en.load(Ordering::SeqCst)));
            // Lent only now, so that the blocker is on `busy`'s own thread.
            lender_e.set_lend_targets(vec![target]);
            // Every thread of `busy` is blocked now: only the lender's shared thread
            // can run these.
            let seen = run.seen.clone();
            stream(env, binder, 2, 100, 1000, &run, |_| {});
            let done = eventually(|| seen.load(Ordering::SeqCst) == 200);
            *p.lock().unwrap() = seen.load(Ordering::SeqCst);
            re.store(true, Ordering::SeqCst);
            assert!(done, "the shared thread ran the blocked pool's demands");
            env.stop();
        })
        .unwrap();
        assert_eq!(*progress.lock().unwrap(), 200);
        assert_eq!(seen.load(Ordering::SeqCst), 200);
        assert_eq!(ooo.load(Ordering::SeqCst), 0);
        let s = busy_e.sample();
        assert!(s.foreign_events >= 200, "{s:?}");
        assert!(lender.elastic().unwrap().sample().lent_busy_ns > 0);
    });
}

#[test]
fn concurrent_count_changes_settle_on_the_last_one() {
    within_patience(|| {
        let pool = thread_pool::Builder::new()
            .thread_limits(1, 2, 6)
            .build()
            .unwrap();
        let e = pool.elastic().unwrap();
        for round in 0..20 {
            let changers: Vec<_> = (0..3)
                .map(|k| {
                    let e = e.clone();
                    std::thread::spawn(move || {
                        for i in 0..50 {
                            e.set_thread_count((i * (k + 1) + round) % 7);
                        }
                    })
                })
                .collect();
            for c in changers {
                c.join().unwrap();
            }
            let last = 1 + round % 6;
            e.set_thread_count(last);
            assert!(
                eventually(|| e.sample().running_threads == last),
                "round {round}: {} running, {last} asked",
                e.sample().running_threads
            );
            assert_eq!(
                e.sample().threads.iter().filter(|t| t.running).count(),
                last
            );
        }
    });
}
