//! Replies to an agent from another node: an agent of node 1 exposes its own direct mbox
//! through an `Endpoint` (in `define`, so it knows its id from the start), and sends to a
//! service of node 2 through a `RemoteMbox` built `from` that id. Node 2's agent answers
//! the sender, as a YDB actor would, and the answers come back to node 1's agent as
//! ordinary messages. No id is shared through an `Arc<Mutex<…>>`: the agent keeps its
//! `Exposed` endpoint as a field, and the endpoint goes when the agent goes.
//!
//! `cargo run --example remote_replies` (two nodes in one process, on loopback; ends by
//! itself).

use std::net::TcpListener;

use agentbox::actors::*;
use agentbox::bridge::{Endpoint, Exposed, FromActor, RemoteMbox};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::prelude::*;
use agentbox::ActorId;
use serde::{Deserialize, Serialize};

const EVENTS: u32 = event_space_begin(ES_USERSPACE + 5);

/// A question: double this.
#[derive(Serialize, Deserialize)]
struct Double(u64);
impl Event for Double {
    const EVENT_TYPE: u32 = EVENTS + 1;
}
impl RemoteEvent for Double {
    type Codec = Serde;
}

/// The answer.
#[derive(Serialize, Deserialize)]
struct Doubled(u64);
impl Event for Doubled {
    const EVENT_TYPE: u32 = EVENTS + 2;
}
impl RemoteEvent for Doubled {
    type Codec = Serde;
}

/// The service's id on node 2.
fn doubler_id() -> ActorId {
    ActorId::service(2, b"doubler").expect("a short name")
}

/// Node 2: an agent behind a service id; answers whoever asked, echoing the cookie.
struct Doubler {
    system: ActorSystem,
    /// Its endpoint: reachable while the agent lives.
    endpoint: Option<Exposed>,
}

impl Agent for Doubler {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let exposed = Endpoint::new(&ctx.direct_mbox())
            .event_from_actor::<Double>()
            .expose_as(&self.system, doubler_id())
            .expect("the service id is free");
        self.endpoint = Some(exposed);
        ctx.subscribe_self()
            .event(|a: &mut Self, _, q: &FromActor<Double>| {
                println!("node 2: {} asks to double {}", q.sender(), q.0);
                let answer = q.reply(q.recipient(), Doubled(q.0 * 2));
                a.system.send_handle(answer);
            })?;
        Ok(())
    }
}

/// Node 1: asks three questions and waits for the answers in its own mbox.
struct Asker {
    system: ActorSystem,
    endpoint: Option<Exposed>,
    doubler: Option<Mbox>,
    answers: Vec<u64>,
}

impl Agent for Asker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        // The agent's own id: its direct mbox, exposed in node 1's actor system.
        let me = Endpoint::new(&ctx.direct_mbox())
            .event::<Doubled>()
            .expose(&self.system)
            .expect("exposed");
        // Sends through this mbox go from that id, so answers come back here.
        self.doubler = Some(
            RemoteMbox::new(&self.system, doubler_id())
                .from(me.id())
                .event::<Double>()
                .build()
                .expect("a remote mbox"),
        );
        self.endpoint = Some(me);
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, d: &Doubled| {
                println!("node 1: got {}", d.0);
                a.answers.push(d.0);
                if a.answers.len() == 3 {
                    ctx.environment().stop();
                }
            })?;
        Ok(())
    }

    fn on_start(&mut self, _ctx: &mut Context<Self>) {
        let to = self.doubler.as_ref().expect("built in define");
        for n in [1, 20, 300] {
            send(to, Double(n)).expect("sent");
        }
    }

    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        let mut got = self.answers.clone();
        got.sort_unstable();
        assert_eq!(got, [2, 40, 600], "every answer came back to the asker");
        println!("node 1: all three answers came back to the agent that asked");
    }
}

fn main() {
    Environment::launch(|env| {
        let l1 = TcpListener::bind("127.0.0.1:0").expect("bind node 1");
        let l2 = TcpListener::bind("127.0.0.1:0").expect("bind node 2");
        let port = |l: &TcpListener| l.local_addr().expect("an address").port();
        let names = NameService::new()
            .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
            .node(2, NodeAddress::new("127.0.0.1", port(&l2)));
        let mut systems = Vec::new();
        for (id, listener) in [(1, l1), (2, l2)] {
            let system = ActorSystem::start(env, SystemSetup::new(id)).expect("a system");
            let setup = InterconnectSetup::new(names.clone())
                .listener(listener)
                .event::<Double>()
                .event::<Doubled>();
            env.keep(Interconnect::start(&system, setup).expect("an interconnect"));
            systems.push(system);
        }
        let (node1, node2) = (systems[0].clone(), systems[1].clone());
        env.introduce_coop(|coop| {
            coop.add_agent(Doubler {
                system: node2,
                endpoint: None,
            });
        })
        .expect("node 2's agent");
        env.introduce_coop(|coop| {
            coop.add_agent(Asker {
                system: node1,
                endpoint: None,
                doubler: None,
                answers: Vec::new(),
            });
        })
        .expect("node 1's agent");
    })
    .expect("the environment");
    println!("both nodes stopped");
}
