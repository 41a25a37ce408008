//! The cluster-wide MPMC mbox (`agentbox::bridge::ClusterMbox`): every subscriber in the
//! cluster gets each message once, with one wire copy per interested node; subscriptions
//! follow the sessions (they vanish when a node leaves and are announced again when it
//! comes back); a shippable filter keeps refused messages off the wire; connection cuts
//! lose and repeat nothing; the round-robin kind gives each message to one subscriber.

mod interconnect_support;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::mpsc::{self, channel, Sender};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::bridge::{
    ClusterKey, ClusterMbox, ClusterMboxError, ClusterMboxEvents, ClusterView, ShippableFilter,
    EV_CLUSTER_INTEREST,
};
use agentbox::interconnect::{InterconnectSetup, RemoteEvent, Serde};
use agentbox::prelude::*;
use agentbox::{SendError, WrappedEnv};
use interconnect_support::{
    bind, cluster, names, remote_events, start_node, take, wait_until, CuttingProxy, NoCodec, Node,
    PATIENCE,
};
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 23);

/// A job: who sent it, its number in that sender's stream, its key for filters.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    from: u32,
    n: u64,
    key: u64,
}
impl Event for Job {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Job {
    type Codec = Serde;
}
impl ClusterKey for Job {
    fn cluster_key(&self) -> u64 {
        self.key
    }
}

/// A second type, wanted by fewer nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stats(u64);
impl Event for Stats {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Stats {
    type Codec = Serde;
}

fn with_cluster_events(s: InterconnectSetup) -> InterconnectSetup {
    s.cluster_mbox_events().event::<Job>().event::<Stats>()
}

fn jobs_mbox(node: &Node) -> (Mbox, ClusterView) {
    ClusterMbox::new(&node.system, &node.ic, "jobs")
        .keyed_event::<Job>()
        .event::<Stats>()
        .build_with_view()
        .unwrap()
}

/// Interest announcements that may still be on their way when a test starts counting a
/// session's events (a node answers a peer's first announcement with its own): the counts
/// allow this many more than the jobs, far fewer than a copy per subscriber would add.
const ANNOUNCEMENTS: u64 = 2;

fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(2 * PATIENCE + Duration::from_secs(30))
        .expect("the test did not finish in time")
}

/// What a subscriber got: its tag, and the job's sender and number (or `u32::MAX` and
/// the number for `Stats`).
type Got = (u32, u32, u64);

/// A subscriber of the cluster mbox: jobs (with a shippable filter on the keys, if given)
/// and, if asked, stats.
struct Sub {
    jobs: Mbox,
    tag: u32,
    keys: Option<Vec<u64>>,
    stats: bool,
    tx: Sender<Got>,
}
impl Agent for Sub {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let jobs = self.jobs.clone();
        if let Some(keys) = self.keys.take() {
            ShippableFilter::<Job>::key_in(keys).set(ctx, &jobs)?;
        }
        ctx.subscribe(&jobs).event(|a: &mut Self, _, j: &Job| {
            let _ = a.tx.send((a.tag, j.from, j.n));
        })?;
        if self.stats {
            ctx.subscribe(&jobs).event(|a: &mut Self, _, s: &Stats| {
                let _ = a.tx.send((a.tag, u32::MAX, s.0));
            })?;
        }
        Ok(())
    }
}

fn sub(jobs: &Mbox, tag: u32, tx: &Sender<Got>) -> Sub {
    Sub {
        jobs: jobs.clone(),
        tag,
        keys: None,
        stats: false,
        tx: tx.clone(),
    }
}

/// The numbers each (subscriber, sender) pair got, in arrival order.
fn by_pair(got: &[Got]) -> BTreeMap<(u32, u32), Vec<u64>> {
    let mut m: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    for &(tag, from, n) in got {
        m.entry((tag, from)).or_default().push(n);
    }
    m
}

