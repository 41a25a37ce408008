//! An mbox that tells a notify mbox when its type gets its first subscriber and loses its
//! last one.
//!
//! 1. A multi-consumer mbox for one message type `M` (over an ordinary MPMC mbox whose id it
//!    shares); subscribing to or sending any other type is refused.
//! 2. When the number of agents subscribed to `M` goes from 0 to 1 it sends
//!    [`FirstSubscriber`] to the notify mbox; from 1 to 0, [`LastSubscriberGone`].
//! 3. Agents that only set a delivery filter do not count.
//! 4. Notifications are sent in the order the changes happen.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::mchain::{receive, Handlers, MChainParams, ReceiveParams};
//! use agentbox_extra::first_last_subscriber::{self, FirstSubscriber, LastSubscriberGone};
//!
//! struct Tick;
//! struct Listener(Mbox);
//! impl Agent for Listener {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe(&self.0.clone()).event(|_: &mut Self, _, _: &Tick| {})?;
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         ctx.deregister_coop(DeregReason::Normal);
//!     }
//! }
//!
//! let log = std::cell::RefCell::new(Vec::new());
//! Environment::launch(|env| {
//!     let notify = env.create_mchain(MChainParams::unbounded());
//!     let ticks = first_last_subscriber::create::<Tick>(env, &notify.as_mbox());
//!     env.introduce_coop(|coop| { coop.add_agent(Listener(ticks.clone())); }).unwrap();
//!     receive(&notify, ReceiveParams::new().handle_n(2),
//!         &mut Handlers::new()
//!             .on(|_: &FirstSubscriber| log.borrow_mut().push("first"))
//!             .on(|_: &LastSubscriberGone| log.borrow_mut().push("last gone")));
//! }).unwrap();
//! assert_eq!(*log.borrow(), ["first", "last gone"]);
//! ```

use std::marker::PhantomData;

use parking_lot::Mutex;

use agentbox::{
    DeliveryMode, Environment, Mbox, MboxId, Message, MessageType, RedirectionDepth, SendError,
    Sink, SubscribeError,
};

use crate::proxy::{ProxyHooks, ProxyMbox};

/// The type of the mbox got its first subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstSubscriber {
    /// The mbox.
    pub mbox: MboxId,
}

/// The last subscriber of the mbox's type is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastSubscriberGone {
    /// The mbox.
    pub mbox: MboxId,
}

/// What the notifying mbox adds to the MPMC mbox it wraps.
pub(crate) struct FirstLast<M> {
    notify: Mbox,
    subscribers: Mutex<Vec<Sink>>,
    _type: PhantomData<fn() -> M>,
}

/// A mbox of `env` for messages of type `M` that notifies `notify`.
pub fn create<M: Send + Sync + 'static>(env: &Environment, notify: &Mbox) -> Mbox {
    ProxyMbox::wrap(
        env.create_mbox(),
        FirstLast::<M> {
            notify: notify.clone(),
            subscribers: Mutex::new(Vec::new()),
            _type: PhantomData,
        },
    )
}

impl<M: Send + Sync + 'static> FirstLast<M> {
    fn check(&self, ty: MessageType) -> Result<(), String> {
        if ty == MessageType::of::<M>() {
            Ok(())
        } else {
            Err(format!("takes {} only", std::any::type_name::<M>()))
        }
    }
}

impl<M: Send + Sync + 'static> ProxyHooks for FirstLast<M> {
    fn subscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        self.check(ty).map_err(|reason| SubscribeError::Refused {
            mbox: self.name(inner),
            reason,
        })?;
        // Held while notifying: notifications keep the order of the changes (rule 4).
        let mut subs = self.subscribers.lock();
        inner.raw().subscribe(ty, who)?;
        if !subs.contains(who) {
            subs.push(who.clone());
            if subs.len() == 1 {
                let _ = self.notify.send(FirstSubscriber { mbox: inner.id() });
            }
        }
        Ok(())
    }

    fn unsubscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        let mut subs = self.subscribers.lock();
        inner.raw().unsubscribe(ty, who);
        if let Some(pos) = subs.iter().position(|s| s == who) {
            subs.remove(pos);
            if subs.is_empty() {
                let _ = self.notify.send(LastSubscriberGone { mbox: inner.id() });
            }
        }
    }

    fn deliver(
        &self,
        inner: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        self.check(msg.message_type())
            .map_err(|reason| SendError::Refused {
                type_name: msg.message_type().name(),
                mbox: self.name(inner),
                reason,
            })?;
        inner.deliver_with(msg, depth, mode)
    }

    fn name(&self, inner: &Mbox) -> String {
        format!("first_last({})", inner.name())
    }
}
