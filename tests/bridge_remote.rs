//! Remote mboxes (`agentbox::bridge::RemoteMbox`): `send`, `send_mutable` and
//! `request_reply` on an `Mbox` handle reach an mbox exposed on another node; a request
//! fails at once, with a typed error, when the other node has no endpoint, drops it
//! unanswered, or is lost; types that cannot cross are refused with typed errors.

mod interconnect_support;

use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use agentbox::actors::*;
use agentbox::bridge::{Endpoint, RemoteMbox, RemoteMboxError};
use agentbox::prelude::*;
use agentbox::request::{request_reply, ReplyHandle, Request, RequestError};
use agentbox::SendError;
use interconnect_support::{cluster, next, NoCodec, Ping, Pong, Seq, PATIENCE};
use parking_lot::Mutex;

/// A timeout far longer than the test's own bound: an answer must come from the rules, not
/// from the timeout.
const LONG: Duration = Duration::from_secs(3600);

fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the test did not finish in time")
}

/// Logs the `Seq` numbers it gets, with its tag.
struct SeqSink {
    from: Mbox,
    tag: u8,
    tx: Sender<(u8, u64)>,
}
impl Agent for SeqSink {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|a: &mut Self, _, s: &Seq| {
                assert!(s.body_ok());
                let _ = a.tx.send((a.tag, s.n));
            })?;
        Ok(())
    }
}

#[test]
fn sends_through_a_remote_mbox_reach_every_subscriber_on_the_other_node_in_order() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s);
            let jobs = env.create_mbox();
            let (tx, rx) = mpsc::channel();
            env.introduce_coop(|coop| {
                for tag in 0..2 {
                    coop.add_agent(SeqSink {
                        from: jobs.clone(),
                        tag,
                        tx: tx.clone(),
                    });
                }
            })
            .unwrap();
            // By a service id of node 2.
            let service = ActorId::service(2, b"jobs").unwrap();
            let _exposed = Endpoint::new(&jobs)
                .event::<Seq>()
                .expose_as(&nodes[1].system, service)
                .unwrap();
            let remote = RemoteMbox::new(&nodes[0].system, service)
                .event::<Seq>()
                .build()
                .unwrap();
            const N: u64 = 300;
            for n in 0..N {
                send(&remote, Seq::new(0, n, 40)).unwrap();
            }
            let mut next_of = [0u64; 2];
            for _ in 0..2 * N {
                let (tag, n) = next(&rx, "a Seq");
                assert_eq!(n, next_of[tag as usize], "subscriber {tag} out of order");
                next_of[tag as usize] += 1;
            }
            assert_eq!(next_of, [N, N]);
            env.stop();
        })
        .unwrap();
    });
}

/// Answers `Request<Ping, Pong>` with `Pong(n + 1)`; keeps `Ping(0)`'s reply handle unanswered
/// (in `held`), and drops `Ping(1)` unanswered.
struct Server {
    from: Mbox,
    held: Arc<Mutex<Vec<ReplyHandle<Pong>>>>,
    asked: Sender<u64>,
}
impl Agent for Server {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|a: &mut Self, _, r: &Request<Ping, Pong>| {
                let _ = a.asked.send(r.get().0);
                match r.get().0 {
                    0 => a.held.lock().push(r.take_reply_handle().unwrap()),
                    1 => {}
                    n => r.reply(Pong(n + 1)).unwrap(),
                }
            })?;
        Ok(())
    }
}

