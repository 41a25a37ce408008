//! A custom mbox written outside the crate, through the public `MboxImpl` trait only: a
//! "tap" that stands in front of an ordinary MPMC mbox, counts what passes per message
//! type, and forwards (incrementing the redirection depth).
//!
//! `cargo run --example custom_mbox`

use std::collections::BTreeMap;
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{
    DeliveryFilter, DeliveryMode, MboxId, MboxImpl, Message, MessageType, RedirectionDepth,
    SendError, Sink, SubscribeError,
};
use parking_lot::Mutex;

struct Tap {
    inner: Mbox,
    counts: Mutex<BTreeMap<&'static str, usize>>,
}

impl MboxImpl for Tap {
    fn id(&self) -> MboxId {
        // Agents key handlers by the id of the mbox that delivers: the inner mbox does.
        self.inner.id()
    }
    fn kind(&self) -> MboxKind {
        self.inner.kind()
    }
    fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        self.inner.raw().subscribe(ty, who)
    }
    fn unsubscribe(&self, ty: MessageType, who: &Sink) {
        self.inner.raw().unsubscribe(ty, who)
    }
    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        *self
            .counts
            .lock()
            .entry(msg.message_type().name())
            .or_default() += 1;
        self.inner.deliver_with(msg, depth + 1, mode)
    }
    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &Sink,
    ) -> Result<(), SubscribeError> {
        self.inner.raw().set_delivery_filter(ty, filter, who)
    }
    fn drop_delivery_filter(&self, ty: MessageType, who: &Sink) {
        self.inner.raw().drop_delivery_filter(ty, who)
    }
    fn name(&self) -> String {
        format!("tap({})", self.inner.name())
    }
    fn environment(&self) -> Option<Environment> {
        self.inner.environment()
    }
}

struct Temperature(f32);

struct Alarm {
    sensors: Mbox,
    alarms: u32,
}

impl Agent for Alarm {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        // Subscriptions and filters go through the tap exactly as to a built-in mbox.
        ctx.set_delivery_filter(&self.sensors, |t: &Temperature| t.0 > 30.0)?;
        ctx.subscribe(&self.sensors)
            .event(|a: &mut Self, ctx, t: &Temperature| {
                a.alarms += 1;
                println!("alarm #{}: {:.1} degrees", a.alarms, t.0);
                if a.alarms == 2 {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
}

fn main() {
    Environment::launch(|env| {
        let tap = Arc::new(Tap {
            inner: env.create_mbox(),
            counts: Mutex::new(BTreeMap::new()),
        });
        let sensors = Mbox::custom(tap.clone());
        env.introduce_coop(|coop| {
            coop.add_agent(Alarm {
                sensors: sensors.clone(),
                alarms: 0,
            });
        })
        .expect("register");
        for t in [21.0, 35.5, 19.0, 31.2, 22.0] {
            send(&sensors, Temperature(t)).expect("send");
        }
        send(&sensors, "not a temperature").expect("send");
        println!("passed through {}: {:?}", sensors.name(), tap.counts.lock());
    })
    .expect("launch");
}
