//! The cluster mbox's figures (`agentbox::bridge::ClusterMbox`), two nodes of one process
//! over loopback: `cluster_mbox_stream` (messages to one subscriber on the other node) and
//! `cluster_mbox_fanout` (one send reaches 16 subscribers, 8 on each node: one wire copy,
//! fanned out on arrival). The sender keeps at most `WINDOW` messages ahead of the slowest
//! subscriber; the time runs from the first send to the last delivery.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::bridge::{ClusterMbox, ClusterMboxEvents, ClusterView};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::prelude::*;
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 8);
const WINDOW: u64 = 32_768;

/// A small message (its number).
#[derive(Serialize, Deserialize)]
struct Tick(u64);
impl Event for Tick {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Tick {
    type Codec = Serde;
}

/// Counts the ticks it gets.
struct Counter {
    from: Mbox,
    got: Arc<AtomicU64>,
}
impl Agent for Counter {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|c: &mut Self, _, _: &Tick| {
                c.got.fetch_add(1, Ordering::Release);
            })?;
        Ok(())
    }
}

/// Two nodes on `env`, each with the cluster mbox `bench`; node 1's first.
fn two_nodes(env: &Environment) -> Vec<(Mbox, ClusterView)> {
    let l: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a port"))
        .collect();
    let port = |l: &TcpListener| l.local_addr().expect("an address").port();
    let names = NameService::new()
        .node(1, NodeAddress::new("127.0.0.1", port(&l[0])))
        .node(2, NodeAddress::new("127.0.0.1", port(&l[1])));
    l.into_iter()
        .zip(1..)
        .map(|(l, id)| {
            let system = ActorSystem::start(env, SystemSetup::new(id)).expect("a system");
            let setup = InterconnectSetup::new(names.clone())
                .listener(l)
                .cluster_mbox_events()
                .event::<Tick>();
            let ic = Interconnect::start(&system, setup).expect("an interconnect");
            ClusterMbox::new(&system, &ic, "bench")
                .event::<Tick>()
                .build_with_view()
                .expect("the cluster mbox")
        })
        .collect()
}

/// Sends `n` ticks on node 1 to subscribers `local` on node 1 and `remote` on node 2;
/// the time until each got all `n`, and the deliveries.
fn run(n: u64, local: usize, remote: usize) -> (Duration, u64) {
    let mut out = None;
    Environment::launch(|env| {
        let nodes = two_nodes(env);
        let counts: Vec<Arc<AtomicU64>> = (0..local + remote)
            .map(|_| Arc::new(AtomicU64::new(0)))
            .collect();
        env.introduce_coop(|coop| {
            for (i, got) in counts.iter().enumerate() {
                let node = usize::from(i >= local);
                coop.add_agent(Counter {
                    from: nodes[node].0.clone(),
                    got: got.clone(),
                });
            }
        })
        .expect("the subscribers");
        let deadline = Instant::now() + Duration::from_secs(60);
        while nodes[0].1.nodes_wanting::<Tick>() != [2] {
            assert!(
                Instant::now() < deadline,
                "node 2's subscription never came"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let slowest = || {
            counts
                .iter()
                .map(|c| c.load(Ordering::Acquire))
                .min()
                .unwrap_or(0)
        };
        let start = Instant::now();
        let mut sent = 0;
        while sent < n {
            if sent - slowest() >= WINDOW {
                std::thread::yield_now();
                continue;
            }
            let batch = (n - sent).min(1024);
            for i in sent..sent + batch {
                send(&nodes[0].0, Tick(i)).expect("a send");
            }
            sent += batch;
        }
        while slowest() < n {
            assert!(
                Instant::now() < deadline + Duration::from_secs(60),
                "deliveries stalled"
            );
            std::thread::yield_now();
        }
        let t = start.elapsed();
        let deliveries: u64 = counts.iter().map(|c| c.load(Ordering::Acquire)).sum();
        assert_eq!(
            deliveries,
            n * (local + remote) as u64,
            "every subscriber got each once"
        );
        out = Some((t, deliveries));
        env.stop();
    })
    .expect("the environment");
    out.expect("the run finished")
}

/// `n` messages to one subscriber on the other node.
pub fn stream(n: u64) -> (Duration, u64) {
    run(n, 0, 1)
}

/// `n` messages to 16 subscribers, 8 on each node.
pub fn fanout(n: u64) -> (Duration, u64) {
    run(n, 8, 8)
}
