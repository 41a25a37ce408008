//! Two agents on the default `one_thread` dispatcher play ping-pong through their direct
//! mboxes; prints what they did and the throughput.
//!
//! `cargo run --release --example ping_pong [-- ROUNDS]`

use std::time::Instant;

use agentbox::prelude::*;

struct Ping(u64);
struct Pong(u64);
/// Tells the ponger where to answer.
struct Hello(Mbox);

struct Pinger {
    ponger: Mbox,
    rounds: u64,
    started: Option<Instant>,
}

struct Ponger {
    pinger: Option<Mbox>,
}

impl Agent for Pinger {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(Self::on_pong)?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        println!(
            "pinger: introducing myself to the ponger, then {} pings",
            self.rounds
        );
        send(&self.ponger, Hello(ctx.direct_mbox())).unwrap();
        self.started = Some(Instant::now());
        send(&self.ponger, Ping(1)).unwrap();
    }
}

impl Pinger {
    fn on_pong(&mut self, ctx: &mut Context<Self>, pong: &Pong) {
        if pong.0 < self.rounds {
            send(&self.ponger, Ping(pong.0 + 1)).unwrap();
            return;
        }
        let secs = self.started.expect("started").elapsed().as_secs_f64();
        let messages = 2 * self.rounds;
        println!("pinger: pong {} came back, the last one", pong.0);
        println!(
            "{} rounds ({} messages) in {:.3} s: {:.1} M msg/s",
            self.rounds,
            messages,
            secs,
            messages as f64 / secs / 1e6
        );
        ctx.deregister_coop(DeregReason::Normal);
    }
}

impl Agent for Ponger {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, hello: &Hello| {
                println!("ponger: the pinger said hello; answering each ping with a pong");
                a.pinger = Some(hello.0.clone());
            })?;
        ctx.subscribe_self().event(|a: &mut Self, _, ping: &Ping| {
            send(a.pinger.as_ref().expect("hello first"), Pong(ping.0)).unwrap();
        })?;
        Ok(())
    }

    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        println!("ponger: done, the coop is deregistered");
    }
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    Environment::launch(|env| {
        env.introduce_coop(|coop| {
            let ponger = coop.add_agent(Ponger { pinger: None });
            coop.add_agent(Pinger {
                ponger,
                rounds,
                started: None,
            });
        })
        .expect("register the ping-pong coop");
    })
    .expect("launch the environment");
}