#[test]
fn fan_out_reaches_every_subscriber_on_three_nodes_once_with_one_wire_copy_per_node() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2, 3], |_, s| with_cluster_events(s));
            let boxes: Vec<(Mbox, ClusterView)> = nodes.iter().map(jobs_mbox).collect();
            let (tx, rx) = channel();
            // 2 subscribers on node 1, 3 on node 2, 2 on node 3.
            let mut tag = 0;
            for (i, count) in [2, 3, 2].into_iter().enumerate() {
                env.introduce_coop(|coop| {
                    for _ in 0..count {
                        coop.add_agent(sub(&boxes[i].0, tag, &tx));
                        tag += 1;
                    }
                })
                .unwrap();
            }
            wait_until("every node knows the others want jobs", || {
                boxes
                    .iter()
                    .all(|(_, v)| v.nodes_wanting::<Job>().len() == 2)
            });
            // Announcements already queued (answers to a peer whose session came up) leave
            // before the count starts.
            wait_until("nothing waits to leave", || {
                nodes
                    .iter()
                    .all(|n| n.ic.stats().iter().all(|s| s.queued_events == 0))
            });
            let out = |a: usize, b: u32| nodes[a].ic.session_stats(b).unwrap().events_out;
            let before = [
                out(0, 2),
                out(0, 3),
                out(1, 1),
                out(1, 3),
                out(2, 1),
                out(2, 2),
            ];
            const N: u64 = 200;
            for n in 0..N {
                send(&boxes[0].0, Job { from: 1, n, key: n }).unwrap();
                send(&boxes[1].0, Job { from: 2, n, key: n }).unwrap();
            }
            let got = take(&rx, 7 * 2 * N as usize);
            let pairs = by_pair(&got);
            assert_eq!(pairs.len(), 7 * 2, "every subscriber hears both senders");
            for ((tag, from), ns) in &pairs {
                assert_eq!(
                    *ns,
                    (0..N).collect::<Vec<_>>(),
                    "subscriber {tag}, jobs from node {from}: each once, in order"
                );
            }
            assert!(rx.try_recv().is_err(), "nothing more than once");
            // One copy per interested node, not one per subscriber there; nothing from node 3.
            let after = [
                out(0, 2),
                out(0, 3),
                out(1, 1),
                out(1, 3),
                out(2, 1),
                out(2, 2),
            ];
            let sent: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
            // A session's count may also hold an announcement that was still on its way
            // (a node answers a peer's first announcement with its own): at most
            // `ANNOUNCEMENTS` more than the jobs.
            let jobs = [N, N, N, N, 0, 0];
            for (i, (s, j)) in sent.iter().zip(jobs).enumerate() {
                assert!(
                    (j..=j + ANNOUNCEMENTS).contains(s),
                    "session {i}: {s} events out for {j} jobs ({sent:?})"
                );
            }
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

