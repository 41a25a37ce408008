//! A connection as a hierarchical state machine: substates, a time limit as a fallback,
//! `on_enter`/`on_exit` hooks, and a periodic heartbeat that lives only while connected.
//!
//! ```text
//! disconnected ──Connect──▶ connecting ──Established──▶ connected
//!      ▲                     │ (time limit 50 ms)        ├── idle ◀──Done── busy
//!      └──────── failed ◀────┘                           └── busy ◀──Request── idle
//!                  (retries)
//! connected ──Drop──▶ disconnected (the heartbeat timer is cancelled on the way out)
//! ```
//!
//! The first connection attempt gets no answer and falls back through the time limit; the
//! second one succeeds, serves a request, and the link drops after three heartbeats.
//!
//! `cargo run --example connection`

use std::time::Duration;

use agentbox::prelude::*;
use agentbox::{send_delayed, send_periodic, StateError, TimerHandle};

struct Connect;
struct Established;
struct Request(u32);
struct Done;
struct Heartbeat;
struct Drop_;

struct Connection {
    disconnected: State,
    connecting: State,
    failed: State,
    connected: State,
    idle: State,
    busy: State,
    attempts: u32,
    heartbeats: u32,
    heartbeat: Option<TimerHandle>,
}

impl Connection {
    fn new() -> Result<Self, StateError> {
        let connected = State::new("connected");
        Ok(Connection {
            disconnected: State::new("disconnected"),
            connecting: State::new("connecting"),
            failed: State::new("failed"),
            idle: connected.initial_substate("idle")?,
            busy: connected.substate("busy")?,
            connected,
            attempts: 0,
            heartbeats: 0,
            heartbeat: None,
        })
    }
}

impl Agent for Connection {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let me = ctx.direct_mbox();
        // Log every entry and exit (`connected` and `failed` have hooks of their own below).
        for s in [&self.disconnected, &self.connecting, &self.idle, &self.busy] {
            let name = s.name().to_owned();
            ctx.on_enter(s, move |_, _| println!("  enter {name}"));
            let name = s.name().to_owned();
            ctx.on_exit(s, move |_, _| println!("  exit  {name}"));
        }
        // No answer within 50 ms: give up on this attempt.
        ctx.time_limit(
            &self.connecting.clone(),
            Duration::from_millis(50),
            &self.failed.clone(),
        )?;
        // The heartbeat runs only while connected: started on entry, cancelled on exit
        // (dropping the handle cancels the timer and frees its message).
        let m = me.clone();
        ctx.on_enter(&self.connected.clone(), move |a: &mut Self, _| {
            println!("  enter connected (heartbeat every 10 ms)");
            a.heartbeat = Some(
                send_periodic(
                    &m,
                    Duration::from_millis(10),
                    Duration::from_millis(10),
                    Heartbeat,
                )
                .unwrap(),
            );
        });
        ctx.on_exit(&self.connected.clone(), |a: &mut Self, _| {
            println!("  exit  connected (heartbeat cancelled)");
            a.heartbeat = None;
        });

        let (connecting, connected, busy, disconnected) = (
            self.connecting.clone(),
            self.connected.clone(),
            self.busy.clone(),
            self.disconnected.clone(),
        );
        ctx.subscribe_self()
            .in_state(&self.disconnected.clone())
            .in_state(&self.failed.clone())
            .event(move |a: &mut Self, ctx, _: &Connect| {
                a.attempts += 1;
                println!("attempt {}", a.attempts);
                ctx.change_state(&connecting).unwrap();
                if a.attempts >= 2 {
                    // From the second attempt on, the peer answers.
                    send_delayed(&ctx.direct_mbox(), Duration::from_millis(5), Established)
                        .unwrap()
                        .detach();
                }
            })?;
        let m = me.clone();
        ctx.on_enter(&self.failed.clone(), move |_, _| {
            println!("  enter failed: retrying");
            send(&m, Connect).unwrap();
        });
        ctx.subscribe_self()
            .in_state(&self.connecting.clone())
            .just_switch_to::<Established>(&connected)?;
        ctx.subscribe_self().in_state(&self.idle.clone()).event(
            move |_: &mut Self, ctx, r: &Request| {
                println!("request {}", r.0);
                ctx.change_state(&busy).unwrap();
                send(&ctx.direct_mbox(), Done).unwrap();
            },
        )?;
        ctx.subscribe_self().in_state(&self.busy.clone()).event(
            |a: &mut Self, ctx, _: &Done| {
                println!("request done");
                ctx.change_state(&a.idle.clone()).unwrap();
            },
        )?;
        // Subscribed in `connected`: handled in its substates `idle` and `busy` too.
        let m = me.clone();
        ctx.subscribe_self()
            .in_state(&self.connected.clone())
            .event(move |a: &mut Self, _, _: &Heartbeat| {
                a.heartbeats += 1;
                println!("heartbeat {}", a.heartbeats);
                if a.heartbeats == 1 {
                    send(&m, Request(7)).unwrap();
                }
                if a.heartbeats == 3 {
                    send(&m, Drop_).unwrap();
                }
            })?;
        ctx.subscribe_self()
            .in_state(&self.connected.clone())
            .event(move |a: &mut Self, ctx, _: &Drop_| {
                println!("link dropped after {} heartbeats", a.heartbeats);
                ctx.change_state(&disconnected).unwrap();
                ctx.deregister_coop(DeregReason::Normal);
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        ctx.change_state(&self.disconnected.clone()).unwrap();
        send(&ctx.direct_mbox(), Connect).unwrap();
    }
}

fn main() {
    Environment::launch(|env| {
        env.introduce_coop(|coop| {
            coop.add_agent(Connection::new().expect("valid states"));
        })
        .expect("register the connection");
    })
    .expect("launch");
}
