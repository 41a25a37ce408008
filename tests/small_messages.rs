//! Messages from other threads to agents on serial queues. Small ones to an agent's direct
//! mbox wait as their bytes (no allocation), and the worker takes a backlog a burst at a
//! time; these tests hold that nothing a user sees changes: values, types, order per sender
//! and against sends made on the worker, mixed with messages that wait as they are, and
//! limits.

mod common;

use agentbox::dispatcher::{active_obj, one_thread, thread_pool};
use agentbox::prelude::*;
use agentbox::Binder;
use common::{with_env, Log};

/// Logs every message it gets, by type and value.
struct Recorder {
    log: Log,
}

static TARGET: u64 = 41;

impl Agent for Recorder {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        // Counted by limits: every handled message must give its place back, or the
        // later rounds would be dropped (3 rounds of 200, a limit of 300).
        ctx.default_limit_then_drop(300)?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &u64| a.log.push(format!("u64 {v}")))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &(u8, u32)| a.log.push(format!("pair {} {}", v.0, v.1)))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &[u16; 3]| a.log.push(format!("u16s {v:?}")))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &&'static u64| a.log.push(format!("ref {}", **v)))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &f64| a.log.push(format!("f64 {v}")))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &String| a.log.push(format!("string {v}")))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &u128| a.log.push(format!("u128 {v}")))?;
        Ok(())
    }
}

fn each_serial_kind_and_a_pool() -> Vec<(&'static str, Binder)> {
    vec![
        (
            "one_thread",
            one_thread::Builder::new().build().unwrap().binder(),
        ),
        (
            "active_obj",
            active_obj::Builder::new().build().unwrap().binder(),
        ),
        (
            "thread_pool",
            thread_pool::Builder::new()
                .threads(2)
                .build()
                .unwrap()
                .binder(),
        ),
    ]
}

#[test]
fn small_messages_from_another_thread_arrive_as_sent_and_in_order() {
    with_env(|env| {
        for (kind, binder) in each_serial_kind_and_a_pool() {
            let log = Log::new();
            let target = env
                .introduce_coop(|coop| {
                    coop.set_binder(binder);
                    coop.add_agent(Recorder { log: log.clone() })
                })
                .unwrap();
            let mut expected = Vec::new();
            for round in 0..3u32 {
                // Sent from a thread that is no worker: the cross-thread path.
                let sender = {
                    let target = target.clone();
                    std::thread::spawn(move || {
                        let mut sent = Vec::new();
                        for i in 0..200u32 {
                            let n = round * 1000 + i;
                            send(&target, u64::from(n)).unwrap();
                            sent.push(format!("u64 {n}"));
                            match i % 7 {
                                0 => {
                                    send(&target, (n as u8, n)).unwrap();
                                    sent.push(format!("pair {} {n}", n as u8));
                                }
                                1 => {
                                    send(&target, [n as u16, 7, 9]).unwrap();
                                    sent.push(format!("u16s [{}, 7, 9]", n as u16));
                                }
                                2 => {
                                    let r: &'static u64 = &TARGET;
                                    send(&target, r).unwrap();
                                    sent.push("ref 41".to_string());
                                }
                                3 => {
                                    send(&target, f64::from(n) + 0.5).unwrap();
                                    sent.push(format!("f64 {}", f64::from(n) + 0.5));
                                }
                                4 => {
                                    send(&target, format!("s{n}")).unwrap();
                                    sent.push(format!("string s{n}"));
                                }
                                5 => {
                                    send(&target, u128::from(n) << 64).unwrap();
                                    sent.push(format!("u128 {}", u128::from(n) << 64));
                                }
                                _ => {}
                            }
                        }
                        sent
                    })
                };
                expected.extend(sender.join().unwrap());
                log.wait_for(expected.len());
                assert_eq!(log.get(), expected, "{kind}, round {round}");
            }
        }
    });
}

/// Holds its worker until released.
struct Gate {
    blocked: std::sync::mpsc::Sender<()>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}
struct Hold;

impl Agent for Gate {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, _: &Hold| {
            a.blocked.send(()).unwrap();
            a.release.lock().unwrap().recv().unwrap();
        })?;
        Ok(())
    }
}

/// Logs its numbers; at 5 sends `FromB` to `c` (a push on its own worker).
struct B {
    log: Log,
    c: Mbox,
}
struct Num(u32);
struct FromB;

impl Agent for B {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, n: &Num| {
            a.log.push(format!("b {}", n.0));
            if n.0 == 5 {
                send(&a.c, FromB).unwrap();
            }
        })?;
        Ok(())
    }
}

struct C {
    log: Log,
}
struct Late;

impl Agent for C {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, _: &Late| a.log.push("c late"))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, _: &FromB| a.log.push("c from-b"))?;
        Ok(())
    }
}

/// The worker takes a backlog from other threads a burst at a time; a send made on the
/// worker meanwhile still comes after every send from another thread that came before it
/// (`Late` was sent before `FromB`, behind 200 messages the worker had not taken yet).
#[test]
fn a_send_on_the_worker_comes_after_the_whole_backlog_sent_before_it_from_elsewhere() {
    with_env(|env| {
        let log = Log::new();
        let (blocked_tx, blocked_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let (gate, b, c) = env
            .introduce_coop(|coop| {
                let c = coop.add_agent(C { log: log.clone() });
                let b = coop.add_agent(B {
                    log: log.clone(),
                    c: c.clone(),
                });
                let gate = coop.add_agent(Gate {
                    blocked: blocked_tx,
                    release: std::sync::Mutex::new(release_rx),
                });
                (gate, b, c)
            })
            .unwrap();
        send(&gate, Hold).unwrap();
        blocked_rx.recv().unwrap();
        for i in 0..200 {
            send(&b, Num(i)).unwrap();
        }
        send(&c, Late).unwrap();
        release_tx.send(()).unwrap();
        log.wait_for(202);
        let got = log.get();
        let c_saw: Vec<&String> = got.iter().filter(|l| l.starts_with("c ")).collect();
        assert_eq!(c_saw, ["c late", "c from-b"]);
        let b_saw: Vec<String> = got
            .iter()
            .filter(|l| l.starts_with("b "))
            .cloned()
            .collect();
        assert_eq!(
            b_saw,
            (0..200).map(|i| format!("b {i}")).collect::<Vec<_>>()
        );
    });
}
