//! The cluster mbox (`agentbox::bridge::ClusterMbox`) against what its peers may send and
//! do: no event from a peer may crash, hang or recurse a node; the reader thread of a
//! session never waits on a subscriber's full queue; interest follows the mbox's handles
//! and the sessions; round robin skips a subscriber whose filter refuses.

mod interconnect_support;

use std::net::TcpListener;
use std::sync::mpsc::{self, channel, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::bridge::{ClusterMbox, ClusterMboxEvents, ClusterView};
use agentbox::interconnect::InterconnectSetup;
use agentbox::interconnect::{RemoteEvent, Serde};
use agentbox::mchain::{MChain, MChainParams, OverflowReaction};
use agentbox::prelude::*;
use agentbox::{ActorId, WrappedEnv};
use agentbox::{MultiSinkBinding, Sink};
use interconnect_support::{
    bind, cluster, echo, names, next, next_within, recorder, start_node, wait_until, Node, Ping,
    What, PATIENCE, SOON,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 29);

/// A job for the cluster mbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job(u64);
impl Event for Job {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Job {
    type Codec = Serde;
}

/// What a hostile peer sends as `TEvSubscribe`: the interconnect's `Subscribe` is a local
/// event with no codec, so the peer registers one of its own under its type number.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ForgedSubscribe;
impl Event for ForgedSubscribe {
    const EVENT_TYPE: u32 = EV_SUBSCRIBE;
}
impl RemoteEvent for ForgedSubscribe {
    type Codec = Serde;
}

fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(2 * PATIENCE + Duration::from_secs(30))
        .expect("the test did not finish in time")
}

fn jobs_mbox(node: &Node) -> (Mbox, ClusterView) {
    ClusterMbox::new(&node.system, &node.ic, "jobs")
        .event::<Job>()
        .build_with_view()
        .unwrap()
}

/// Collects a system's dead letters.
struct Letters(Mbox, Arc<Mutex<Vec<DeadLetter>>>);
impl Agent for Letters {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.0)
            .event(|a: &mut Self, _, d: &DeadLetter| a.1.lock().push(*d))?;
        Ok(())
    }
}

fn letters_of(env: &Environment, system: &ActorSystem) -> Arc<Mutex<Vec<DeadLetter>>> {
    let letters = Arc::new(Mutex::new(Vec::new()));
    let (dead, l) = (system.dead_letters(), letters.clone());
    env.introduce_coop(move |coop| coop.add_agent(Letters(dead, l)))
        .unwrap();
    letters
}

/// A subscriber of jobs that reports each.
struct Worker {
    jobs: Mbox,
    tx: Sender<u64>,
}
impl Agent for Worker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let jobs = self.jobs.clone();
        ctx.subscribe(&jobs).event(|a: &mut Self, _, j: &Job| {
            let _ = a.tx.send(j.0);
        })?;
        Ok(())
    }
}

/// Node 2 learns the id of node 1's endpoint of the cluster mbox "jobs" from its
/// announcement (node 2 has no such mbox: the announcement is a dead letter there, with
/// its sender).
fn endpoint_of_node_1(letters: &Mutex<Vec<DeadLetter>>) -> ActorId {
    let mut me = None;
    wait_until("node 1's announcement reaches node 2", || {
        me = letters
            .lock()
            .iter()
            .find(|d| d.event_type == agentbox::bridge::EV_CLUSTER_INTEREST)
            .map(|d| d.sender);
        me.is_some()
    });
    me.unwrap()
}