#[test]
fn request_reply_against_a_remote_mbox_and_its_fast_failures() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| {
                s.lost_connection_timeout(Duration::from_secs(2))
            });
            let service = env.create_mbox();
            let held = Arc::new(Mutex::new(Vec::new()));
            let (asked_tx, asked) = mpsc::channel();
            let h = held.clone();
            let s = service.clone();
            env.introduce_coop(move |coop| {
                coop.add_agent(Server {
                    from: s,
                    held: h,
                    asked: asked_tx,
                })
            })
            .unwrap();
            let exposed = Endpoint::new(&service)
                .request::<Ping, Pong>()
                .expose(&nodes[1].system)
                .unwrap();
            let remote = RemoteMbox::new(&nodes[0].system, exposed.id())
                .request::<Ping, Pong>()
                .build()
                .unwrap();
            // Answered, and each answer id leaves the session it subscribed to.
            for n in 0..20 {
                assert_eq!(
                    request_reply::<Ping, Pong>(&remote, LONG, Ping(41 + n)),
                    Ok(Pong(42 + n))
                );
            }
            interconnect_support::wait_until("the answer ids' subscriptions end", || {
                nodes[0]
                    .ic
                    .session_stats(2)
                    .is_some_and(|s| s.subscribers == 0)
            });
            // Dropped unanswered on node 2: fails at once.
            assert_eq!(
                request_reply::<Ping, Pong>(&remote, LONG, Ping(1)),
                Err(RequestError::Dropped)
            );
            // No endpoint on node 2 under that id.
            let gone = exposed.id();
            drop(exposed);
            let to_gone = RemoteMbox::new(&nodes[0].system, gone)
                .request::<Ping, Pong>()
                .build()
                .unwrap();
            assert_eq!(
                request_reply::<Ping, Pong>(&to_gone, LONG, Ping(5)),
                Err(RequestError::Undelivered)
            );
            // Node 2 is lost while it holds the request.
            let exposed = Endpoint::new(&service)
                .request::<Ping, Pong>()
                .expose(&nodes[1].system)
                .unwrap();
            let remote = RemoteMbox::new(&nodes[0].system, exposed.id())
                .request::<Ping, Pong>()
                .build()
                .unwrap();
            let ic2 = nodes[1].ic.clone();
            std::thread::spawn(move || {
                // Once node 2 holds the request, it goes away.
                while asked.recv_timeout(PATIENCE) != Ok(0) {}
                ic2.stop();
            });
            assert_eq!(
                request_reply::<Ping, Pong>(&remote, LONG, Ping(0)),
                Err(RequestError::NodeDisconnected { node: 2 })
            );
            held.lock().clear();
            env.stop();
        })
        .unwrap();
    });
}

/// Takes `Mutable<Ping>` on its direct mbox and reports the value.
struct Taker(Sender<u64>);
impl Agent for Taker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event_mutable(|a: &mut Self, _, p: Ping| {
                let _ = a.0.send(p.0);
            })?;
        Ok(())
    }
}

#[test]
fn a_mutable_message_moves_to_a_remote_single_consumer_mbox() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s);
            let (tx, rx) = mpsc::channel();
            let direct = env
                .introduce_coop(|coop| coop.add_agent(Taker(tx)))
                .unwrap();
            let exposed = Endpoint::new(&direct)
                .event_mutable::<Ping>()
                .expose(&nodes[1].system)
                .unwrap();
            let remote = RemoteMbox::new(&nodes[0].system, exposed.id())
                .event_mutable::<Ping>()
                .build()
                .unwrap();
            send_mutable(&remote, Ping(8)).unwrap();
            assert_eq!(next(&rx, "the moved ping"), 8);
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn types_that_cannot_cross_are_typed_errors() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s);
            let target = ActorId::new(2, 1, 0);
            assert_eq!(
                RemoteMbox::new(&nodes[0].system, target)
                    .event::<NoCodec>()
                    .build()
                    .unwrap_err(),
                RemoteMboxError::NoCodec {
                    type_name: std::any::type_name::<NoCodec>(),
                    event_type: NoCodec::EVENT_TYPE
                }
            );
            assert_eq!(
                RemoteMbox::new(&nodes[0].system, ActorId::default())
                    .event::<Ping>()
                    .build()
                    .unwrap_err(),
                RemoteMboxError::EmptyTarget
            );
            let remote = RemoteMbox::new(&nodes[0].system, target)
                .event::<Ping>()
                .build()
                .unwrap();
            assert!(matches!(
                send(&remote, Pong(1)),
                Err(SendError::NotSerializable { .. })
            ));
            assert!(matches!(
                send_mutable(&remote, Ping(1)),
                Err(SendError::NotSerializable { .. })
            ));
            env.stop();
        })
        .unwrap();
    });
}

/// The reply handles a [`Server`] holds.
type Held = Arc<Mutex<Vec<ReplyHandle<Pong>>>>;

/// A server of `Request<Ping, Pong>` on `service`, exposed on `system`, with its held
/// reply handles and the numbers it was asked.
fn serve(
    env: &Environment,
    system: &ActorSystem,
    service: &Mbox,
) -> (agentbox::bridge::Exposed, Held, mpsc::Receiver<u64>) {
    let held = Arc::new(Mutex::new(Vec::new()));
    let (asked_tx, asked) = mpsc::channel();
    let (h, s) = (held.clone(), service.clone());
    env.introduce_coop(move |coop| {
        coop.add_agent(Server {
            from: s,
            held: h,
            asked: asked_tx,
        })
    })
    .unwrap();
    let exposed = Endpoint::new(service)
        .request::<Ping, Pong>()
        .expose(system)
        .unwrap();
    (exposed, held, asked)
}

