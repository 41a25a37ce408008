//! The behavioural suite on the priority dispatchers, plus their own rules: exact handling
//! orders on `strictly_ordered` and `quoted_round_robin`, distinct threads on
//! `one_per_prio`.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::dispatcher::{one_per_prio, quoted_round_robin, strictly_ordered};
use agentbox::prelude::*;
use agentbox::Binder;
use common::{within_patience, Log, Script};
use parking_lot::Mutex;

dispatcher_suite!(strictly_ordered_suite, |_env| {
    agentbox::dispatcher::strictly_ordered::Builder::new()
        .build()
        .unwrap()
        .binder()
});
dispatcher_suite!(quoted_round_robin_suite, |_env| {
    agentbox::dispatcher::quoted_round_robin::Builder::new()
        .default_quota(3)
        .build()
        .unwrap()
        .binder()
});
dispatcher_suite!(one_per_prio_suite, |_env| {
    agentbox::dispatcher::one_per_prio::Builder::new()
        .build()
        .unwrap()
        .binder()
});

/// Runs `sends` (agent priority, number) to agents of those priorities while the only
/// thread is held by a gate agent of priority `gate_prio`; returns the handling order.
fn gated_order(binder: Binder, gate_prio: Priority, sends: &[(Priority, u32)]) -> Vec<String> {
    let sends = sends.to_vec();
    within_patience(move || {
        let log = Log::new();
        let l = log.clone();
        let expected = sends.len();
        Environment::launch(move |env| {
            let running = Arc::new(AtomicBool::new(false));
            let release = Arc::new(AtomicBool::new(false));
            let started = Arc::new(AtomicUsize::new(0));
            let (r, rel) = (running.clone(), release.clone());
            let mut prios: Vec<Priority> = sends.iter().map(|(p, _)| *p).collect();
            prios.sort();
            prios.dedup();
            let (gate, targets) = env
                .introduce_coop(|coop| {
                    coop.set_binder(binder);
                    let gate = coop.add_agent(Script::new(&Log::new()).priority(gate_prio).setup(
                        move |_, ctx| {
                            ctx.subscribe_self()
                                .event(move |_: &mut Script, _, _: &u8| {
                                    r.store(true, Ordering::SeqCst);
                                    while !rel.load(Ordering::SeqCst) {
                                        std::thread::yield_now();
                                    }
                                })?;
                            Ok(())
                        },
                    ));
                    let mut targets = HashMap::new();
                    for p in prios {
                        let (l, st) = (l.clone(), started.clone());
                        let mbox = coop.add_agent(
                            Script::new(&l)
                                .priority(p)
                                .setup(move |_, ctx| {
                                    ctx.subscribe_self().event(
                                        move |s: &mut Script, _, n: &u32| {
                                            s.log.push(format!("p{}:{n}", p.index()));
                                        },
                                    )?;
                                    Ok(())
                                })
                                .start(move |_, _| {
                                    st.fetch_add(1, Ordering::SeqCst);
                                }),
                        );
                        targets.insert(p, mbox);
                    }
                    (gate, targets)
                })
                .unwrap();
            while started.load(Ordering::SeqCst) < targets.len() {
                std::thread::yield_now();
            }
            send(&gate, 0u8).unwrap();
            while !running.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            for (p, n) in &sends {
                send(&targets[p], *n).unwrap();
            }
            release.store(true, Ordering::SeqCst);
            l.wait_for(expected);
            env.stop();
        })
        .unwrap();
        log.get()
    })
}

#[test]
fn strictly_ordered_runs_higher_priorities_first_and_fifo_within_one() {
    let sends: Vec<(Priority, u32)> = (0..16u32)
        .map(|i| (Priority::ALL[(i % 8) as usize], i))
        .collect();
    let order = gated_order(
        strictly_ordered::Builder::new().build().unwrap().binder(),
        Priority::P0,
        &sends,
    );
    let expected: Vec<String> = (0..8)
        .rev()
        .flat_map(|p| [format!("p{p}:{p}"), format!("p{p}:{}", p + 8)])
        .collect();
    assert_eq!(order, expected);
}

#[test]
fn quoted_round_robin_sweeps_from_p7_down_taking_each_quota() {
    let disp = quoted_round_robin::Builder::new()
        .quota(Priority::P7, 2)
        .quota(Priority::P3, 1)
        .quota(Priority::P0, 3)
        .build()
        .unwrap();
    let mut sends = Vec::new();
    for n in 1..=4 {
        sends.push((Priority::P7, n));
        sends.push((Priority::P3, n));
        sends.push((Priority::P0, n));
    }
    // The gate (P1, quota 1) holds the thread in the middle of a sweep: that sweep goes on
    // with P0 only; arrivals at P7 and P3 wait for the next sweep.
    let order = gated_order(disp.binder(), Priority::P1, &sends);
    assert_eq!(
        order,
        [
            "p0:1", "p0:2", "p0:3", // rest of the gate's sweep
            "p7:1", "p7:2", "p3:1", "p0:4", // sweep 2
            "p7:3", "p7:4", "p3:2", // sweep 3
            "p3:3", // sweep 4
            "p3:4", // sweep 5
        ]
    );
}

#[test]
fn one_per_prio_runs_each_priority_on_a_thread_of_its_own() {
    within_patience(|| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        Environment::launch(move |env| {
            let disp = one_per_prio::Builder::new().name("lane").build().unwrap();
            let done = Arc::new(AtomicUsize::new(0));
            env.introduce_coop(|coop| {
                coop.set_binder(disp.binder());
                for p in Priority::ALL
                    .into_iter()
                    .chain([Priority::P3, Priority::P5])
                {
                    let (s, done) = (s.clone(), done.clone());
                    coop.add_agent(Script::new(&Log::new()).priority(p).start(move |_, ctx| {
                        let t = std::thread::current();
                        s.lock().push((p, t.id(), t.name().map(str::to_owned)));
                        if done.fetch_add(1, Ordering::SeqCst) == 9 {
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    }));
                }
            })
            .unwrap();
        })
        .unwrap();
        let seen = seen.lock();
        assert_eq!(seen.len(), 10);
        let mut thread_of: HashMap<Priority, std::thread::ThreadId> = HashMap::new();
        for (p, id, name) in seen.iter() {
            assert_eq!(
                *thread_of.entry(*p).or_insert(*id),
                *id,
                "one thread per priority"
            );
            assert_eq!(
                name.as_deref(),
                Some(format!("lane-p{}", p.index()).as_str())
            );
        }
        let distinct: std::collections::HashSet<_> = thread_of.values().collect();
        assert_eq!(distinct.len(), 8, "eight priorities, eight threads");
    });
}