/// Rule: no event from a peer may drive a node into recursion, a panic, an abort or a
/// hang. A peer that learned the id of a cluster mbox's endpoint (every announcement
/// carries it) sends it a `TEvSubscribe` that names the endpoint as both sender and
/// recipient: the node refuses it as any event the endpoint does not take (a dead letter,
/// `Unhandled`) and goes on working: sessions, actors and the cluster mbox.
#[test]
fn a_forged_subscribe_from_a_peer_to_a_cluster_mbox_endpoint_is_refused_and_the_node_goes_on() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |id, s| {
                let s = s.cluster_mbox_events().event::<Job>();
                if id == 2 {
                    s.event::<ForgedSubscribe>()
                } else {
                    s
                }
            });
            let letters1 = letters_of(env, &nodes[0].system);
            let letters2 = letters_of(env, &nodes[1].system);
            let (jobs1, _view1) = jobs_mbox(&nodes[0]);
            let (tx, rx) = channel();
            env.introduce_coop(|coop| {
                coop.add_agent(Worker {
                    jobs: jobs1.clone(),
                    tx,
                })
            })
            .unwrap();
            let me1 = endpoint_of_node_1(&letters2);
            assert_eq!(me1.node_id(), 1);

            // The forged events: the endpoint as sender and recipient.
            for _ in 0..3 {
                nodes[1]
                    .system
                    .send_handle(EventHandle::new(me1, me1, ForgedSubscribe));
            }
            wait_until("node 1 refused the forged subscriptions", || {
                letters1
                    .lock()
                    .iter()
                    .filter(|d| {
                        d.event_type == EV_SUBSCRIBE
                            && d.recipient == me1
                            && d.reason == DeadLetterReason::Unhandled
                    })
                    .count()
                    == 3
            });

            // Node 1 goes on: a ping from node 2 is answered, and its cluster mbox works.
            let echo1 = nodes[0].system.register(echo(None)).unwrap();
            let (ptx, prx) = channel();
            let me2 = nodes[1].system.register(recorder(ptx)).unwrap();
            for n in 0..5 {
                nodes[1]
                    .system
                    .send_with(echo1, me2, Ping(n), EventFlags::TRACK_DELIVERY, n);
                assert_eq!(next(&prx, "the pong").what, What::Pong(n));
            }
            send(&jobs1, Job(7)).unwrap();
            assert_eq!(next(&rx, "the job"), 7);
            assert!(nodes[0].ic.session_stats(2).unwrap().connected);
            env.stop();
        })
        .unwrap();
    });
}

/// Rule: nothing on a session's reader thread waits on user code or a full queue. Node 1
/// binds a bounded chain that waits up to an hour when full to its cluster mbox; jobs from
/// node 2 overflow it. An unrelated ping from node 2 to node 1, on the same session, is
/// answered as ever, and each job the full chain refused is counted (`refused`: the
/// chain's own overflow reaction, an error here).
#[test]
fn a_full_waiting_chain_bound_to_a_cluster_mbox_does_not_hold_the_session_reader() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s.cluster_mbox_events().event::<Job>());
            let (jobs1, _view1) = jobs_mbox(&nodes[0]);
            let (jobs2, view2) = jobs_mbox(&nodes[1]);
            let chain = env.create_mchain(
                MChainParams::bounded(1)
                    .wait_on_full(Duration::from_secs(3600))
                    .overflow(OverflowReaction::Error),
            );
            let binding = MultiSinkBinding::new();
            binding
                .bind::<Job>(&jobs1, Sink::from(chain.as_mbox()))
                .unwrap();
            wait_until("node 2 knows node 1 wants jobs", || {
                view2.nodes_wanting::<Job>() == [1]
            });
            let echo1 = nodes[0].system.register(echo(None)).unwrap();
            let (ptx, prx) = channel();
            let me2 = nodes[1].system.register(recorder(ptx)).unwrap();
            let refused = env.drop_counts().refused;

            // The first job fills the chain; the next three find it full.
            for n in 0..4 {
                send(&jobs2, Job(n)).unwrap();
            }
            for n in 0..3 {
                nodes[1]
                    .system
                    .send_with(echo1, me2, Ping(n), EventFlags::TRACK_DELIVERY, n);
                let got = next_within(&prx, SOON, "the pong behind the jobs");
                assert_eq!(got.what, What::Pong(n));
            }
            wait_until(
                "the three jobs refused by the full chain are counted",
                || env.drop_counts().refused - refused == 3,
            );
            assert_eq!(chain.len(), 1, "the first job waits in the chain");
            drop(binding);
            env.stop();
        })
        .unwrap();
    });
}