#[test]
fn a_node_that_leaves_takes_its_subscriptions_along_and_announces_them_again_when_back() {
    bounded(|| {
        let tune = |s: InterconnectSetup| {
            with_cluster_events(remote_events(s))
                .lost_connection_timeout(Duration::from_secs(1))
                .ping_period(Duration::from_millis(300))
                .dead_peer_timeout(Duration::from_secs(3))
        };
        let (l1, p1) = bind();
        let (l2, p2) = bind();
        let (l3, p3) = bind();
        let ns = names(&[(1, p1), (2, p2), (3, p3)]);
        let main = WrappedEnv::new(|_| {}).unwrap();
        let env = main.environment();
        let node1 = start_node(
            env,
            1,
            tune(InterconnectSetup::new(ns.clone()).listener(l1)),
        );
        let node2 = start_node(
            env,
            2,
            tune(InterconnectSetup::new(ns.clone()).listener(l2)),
        );
        let (jobs1, view1) = jobs_mbox(&node1);
        let (jobs2, _view2) = jobs_mbox(&node2);
        let (tx, rx) = channel();
        env.introduce_coop(|coop| coop.add_agent(sub(&jobs2, 2, &tx)))
            .unwrap();

        // Node 3, in an environment of its own: wants jobs and stats.
        let start3 = |l: TcpListener, tag: u32| {
            let w = WrappedEnv::new(|_| {}).unwrap();
            let node3 = start_node(
                w.environment(),
                3,
                tune(InterconnectSetup::new(ns.clone()).listener(l)),
            );
            let (jobs3, view3) = jobs_mbox(&node3);
            let mut s = sub(&jobs3, tag, &tx);
            s.stats = true;
            w.environment()
                .introduce_coop(|coop| coop.add_agent(s))
                .unwrap();
            (w, node3, jobs3, view3)
        };
        let node3 = start3(l3, 3);
        let wants = |jobs: &[u32], stats: &[u32]| {
            view1.nodes_wanting::<Job>() == jobs && view1.nodes_wanting::<Stats>() == stats
        };
        wait_until("node 1 learns what nodes 2 and 3 want", || {
            wants(&[2, 3], &[3])
        });
        let mut next = 0u64;
        let mut send_jobs = |count: u64| {
            for _ in 0..count {
                send(
                    &jobs1,
                    Job {
                        from: 1,
                        n: next,
                        key: 0,
                    },
                )
                .unwrap();
                next += 1;
            }
        };
        send_jobs(10);
        let got = by_pair(&take(&rx, 20));
        assert_eq!(got[&(2, 1)], (0..10).collect::<Vec<_>>());
        assert_eq!(got[&(3, 1)], (0..10).collect::<Vec<_>>());

        // Node 3's interconnect stops (its agents stay subscribed, it announces nothing):
        // its subscriptions vanish on node 1 when the session ends.
        let started3 = Instant::now();
        let (w3, n3, j3, v3) = node3;
        n3.ic.stop();
        wait_until("node 3's subscriptions vanish on node 1", || {
            wants(&[2], &[])
        });
        w3.stop_then_join().unwrap();
        drop((n3, j3, v3));
        // A type only node 3 wanted has no subscriber: counted, not silent.
        let drops = env.drop_counts().no_subscribers;
        for n in 0..5 {
            send(&jobs1, Stats(n)).unwrap();
        }
        assert_eq!(env.drop_counts().no_subscribers - drops, 5);
        send_jobs(10);
        let got = by_pair(&take(&rx, 10));
        assert_eq!(got.len(), 1, "only node 2 is left: {got:?}");
        assert_eq!(got[&(2, 1)], (10..20).collect::<Vec<_>>());

        // Node 3 comes back (a new process's worth of node: new system, new interconnect on
        // the same port; its session ids must be above the old ones' second).
        while started3.elapsed() < Duration::from_millis(1100) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let (w3, _n3, _j3, _v3) = start3(rebind(p3), 4);
        wait_until("node 3's subscriptions are announced again", || {
            wants(&[2, 3], &[3])
        });
        send_jobs(10);
        send(&jobs1, Stats(7)).unwrap();
        let got = by_pair(&take(&rx, 21));
        assert_eq!(got[&(2, 1)], (20..30).collect::<Vec<_>>());
        assert_eq!(got[&(4, 1)], (20..30).collect::<Vec<_>>());
        assert_eq!(got[&(4, u32::MAX)], vec![7]);
        assert!(
            !got.contains_key(&(3, 1)),
            "the old node 3 got nothing more"
        );
        drop(jobs1);
        w3.stop_then_join().unwrap();
        main.stop_then_join().unwrap();
    });
}

