//! A round-robin mbox: each message goes to exactly one subscriber of its type, the next in
//! turn.
//!
//! 1. Single-consumer kind: every message has one receiver, so
//!    [`Mutable`](agentbox::Mutable) messages are allowed.
//! 2. Per message type, subscribers are kept in subscription order with a cursor; a message
//!    goes to the subscriber under the cursor, and the cursor moves on.
//! 3. The chosen subscriber's message limit applies as for any delivery: a message it drops
//!    is not re-routed to another subscriber.
//! 4. Delivery filters are refused with [`SubscribeError::FiltersUnsupported`].
//! 5. A message of a type nobody subscribes to is dropped.
//!
//! # Examples
//!
//! Nine jobs over three workers: three each.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use agentbox::prelude::*;
//! use agentbox_extra::round_robin;
//!
//! struct Job;
//! struct Worker { jobs: Mbox, mine: Arc<AtomicUsize>, all: Arc<AtomicUsize> }
//! impl Agent for Worker {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe(&self.jobs.clone()).event(|a: &mut Self, ctx, _: &Job| {
//!             a.mine.fetch_add(1, Ordering::SeqCst);
//!             if a.all.fetch_add(1, Ordering::SeqCst) + 1 == 9 {
//!                 ctx.environment().stop();
//!             }
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
//! let c = counts.clone();
//! Environment::launch(move |env| {
//!     let jobs = round_robin::create(env);
//!     let all = Arc::new(AtomicUsize::new(0));
//!     env.introduce_coop(|coop| {
//!         for mine in c {
//!             coop.add_agent(Worker { jobs: jobs.clone(), mine, all: all.clone() });
//!         }
//!     }).unwrap();
//!     for _ in 0..9 {
//!         send(&jobs, Job).unwrap();
//!     }
//! }).unwrap();
//! assert!(counts.iter().all(|n| n.load(Ordering::SeqCst) == 3));
//! ```

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use agentbox::{
    DeliveryFilter, DeliveryMode, Environment, Mbox, MboxId, MboxImpl, MboxKind, Message,
    MessageType, RedirectionDepth, SendError, Sink, SubscribeError, WeakEnv,
};

struct Turns {
    subscribers: Vec<Sink>,
    cursor: usize,
}

/// The round-robin mbox.
pub(crate) struct RoundRobinMbox {
    id: MboxId,
    env: WeakEnv,
    table: Mutex<HashMap<TypeId, Turns>>,
}

/// A new round-robin mbox of `env`.
pub fn create(env: &Environment) -> Mbox {
    Mbox::custom(Arc::new(RoundRobinMbox {
        id: MboxId::next(),
        env: env.downgrade(),
        table: Mutex::new(HashMap::new()),
    }))
}

impl MboxImpl for RoundRobinMbox {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        let mut table = self.table.lock();
        let turns = table.entry(ty.type_id()).or_insert_with(|| Turns {
            subscribers: Vec::new(),
            cursor: 0,
        });
        if !turns.subscribers.contains(who) {
            turns.subscribers.push(who.clone());
        }
        Ok(())
    }

    fn unsubscribe(&self, ty: MessageType, who: &Sink) {
        let mut table = self.table.lock();
        if let Some(turns) = table.get_mut(&ty.type_id()) {
            if let Some(pos) = turns.subscribers.iter().position(|s| s == who) {
                turns.subscribers.remove(pos);
                // Keep pointing at the same next subscriber.
                if pos < turns.cursor {
                    turns.cursor -= 1;
                }
            }
            if turns.subscribers.is_empty() {
                table.remove(&ty.type_id());
            }
        }
    }

    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let target = {
            let mut table = self.table.lock();
            let Some(turns) = table.get_mut(&msg.type_id()) else {
                return Ok(()); // rule 5
            };
            if turns.cursor >= turns.subscribers.len() {
                turns.cursor = 0;
            }
            let t = turns.subscribers[turns.cursor].clone();
            turns.cursor += 1;
            t
        };
        // Outside the lock: the push may redirect (limits) back into this mbox.
        target.push_message(self.id, msg, depth, mode);
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        _ty: MessageType,
        _filter: DeliveryFilter,
        _who: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _ty: MessageType, _who: &Sink) {}

    fn name(&self) -> String {
        format!("round_robin:{}", self.id.as_u64())
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}