/// Rule (round robin, a filter refuses): when the subscriber whose turn it is refuses a
/// message, the next one in turn that accepts it gets it, whatever the turn (the first
/// one's included): nothing is lost while some subscriber on the node accepts.
#[test]
fn round_robin_passes_a_refused_message_to_the_next_subscriber_that_accepts_it() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1], |_, s| s.cluster_mbox_events().event::<Job>());
            let work = ClusterMbox::new(&nodes[0].system, &nodes[0].ic, "work")
                .event::<Job>()
                .round_robin()
                .build()
                .unwrap();
            // In turn: two that refuse everything, then one that takes everything.
            let chains: Vec<MChain> = (0..3)
                .map(|_| env.create_mchain(MChainParams::unbounded()))
                .collect();
            let binding = MultiSinkBinding::new();
            for c in &chains[..2] {
                binding
                    .bind_with_filter::<Job, _>(&work, Sink::from(c.as_mbox()), |_| false)
                    .unwrap();
            }
            binding
                .bind::<Job>(&work, Sink::from(chains[2].as_mbox()))
                .unwrap();
            let filtered = env.drop_counts().filtered;
            const N: usize = 30;
            for n in 0..N as u64 {
                send(&work, Job(n)).unwrap();
            }
            let lens: Vec<usize> = chains.iter().map(MChain::len).collect();
            assert_eq!(lens, [0, 0, N], "every job to the one that accepts");
            assert_eq!(env.drop_counts().filtered - filtered, 0, "none lost");
            drop(binding);
            env.stop();
        })
        .unwrap();
    });
}

/// Rule: a delayed or periodic send to a cluster mbox works as to any mbox (the timer
/// needs the mbox's environment): the job reaches a subscriber on this node and one on
/// another node.
#[test]
fn a_delayed_send_to_a_cluster_mbox_reaches_subscribers_on_every_node() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s.cluster_mbox_events().event::<Job>());
            let (jobs1, view1) = jobs_mbox(&nodes[0]);
            let (jobs2, _view2) = jobs_mbox(&nodes[1]);
            let (tx1, rx1) = channel();
            let (tx2, rx2) = channel();
            env.introduce_coop(|coop| {
                coop.add_agent(Worker {
                    jobs: jobs1.clone(),
                    tx: tx1,
                });
                coop.add_agent(Worker {
                    jobs: jobs2.clone(),
                    tx: tx2,
                });
            })
            .unwrap();
            wait_until("node 1 knows node 2 wants jobs", || {
                view1.nodes_wanting::<Job>() == [2]
            });
            send_delayed(&jobs1, Duration::from_millis(10), Job(3))
                .unwrap()
                .detach();
            assert_eq!(next(&rx1, "the delayed job on node 1"), 3);
            assert_eq!(next(&rx2, "the delayed job on node 2"), 3);
            env.stop();
        })
        .unwrap();
    });
}

