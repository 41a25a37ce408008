//! A retained-message mbox: keeps the last message of each type and hands it to each new
//! subscriber.
//!
//! 1. Multi-consumer: delivers like an ordinary MPMC mbox (filters included).
//! 2. It keeps the last message of every type sent to it, even when nobody subscribes.
//! 3. When an agent subscribes to a type (or sets a filter while subscribed, before it got
//!    the retained message), it gets the retained message of that type at once, through its
//!    filter if it has one. Later subscriptions of the same agent to that type in other
//!    states do not deliver it again (the mbox sees one subscription per agent and type);
//!    after the agent unsubscribed entirely, a new subscription does.
//! 4. Sends and subscriptions are serialised, so a subscriber gets every message exactly
//!    once: either as the retained one or as a regular delivery.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox_extra::retained;
//!
//! struct Config(u32);
//! struct Late { config: Mbox }
//! impl Agent for Late {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe(&self.config.clone()).event(|_: &mut Self, ctx, c: &Config| {
//!             assert_eq!(c.0, 2); // the current configuration, sent before we existed
//!             ctx.deregister_coop(DeregReason::Normal);
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let config = retained::create(env);
//!     send(&config, Config(1)).unwrap();
//!     send(&config, Config(2)).unwrap();
//!     env.introduce_coop(|coop| { coop.add_agent(Late { config }); }).unwrap();
//! }).unwrap();
//! ```

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::ReentrantMutex;

use agentbox::{
    AgentId, AgentRef, DeliveryFilter, Environment, Mbox, MboxId, MboxImpl, MboxKind, Message,
    MessageType, RedirectionDepth, SendError, SubscribeError,
};

#[derive(Default)]
struct Subscriber {
    subscribed: bool,
    filter: Option<DeliveryFilter>,
    given: bool,
}

#[derive(Default)]
struct State {
    retained: HashMap<TypeId, Message>,
    subscribers: HashMap<(TypeId, AgentId), Subscriber>,
}

/// The retained-message mbox (over an ordinary MPMC mbox whose id it shares).
pub struct RetainedMbox {
    inner: Mbox,
    /// Re-entrant: a delivery may come back into this mbox (a limit redirecting here).
    state: ReentrantMutex<RefCell<State>>,
}

/// A new retained-message mbox of `env`.
pub fn create(env: &Environment) -> Mbox {
    Mbox::custom(Arc::new(RetainedMbox {
        inner: env.create_mbox(),
        state: ReentrantMutex::new(RefCell::new(State::default())),
    }))
}

impl RetainedMbox {
    /// Rule 3: gives the retained message of `ty` to `who` if it is due.
    fn give(&self, st: &RefCell<State>, ty: MessageType, who: &AgentRef) {
        let msg = {
            let mut st = st.borrow_mut();
            let State {
                retained,
                subscribers,
            } = &mut *st;
            let Some(s) = subscribers.get_mut(&(ty.type_id(), who.id())) else {
                return;
            };
            if !s.subscribed || s.given {
                return;
            }
            let Some(msg) = retained.get(&ty.type_id()) else {
                return;
            };
            s.given = true;
            if !s.filter.as_ref().is_none_or(|f| f.accepts(msg)) {
                return;
            }
            msg.clone()
        };
        who.push_message(self.inner.id(), msg, 0);
    }
}

impl MboxImpl for RetainedMbox {
    fn id(&self) -> MboxId {
        self.inner.id()
    }

    fn kind(&self) -> MboxKind {
        MboxKind::MultiConsumer
    }

    fn subscribe(&self, ty: MessageType, who: &AgentRef) -> Result<(), SubscribeError> {
        let guard = self.state.lock();
        self.inner.subscribe(ty, who)?;
        guard
            .borrow_mut()
            .subscribers
            .entry((ty.type_id(), who.id()))
            .or_default()
            .subscribed = true;
        self.give(&guard, ty, who);
        Ok(())
    }

    fn unsubscribe(&self, ty: MessageType, who: &AgentRef) {
        let guard = self.state.lock();
        self.inner.unsubscribe(ty, who);
        let mut st = guard.borrow_mut();
        let key = (ty.type_id(), who.id());
        if let Some(s) = st.subscribers.get_mut(&key) {
            s.subscribed = false;
            s.given = false;
            if s.filter.is_none() {
                st.subscribers.remove(&key);
            }
        }
    }

    fn deliver(&self, msg: Message, depth: RedirectionDepth) -> Result<(), SendError> {
        let guard = self.state.lock();
        // The inner mbox refuses what an MPMC mbox refuses (mutable messages).
        self.inner.deliver(msg.clone(), depth)?;
        guard.borrow_mut().retained.insert(msg.type_id(), msg);
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &AgentRef,
    ) -> Result<(), SubscribeError> {
        let guard = self.state.lock();
        self.inner.set_delivery_filter(ty, filter.clone(), who)?;
        guard
            .borrow_mut()
            .subscribers
            .entry((ty.type_id(), who.id()))
            .or_default()
            .filter = Some(filter);
        self.give(&guard, ty, who);
        Ok(())
    }

    fn drop_delivery_filter(&self, ty: MessageType, who: &AgentRef) {
        let guard = self.state.lock();
        self.inner.drop_delivery_filter(ty, who);
        let mut st = guard.borrow_mut();
        let key = (ty.type_id(), who.id());
        if let Some(s) = st.subscribers.get_mut(&key) {
            s.filter = None;
            if !s.subscribed {
                st.subscribers.remove(&key);
            }
        }
    }

    fn name(&self) -> String {
        format!("retained({})", self.inner.name())
    }

    fn environment(&self) -> Option<Environment> {
        self.inner.environment()
    }
}
