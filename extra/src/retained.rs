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

use parking_lot::ReentrantMutex;

use agentbox::{
    DeliveryFilter, DeliveryMode, Environment, Mbox, Message, MessageType, RedirectionDepth,
    SendError, Sink, SubscribeError,
};

use crate::proxy::{ProxyHooks, ProxyMbox};

#[derive(Default)]
struct Subscriber {
    subscribed: bool,
    filter: Option<DeliveryFilter>,
    given: bool,
}

#[derive(Default)]
struct State {
    retained: HashMap<TypeId, Message>,
    subscribers: HashMap<(TypeId, Sink), Subscriber>,
}

/// What the retained-message mbox adds to the ordinary MPMC mbox it wraps (and whose id it
/// shares).
pub(crate) struct Retained {
    /// Re-entrant: a delivery may come back into this mbox (a limit redirecting here).
    state: ReentrantMutex<RefCell<State>>,
}

/// A new retained-message mbox of `env`.
pub fn create(env: &Environment) -> Mbox {
    ProxyMbox::wrap(
        env.create_mbox(),
        Retained {
            state: ReentrantMutex::new(RefCell::new(State::default())),
        },
    )
}

impl Retained {
    /// Rule 3: gives the retained message of `ty` to `who` if it is due.
    fn give(&self, inner: &Mbox, st: &RefCell<State>, ty: MessageType, who: &Sink) {
        let msg = {
            let mut st = st.borrow_mut();
            let State {
                retained,
                subscribers,
            } = &mut *st;
            let Some(s) = subscribers.get_mut(&(ty.type_id(), who.clone())) else {
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
        who.push_message(inner.id(), msg, 0, DeliveryMode::Nonblocking);
    }

    /// Changes `who`'s entry for `ty`, dropping it once it has neither a subscription nor a
    /// filter.
    fn update(
        &self,
        st: &RefCell<State>,
        ty: MessageType,
        who: &Sink,
        f: impl FnOnce(&mut Subscriber),
    ) {
        let mut st = st.borrow_mut();
        let key = (ty.type_id(), who.clone());
        let s = st.subscribers.entry(key.clone()).or_default();
        f(s);
        if !s.subscribed && s.filter.is_none() {
            st.subscribers.remove(&key);
        }
    }
}

impl ProxyHooks for Retained {
    fn subscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        let guard = self.state.lock();
        inner.raw().subscribe(ty, who)?;
        self.update(&guard, ty, who, |s| s.subscribed = true);
        self.give(inner, &guard, ty, who);
        Ok(())
    }

    fn unsubscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        let guard = self.state.lock();
        inner.raw().unsubscribe(ty, who);
        self.update(&guard, ty, who, |s| {
            s.subscribed = false;
            s.given = false;
        });
    }

    fn deliver(
        &self,
        inner: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let guard = self.state.lock();
        // The inner mbox refuses what an MPMC mbox refuses (mutable messages).
        inner.deliver_with(msg.clone(), depth, mode)?;
        guard.borrow_mut().retained.insert(msg.type_id(), msg);
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        inner: &Mbox,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &Sink,
    ) -> Result<(), SubscribeError> {
        let guard = self.state.lock();
        inner.raw().set_delivery_filter(ty, filter.clone(), who)?;
        self.update(&guard, ty, who, |s| s.filter = Some(filter));
        self.give(inner, &guard, ty, who);
        Ok(())
    }

    fn drop_delivery_filter(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        let guard = self.state.lock();
        inner.raw().drop_delivery_filter(ty, who);
        self.update(&guard, ty, who, |s| s.filter = None);
    }

    fn name(&self, inner: &Mbox) -> String {
        format!("retained({})", inner.name())
    }
}