/// Rule: a cluster mbox whose last handle is dropped leaves its node: the name is free
/// there again, and a new mbox of that name is the one its peers ship to.
#[test]
fn a_cluster_mbox_whose_last_handle_is_dropped_leaves_its_node() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s.cluster_mbox_events().event::<Job>());
            let (jobs1, view1) = jobs_mbox(&nodes[0]);
            let (jobs2, view2) = jobs_mbox(&nodes[1]);
            let old = env.create_mchain(MChainParams::unbounded());
            let binding = MultiSinkBinding::new();
            binding
                .bind::<Job>(&jobs2, Sink::from(old.as_mbox()))
                .unwrap();
            wait_until("node 1 knows node 2 wants jobs", || {
                view1.nodes_wanting::<Job>() == [2]
            });
            send(&jobs1, Job(1)).unwrap();
            wait_until("the first job on node 2", || old.len() == 1);
            drop(binding);
            drop((jobs2, view2));

            // The same name again on node 2.
            let (jobs2, _view2) = jobs_mbox(&nodes[1]);
            let new = env.create_mchain(MChainParams::unbounded());
            let binding = MultiSinkBinding::new();
            binding
                .bind::<Job>(&jobs2, Sink::from(new.as_mbox()))
                .unwrap();
            wait_until("node 1 knows the new mbox wants jobs", || {
                view1.nodes_wanting::<Job>() == [2]
            });
            send(&jobs1, Job(2)).unwrap();
            wait_until("the second job in the new mbox", || new.len() == 1);
            assert_eq!(old.len(), 1, "the old mbox got nothing more");
            drop(binding);
            env.stop();
        })
        .unwrap();
    });
}

/// Binds `port` again (the old listener of a stopped node may take a moment to close).
fn rebind(port: u16) -> TcpListener {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(l) => return l,
            Err(e) => {
                assert!(Instant::now() < deadline, "port {port} stays taken: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Rule: membership follows the sessions every time. A node that leaves, comes back and
/// leaves again takes its interest along each time: after the first session ended, the
/// mbox subscribed to the peer's next session, so the second end is seen too (no stale
/// interest: sends are not shipped to a node that is gone).
#[test]
fn a_node_that_leaves_twice_takes_its_interest_along_both_times() {
    bounded(|| {
        let tune = |s: InterconnectSetup| {
            s.cluster_mbox_events()
                .event::<Job>()
                .lost_connection_timeout(Duration::from_secs(1))
                .ping_period(Duration::from_millis(300))
                .dead_peer_timeout(Duration::from_secs(3))
        };
        let (l1, p1) = bind();
        let (l2, p2) = bind();
        let ns = names(&[(1, p1), (2, p2)]);
        let main = WrappedEnv::new(|_| {}).unwrap();
        let env = main.environment();
        let node1 = start_node(
            env,
            1,
            tune(InterconnectSetup::new(ns.clone()).listener(l1)),
        );
        let (jobs1, view1) = jobs_mbox(&node1);
        let (tx, rx) = channel();
        // Node 2, in an environment of its own, with a subscriber.
        let start2 = |l: TcpListener| {
            let w = WrappedEnv::new(|_| {}).unwrap();
            let node2 = start_node(
                w.environment(),
                2,
                tune(InterconnectSetup::new(ns.clone()).listener(l)),
            );
            let (jobs2, view2) = jobs_mbox(&node2);
            let worker = Worker {
                jobs: jobs2.clone(),
                tx: tx.clone(),
            };
            w.environment()
                .introduce_coop(|coop| coop.add_agent(worker))
                .unwrap();
            (w, node2, jobs2, view2)
        };
        let mut node2 = Some(start2(l2));
        for round in 0..3u64 {
            wait_until("node 1 learns that node 2 wants jobs", || {
                view1.nodes_wanting::<Job>() == [2]
            });
            send(&jobs1, Job(round)).unwrap();
            assert_eq!(next(&rx, "the job on node 2"), round);
            if round == 2 {
                break;
            }
            let started = Instant::now();
            let (w2, n2, j2, v2) = node2.take().unwrap();
            n2.ic.stop();
            wait_until("node 2's interest vanishes on node 1", || {
                view1.nodes_wanting::<Job>().is_empty()
            });
            w2.stop_then_join().unwrap();
            drop((n2, j2, v2));
            // A new node 2 (its session ids must be above the old ones' second).
            while started.elapsed() < Duration::from_millis(1100) {
                std::thread::sleep(Duration::from_millis(50));
            }
            node2 = Some(start2(rebind(p2)));
        }
        drop(node2);
        drop((jobs1, view1));
        main.stop_then_join().unwrap();
    });
}