#[test]
fn a_shippable_filter_keeps_refused_messages_off_the_wire() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| with_cluster_events(s));
            let (jobs1, view1) = jobs_mbox(&nodes[0]);
            let (jobs2, _view2) = jobs_mbox(&nodes[1]);
            let (tx, rx) = channel();
            let mut s = sub(&jobs2, 0, &tx);
            s.keys = Some((0..100u64).filter(|k| k.is_multiple_of(2)).collect());
            env.introduce_coop(|coop| coop.add_agent(s)).unwrap();
            wait_until("node 1 knows node 2's filter", || {
                let job = |key| Job { from: 1, n: 0, key };
                view1.nodes_for(job(0)) == [2] && view1.nodes_for(job(1)).is_empty()
            });
            wait_until("nothing waits to leave", || {
                nodes[0].ic.session_stats(2).unwrap().queued_events == 0
            });
            let before = nodes[0].ic.session_stats(2).unwrap().events_out;
            let filtered = env.drop_counts().filtered;
            for n in 0..100 {
                send(&jobs1, Job { from: 1, n, key: n }).unwrap();
            }
            let got: Vec<u64> = take(&rx, 50).into_iter().map(|g| g.2).collect();
            assert_eq!(
                got,
                (0..100u64)
                    .filter(|k| k.is_multiple_of(2))
                    .collect::<Vec<_>>()
            );
            let sent = nodes[0].ic.session_stats(2).unwrap().events_out - before;
            assert!(
                (50..=50 + ANNOUNCEMENTS).contains(&sent),
                "only the accepted half crossed the wire (and maybe an announcement): {sent}"
            );
            assert_eq!(env.drop_counts().filtered - filtered, 50);
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn fan_out_across_connection_cuts_loses_and_repeats_nothing() {
    bounded(|| {
        let w = WrappedEnv::new(|_| {}).unwrap();
        let (l1, p1) = bind();
        let (l2, p2) = bind();
        let to2 = CuttingProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], p2)));
        let to1 = CuttingProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], p1)));
        let setup = |own: (u32, u16), peer: (u32, u16), l| {
            with_cluster_events(remote_events(
                InterconnectSetup::new(names(&[own, peer])).listener(l),
            ))
            .dead_peer_timeout(Duration::from_secs(3))
            .ping_period(Duration::from_millis(500))
            // The session outlives any gap between connections: no subscription vanishes.
            .lost_connection_timeout(Duration::from_secs(30))
        };
        let env = w.environment();
        let node1 = start_node(env, 1, setup((1, p1), (2, to2.port()), l1));
        let node2 = start_node(env, 2, setup((2, p2), (1, to1.port()), l2));
        let (jobs1, view1) = jobs_mbox(&node1);
        let (jobs2, _view2) = jobs_mbox(&node2);
        let (tx, rx) = channel();
        env.introduce_coop(|coop| {
            coop.add_agent(sub(&jobs1, 0, &tx));
            for tag in 1..4 {
                coop.add_agent(sub(&jobs2, tag, &tx));
            }
        })
        .unwrap();
        wait_until("node 1 knows node 2 wants jobs", || {
            view1.nodes_wanting::<Job>() == [2]
        });
        // Bursts until the proxies have cut a few connections and node 1 resumed as often.
        let mut sent = 0u64;
        let deadline = Instant::now() + PATIENCE;
        loop {
            let cuts = to1.cuts() + to2.cuts();
            let resumes = node1.ic.session_stats(2).unwrap().reconnects;
            if cuts >= 3 && resumes >= 3 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "only {cuts} cuts, {resumes} resumes"
            );
            if sent < 4000 {
                for _ in 0..50 {
                    send(
                        &jobs1,
                        Job {
                            from: 1,
                            n: sent,
                            key: 0,
                        },
                    )
                    .unwrap();
                    sent += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for _ in 0..100 {
            send(
                &jobs1,
                Job {
                    from: 1,
                    n: sent,
                    key: 0,
                },
            )
            .unwrap();
            sent += 1;
        }
        let got = by_pair(&take(&rx, 4 * sent as usize));
        for tag in 0..4 {
            assert_eq!(
                got[&(tag, 1)],
                (0..sent).collect::<Vec<_>>(),
                "subscriber {tag}: every job once, in order"
            );
        }
        assert!(rx.try_recv().is_err(), "nothing more than once");
        drop((jobs1, jobs2));
        w.stop_then_join().unwrap();
    });
}

#[test]
fn round_robin_gives_each_message_to_one_subscriber_in_the_cluster() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2, 3], |_, s| with_cluster_events(s));
            let boxes: Vec<(Mbox, ClusterView)> = nodes
                .iter()
                .map(|n| {
                    ClusterMbox::new(&n.system, &n.ic, "work")
                        .event::<Job>()
                        .round_robin()
                        .build_with_view()
                        .unwrap()
                })
                .collect();
            let (tx, rx) = channel();
            // 1 subscriber on node 1, 2 on node 2, 1 on node 3.
            env.introduce_coop(|coop| {
                coop.add_agent(sub(&boxes[0].0, 0, &tx));
                coop.add_agent(sub(&boxes[1].0, 1, &tx));
                coop.add_agent(sub(&boxes[1].0, 2, &tx));
                coop.add_agent(sub(&boxes[2].0, 3, &tx));
            })
            .unwrap();
            wait_until("node 1 knows both nodes' counts", || {
                let v = &boxes[0].1;
                v.subscribers_on::<Job>(2) == 2 && v.subscribers_on::<Job>(3) == 1
            });
            const N: u64 = 400;
            for n in 0..N {
                send(&boxes[0].0, Job { from: 1, n, key: 0 }).unwrap();
            }
            let got = take(&rx, N as usize);
            let mut all: Vec<u64> = got.iter().map(|g| g.2).collect();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..N).collect::<Vec<_>>(),
                "each job to one subscriber"
            );
            let mut per: BTreeMap<u32, u64> = BTreeMap::new();
            for g in &got {
                *per.entry(g.0).or_default() += 1;
            }
            // The sender takes turns over the 4 subscribers it knows of; node 2 over its 2.
            let even: BTreeMap<u32, u64> = (0..4).map(|t| (t, N / 4)).collect();
            assert_eq!(per, even, "each subscriber gets its turn");
            env.stop();
        })
        .unwrap();
    });
}