/// Ids registered on a system's first pool (endpoints and answer ids included).
fn ids(system: &ActorSystem) -> usize {
    system.pool_stats(0).unwrap().actors
}

/// Rule: a request through a remote mbox whose target is on the same node leaves nothing
/// behind: an answered one makes no dead letter (there is no session to leave), and a
/// timed-out one frees its answer id at the caller's deadline, so that the node's table
/// returns to its size; an answer given after that reaches nobody (a dead letter).
#[test]
fn requests_to_a_target_on_the_same_node_leave_no_answer_id_and_no_dead_letter() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1], |_, s| s);
            let system = &nodes[0].system;
            let service = env.create_mbox();
            let (exposed, held, asked) = serve(env, system, &service);
            let remote = RemoteMbox::new(system, exposed.id())
                .request::<Ping, Pong>()
                .build()
                .unwrap();
            let size = ids(system);
            let dead = system.stats().dead_letters;
            for n in 0..20 {
                assert_eq!(
                    request_reply::<Ping, Pong>(&remote, LONG, Ping(41 + n)),
                    Ok(Pong(42 + n))
                );
            }
            for n in 0..20 {
                assert_eq!(next(&asked, "an answered request"), 41 + n);
            }
            assert_eq!(
                system.stats().dead_letters - dead,
                0,
                "answered: no dead letter"
            );
            assert_eq!(ids(system), size, "answered: no answer id left");

            const TIMED_OUT: usize = 50;
            for _ in 0..TIMED_OUT {
                assert_eq!(
                    request_reply::<Ping, Pong>(&remote, Duration::from_millis(20), Ping(0)),
                    Err(RequestError::Timeout)
                );
            }
            for _ in 0..TIMED_OUT {
                assert_eq!(next(&asked, "a held request"), 0);
            }
            interconnect_support::wait_until("the timed-out requests' answer ids go", || {
                ids(system) == size
            });
            // Late answers: to ids that are gone.
            let dead = system.stats().dead_letters;
            for h in held.lock().drain(..) {
                let _ = h.reply(Pong(0));
            }
            interconnect_support::wait_until("each late answer is a dead letter", || {
                system.stats().dead_letters - dead == TIMED_OUT as u64
            });
            assert_eq!(ids(system), size);
            env.stop();
        })
        .unwrap();
    });
}

/// Rule: a caller never hears after its deadline, and its answer id goes then. Node 2
/// holds requests past their callers' deadlines with the session up: node 1 frees their
/// answer ids (and their subscriptions to the session) at the deadlines, and the answers
/// given later reach nobody there (dead letters on node 1).
#[test]
fn a_remote_request_past_its_deadline_frees_its_answer_id_and_a_late_answer_reaches_nobody() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s);
            let service = env.create_mbox();
            let (exposed, held, asked) = serve(env, &nodes[1].system, &service);
            let remote = RemoteMbox::new(&nodes[0].system, exposed.id())
                .request::<Ping, Pong>()
                .build()
                .unwrap();
            // A first answered request: the session is up.
            assert_eq!(
                request_reply::<Ping, Pong>(&remote, LONG, Ping(2)),
                Ok(Pong(3))
            );
            assert_eq!(next(&asked, "the first request"), 2);
            let system = &nodes[0].system;
            interconnect_support::wait_until("the first answer id goes", || {
                nodes[0]
                    .ic
                    .session_stats(2)
                    .is_some_and(|s| s.subscribers == 0)
            });
            let size = ids(system);

            // Some time out at once: the rule holds whatever the timeout.
            const TIMED_OUT: usize = 10;
            for n in 0..TIMED_OUT {
                let timeout = Duration::from_millis(if n % 2 == 0 { 100 } else { 0 });
                assert_eq!(
                    request_reply::<Ping, Pong>(&remote, timeout, Ping(0)),
                    Err(RequestError::Timeout)
                );
            }
            for _ in 0..TIMED_OUT {
                assert_eq!(next(&asked, "a held request"), 0);
            }
            interconnect_support::wait_until("the answer ids and their subscriptions go", || {
                ids(system) == size
                    && nodes[0]
                        .ic
                        .session_stats(2)
                        .is_some_and(|s| s.subscribers == 0)
            });
            let dead = system.stats().dead_letters;
            for h in held.lock().drain(..) {
                h.reply(Pong(0)).unwrap();
            }
            interconnect_support::wait_until("each late answer is a dead letter on node 1", || {
                system.stats().dead_letters - dead == TIMED_OUT as u64
            });
            assert_eq!(ids(system), size);
            assert!(nodes[0].ic.session_stats(2).unwrap().connected);
            env.stop();
        })
        .unwrap();
    });
}
