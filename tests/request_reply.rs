//! Request/reply: the one reply, timeouts, unanswered requests, second replies.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use agentbox::prelude::*;
use agentbox::request::{request_reply, ReplyError, Request, RequestError};
use common::{within_patience, PATIENCE};

struct Ask(u32);

static TIMED_OUT: AtomicBool = AtomicBool::new(false);

/// Answers `Ask(0)` twice (the second reply must fail), never answers `Ask(1)`, answers
/// `Ask(2)` once the requester has timed out.
struct Server {
    second_reply: Arc<Mutex<Option<Result<(), ReplyError>>>>,
}

impl Agent for Server {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let m = ctx.environment().named_mbox("server");
        ctx.subscribe(&m).event(
            |a: &mut Self, _, r: &Request<Ask, String>| match r.get().0 {
                0 => {
                    r.reply("first".into()).unwrap();
                    *a.second_reply.lock() = Some(r.reply("second".into()));
                }
                1 => {} // dropped unanswered when the handler returns
                _ => {
                    // Replies only after the requester has given up.
                    let deadline = Instant::now() + PATIENCE;
                    while !TIMED_OUT.load(Ordering::SeqCst) && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                    *a.second_reply.lock() = Some(r.reply("late".into()));
                }
            },
        )?;
        Ok(())
    }
}

fn with_server(
    f: impl FnOnce(&Environment, &Mbox) + Send + 'static,
) -> Option<Result<(), ReplyError>> {
    let second = Arc::new(Mutex::new(None));
    let s = second.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Server { second_reply: s });
            })
            .unwrap();
            f(env, &env.named_mbox("server"));
            env.stop();
        })
        .unwrap();
    });
    let r = *second.lock();
    r
}

#[test]
fn the_first_reply_is_returned_and_a_second_is_an_error() {
    let second = with_server(|_, m| {
        assert_eq!(
            request_reply::<Ask, String>(m, PATIENCE, Ask(0)),
            Ok("first".to_owned())
        );
    });
    assert_eq!(second, Some(Err(ReplyError::AlreadyReplied)));
}

#[test]
fn an_unanswered_request_fails_fast_not_at_the_timeout() {
    with_server(|_, m| {
        let start = Instant::now();
        assert_eq!(
            request_reply::<Ask, String>(m, Duration::from_secs(3600), Ask(1)),
            Err(RequestError::Dropped)
        );
        assert!(start.elapsed() < PATIENCE);
    });
}

#[test]
fn a_request_nobody_subscribes_to_fails_fast() {
    with_server(|env, _| {
        let nobody = env.create_mbox();
        assert_eq!(
            request_reply::<Ask, String>(&nobody, Duration::from_secs(3600), Ask(0)),
            Err(RequestError::Dropped)
        );
    });
}

#[test]
fn a_slow_reply_times_out_and_the_late_reply_finds_the_requester_gone() {
    let late = with_server(|_, m| {
        assert_eq!(
            request_reply::<Ask, String>(m, Duration::from_millis(10), Ask(2)),
            Err(RequestError::Timeout)
        );
        TIMED_OUT.store(true, Ordering::SeqCst);
    });
    assert_eq!(late, Some(Err(ReplyError::RequesterGone)));
}

#[test]
fn a_request_to_a_refusing_mbox_is_a_send_error() {
    with_server(|env, _| {
        let chain = env.create_mchain(agentbox::mchain::MChainParams::unbounded());
        chain.close(agentbox::mchain::CloseMode::DropContent);
        assert!(matches!(
            request_reply::<Ask, String>(&chain.as_mbox(), PATIENCE, Ask(0)),
            Err(RequestError::Send(agentbox::SendError::ChainClosed { .. }))
        ));
    });
}

// ---- replying later, or from another agent ----

#[derive(Clone)]
struct Job(u32);
/// Tells the manager to answer the requests it kept.
struct Flush;

/// Keeps the reply handles of `Job`s with odd numbers and answers them on `Flush`;
/// forwards even ones to the worker; drops the handle of `Job(13)` unanswered.
struct Manager {
    kept: Vec<(u32, agentbox::request::ReplyHandle<u32>)>,
    worker: Mbox,
    second_take: Arc<Mutex<Option<ReplyError>>>,
}

impl Agent for Manager {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let m = ctx.environment().named_mbox("manager");
        ctx.subscribe(&m)
            .event(|a: &mut Self, _, r: &Request<Job, u32>| {
                let n = r.get().0;
                if n.is_multiple_of(2) {
                    r.forward(&a.worker).unwrap();
                    return;
                }
                let handle = r.take_reply_handle().unwrap();
                *a.second_take.lock() = r.take_reply_handle().err();
                if n == 13 {
                    drop(handle); // unanswered: the requester fails at once
                } else {
                    a.kept.push((n, handle));
                }
            })?;
        ctx.subscribe(&m).event(|a: &mut Self, _, _: &Flush| {
            for (n, h) in a.kept.drain(..) {
                h.reply(n * 10).unwrap();
            }
        })?;
        Ok(())
    }
}

/// Answers forwarded jobs with n + 1000.
struct Worker;
impl Agent for Worker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let m = ctx.environment().named_mbox("worker");
        ctx.subscribe(&m)
            .event(|_: &mut Self, _, r: &Request<Job, u32>| {
                r.reply(r.get().0 + 1000).unwrap();
            })?;
        Ok(())
    }
}

#[test]
fn a_request_can_be_answered_later_forwarded_or_dropped_by_its_handle() {
    within_patience(|| {
        let second_take = Arc::new(Mutex::new(None));
        let st = second_take.clone();
        Environment::launch(move |env| {
            let pool = agentbox::dispatcher::active_obj::Builder::new()
                .build()
                .unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(pool.binder());
                coop.add_agent(Manager {
                    kept: Vec::new(),
                    worker: env.named_mbox("worker"),
                    second_take: st,
                });
                coop.add_agent(Worker);
            })
            .unwrap();
            let manager = env.named_mbox("manager");
            // Forwarded: the worker answers.
            assert_eq!(
                request_reply::<Job, u32>(&manager, PATIENCE, Job(4)),
                Ok(1004)
            );
            // The handle dropped unanswered: Dropped, not a timeout.
            assert_eq!(
                request_reply::<Job, u32>(&manager, PATIENCE, Job(13)),
                Err(RequestError::Dropped)
            );
            // Kept: answered only after Flush, from another thread's request.
            let m = manager.clone();
            let waiting =
                std::thread::spawn(move || request_reply::<Job, u32>(&m, PATIENCE, Job(7)));
            // Flush until the answer comes (a flush that arrives before the request
            // answers nothing; the request is answered by the first flush after it).
            let answer = loop {
                send(&manager, Flush).unwrap();
                if waiting.is_finished() {
                    break waiting.join().unwrap();
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            assert_eq!(answer, Ok(70));
            env.stop();
        })
        .unwrap();
        assert_eq!(*second_take.lock(), Some(ReplyError::AlreadyReplied));
    });
}
