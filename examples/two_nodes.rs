//! Two nodes in one process, joined by the interconnect on loopback: node 1 greets node
//! 2's "greeter" service, the greeter answers by id across the wire, and everything ends
//! by itself. The same program as README's interconnect snippet.
//!
//! `cargo run --example two_nodes`

use std::net::TcpListener;

use agentbox::actors::*;
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::{ActorId, Environment};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Hello(String);
impl Event for Hello {
    const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1;
}
impl RemoteEvent for Hello {
    type Codec = Serde; // serde by default; `Protobuf` for YDB's
}

/// Node 2's greeter: answers every `Hello` to its sender, on whatever node it is.
struct Greeter;
impl Actor for Greeter {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::serving);
    }
}
impl Greeter {
    fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(Hello(text)) = ev.get::<Hello>() else {
            return ev.unhandled();
        };
        println!("node 2 got {text:?} from {}", ev.sender());
        ctx.send(
            ev.sender(),
            Hello(format!("hello back to node {}", ev.sender().node_id())),
        );
        Handled::Yes
    }
}

/// Node 1's caller: greets the service on node 2, prints the answer, ends everything.
struct Caller;
impl Actor for Caller {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        let greeter = ActorId::service(2, b"greeter").expect("a short name");
        ctx.send(greeter, Hello("hi from node 1".into()));
        ctx.become_state(Self::waiting);
    }
}
impl Caller {
    fn waiting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(Hello(text)) = ev.get::<Hello>() else {
            return ev.unhandled();
        };
        println!("node 1 got {text:?} from {}", ev.sender());
        ctx.system().environment().stop(); // the interconnects stop with it
        Handled::Yes
    }
}

fn main() {
    Environment::launch(|env| {
        // Ports the OS picks (port 0), then the name service built from them.
        let l1 = TcpListener::bind("127.0.0.1:0").expect("bind node 1");
        let l2 = TcpListener::bind("127.0.0.1:0").expect("bind node 2");
        let names = NameService::new()
            .node(
                1,
                NodeAddress::new("127.0.0.1", l1.local_addr().unwrap().port()),
            )
            .node(
                2,
                NodeAddress::new("127.0.0.1", l2.local_addr().unwrap().port()),
            );
        let mut nodes = Vec::new();
        for (id, listener) in [(1, l1), (2, l2)] {
            let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
            let setup = InterconnectSetup::new(names.clone())
                .listener(listener)
                .cluster_uuid("demo") // who may join
                .accept_uuid("demo")
                .secret(b"shared secret") // an HMAC proof in every handshake
                .event::<Hello>();
            Interconnect::start(&system, setup).unwrap();
            nodes.push(system);
        }
        let greeter = nodes[1].register(Greeter).unwrap();
        nodes[1]
            .register_local_service(ActorId::service(2, b"greeter").unwrap(), greeter)
            .unwrap();
        nodes[0].register(Caller).unwrap();
    })
    .unwrap();
    println!("both nodes stopped");
}