/// Subscribes to jobs with a closure filter (even numbers only).
struct EvenOnly {
    jobs: Mbox,
    tx: Sender<Got>,
}
impl Agent for EvenOnly {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let jobs = self.jobs.clone();
        ctx.set_delivery_filter(&jobs, |j: &Job| j.n.is_multiple_of(2))?;
        ctx.subscribe(&jobs).event(|a: &mut Self, _, j: &Job| {
            let _ = a.tx.send((0, j.from, j.n));
        })?;
        Ok(())
    }
}

#[test]
fn a_closure_filter_runs_on_the_receiving_node_and_does_not_ship() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| with_cluster_events(s));
            let (jobs1, view1) = jobs_mbox(&nodes[0]);
            let (jobs2, _view2) = jobs_mbox(&nodes[1]);
            let (tx, rx) = channel();
            env.introduce_coop(|coop| coop.add_agent(EvenOnly { jobs: jobs2, tx }))
                .unwrap();
            wait_until("node 1 knows node 2 wants jobs", || {
                view1.nodes_wanting::<Job>() == [2]
            });
            wait_until("nothing waits to leave", || {
                nodes[0].ic.session_stats(2).unwrap().queued_events == 0
            });
            let before = nodes[0].ic.session_stats(2).unwrap().events_out;
            for n in 0..100 {
                send(&jobs1, Job { from: 1, n, key: n }).unwrap();
            }
            // A last job the filter takes: the odd ones were refused before it came.
            send(
                &jobs1,
                Job {
                    from: 1,
                    n: 100,
                    key: 0,
                },
            )
            .unwrap();
            let got: Vec<u64> = take(&rx, 51).into_iter().map(|g| g.2).collect();
            assert_eq!(
                got,
                (0..=100u64)
                    .filter(|n| n.is_multiple_of(2))
                    .collect::<Vec<_>>()
            );
            assert!(rx.try_recv().is_err());
            let sent = nodes[0].ic.session_stats(2).unwrap().events_out - before;
            assert!(
                (101..=101 + ANNOUNCEMENTS).contains(&sent),
                "every job crossed: the filter is not shippable (and maybe an announcement): {sent}"
            );
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn what_cannot_work_is_refused_with_typed_errors() {
    bounded(|| {
        Environment::launch(|env| {
            // Node 1 has no codec for the mbox's own event; node 2 has them all.
            let nodes = cluster(env, &[1, 2], |id, s| {
                if id == 1 {
                    s.event::<Job>()
                } else {
                    with_cluster_events(s)
                }
            });
            let err = ClusterMbox::new(&nodes[0].system, &nodes[0].ic, "jobs")
                .event::<Job>()
                .build()
                .unwrap_err();
            assert!(
                matches!(err, ClusterMboxError::NoCodec { event_type, .. } if event_type == EV_CLUSTER_INTEREST),
                "{err}"
            );
            let err = ClusterMbox::new(&nodes[1].system, &nodes[1].ic, "jobs")
                .build()
                .unwrap_err();
            assert!(matches!(err, ClusterMboxError::NoEvents), "{err}");
            let err = ClusterMbox::new(&nodes[1].system, &nodes[1].ic, "jobs")
                .event::<NoCodec>()
                .build()
                .unwrap_err();
            assert!(matches!(err, ClusterMboxError::NoCodec { .. }), "{err}");
            let (jobs, _view) = jobs_mbox(&nodes[1]);
            let err = ClusterMbox::new(&nodes[1].system, &nodes[1].ic, "jobs")
                .event::<Job>()
                .build()
                .unwrap_err();
            assert!(matches!(err, ClusterMboxError::AlreadyBuilt(_)), "{err}");
            // A type not named: refused at the send and at the subscription.
            assert!(matches!(
                send(&jobs, 5u32),
                Err(SendError::NotSerializable { .. })
            ));
            let (tx, _rx) = channel::<Got>();
            let refused = env.introduce_coop(|coop| {
                coop.add_agent(Wrong {
                    jobs: jobs.clone(),
                    tx,
                })
            });
            assert!(refused.is_err(), "a subscription to a type not named fails");
            env.stop();
        })
        .unwrap();
    });
}

/// Subscribes to a type the cluster mbox does not carry.
struct Wrong {
    jobs: Mbox,
    tx: Sender<Got>,
}
impl Agent for Wrong {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let jobs = self.jobs.clone();
        ctx.subscribe(&jobs).event(|a: &mut Self, _, n: &u32| {
            let _ = a.tx.send((0, 0, u64::from(*n)));
        })?;
        Ok(())
    }
}
