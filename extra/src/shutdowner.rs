//! The shutdowner: lets agents finish their own way when the environment is asked to stop.
//!
//! 1. [`Shutdowner::install`] puts a stop guard on the environment and gives a notify mbox.
//!    Agents that want a say subscribe to [`ShutdownInitiated`] from it.
//! 2. On [`Environment::stop`] every such subscriber gets `ShutdownInitiated`; the
//!    environment keeps running until all of them have unsubscribed (usually by
//!    deregistering their coops), then it stops as usual.
//! 3. With no subscriber at the time of the stop, the stop goes on at once.
//! 4. If they are not all gone within the maximum time, a log line is written through the
//!    environment's error logger and the process aborts.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox_extra::shutdowner::{Shutdowner, ShutdownInitiated};
//!
//! struct Saver { notices: Mbox }
//! impl Agent for Saver {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe(&self.notices.clone()).event(|_: &mut Self, ctx, _: &ShutdownInitiated| {
//!             // Save state, flush, ... then go.
//!             ctx.deregister_coop(DeregReason::Normal);
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let shutdowner = Shutdowner::install(env, Duration::from_secs(60)).unwrap();
//!     env.introduce_coop(|coop| { coop.add_agent(Saver { notices: shutdowner.mbox() }); }).unwrap();
//!     env.stop(); // Saver is told, deregisters, then the environment stops
//! }).unwrap();
//! ```

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use agentbox::{
    DeliveryMode, Environment, Mbox, Message, MessageType, RedirectionDepth, SendError, Sink,
    StopGuard, StopGuardError, SubscribeError, WeakEnv,
};

use crate::proxy::{ProxyHooks, ProxyMbox};

/// Sent to the shutdowner's subscribers when a stop is requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownInitiated;

/// A handle to an installed shutdowner.
#[derive(Clone)]
pub struct Shutdowner(Arc<Inner>);

impl std::fmt::Debug for Shutdowner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shutdowner")
            .field("mbox", &self.0.mbox)
            .finish_non_exhaustive()
    }
}

struct Inner {
    mbox: Mbox,
    env: WeakEnv,
    max_time: Duration,
    state: Mutex<State>,
    me: Weak<Inner>,
    /// The installed guard (it holds this `Inner`): taken out when released.
    guard: Mutex<Option<Arc<dyn StopGuard>>>,
}

#[derive(Default)]
struct State {
    subscribers: Vec<Sink>,
    stopping: bool,
    released: bool,
}

/// The notify mbox's hooks over an MPMC mbox: count who subscribes to `ShutdownInitiated`.
struct Notices {
    owner: Weak<Inner>,
}

impl Shutdowner {
    /// Installs the shutdowner on `env`, with the longest time to wait for subscribers
    /// after a stop.
    ///
    /// # Errors
    ///
    /// [`StopGuardError::StopInProgress`] when the environment is already stopping.
    pub fn install(env: &Environment, max_time: Duration) -> Result<Shutdowner, StopGuardError> {
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| Inner {
            mbox: ProxyMbox::wrap(env.create_mbox(), Notices { owner: me.clone() }),
            env: env.downgrade(),
            max_time,
            state: Mutex::new(State::default()),
            me: me.clone(),
            guard: Mutex::new(None),
        });
        let guard: Arc<dyn StopGuard> = Arc::new(Guard(inner.clone()));
        *inner.guard.lock() = Some(guard.clone());
        if let Err(e) = env.setup_stop_guard(guard) {
            inner.guard.lock().take();
            return Err(e);
        }
        Ok(Shutdowner(inner))
    }

    /// The mbox to subscribe to [`ShutdownInitiated`] from.
    pub fn mbox(&self) -> Mbox {
        self.0.mbox.clone()
    }

    /// Number of agents subscribed to the notice.
    pub fn subscriber_count(&self) -> usize {
        self.0.state.lock().subscribers.len()
    }
}

struct Guard(Arc<Inner>);

impl StopGuard for Guard {
    fn stop(&self) {
        let inner = &self.0;
        let empty = {
            let mut st = inner.state.lock();
            st.stopping = true;
            st.subscribers.is_empty()
        };
        // Rule 2: tell everyone (outside the lock: an agent may unsubscribe at once).
        let _ = inner.mbox.send(ShutdownInitiated);
        if empty {
            inner.release();
            return;
        }
        // Rule 4: the watchdog.
        let me = inner.me.clone();
        let max = inner.max_time;
        let _ = std::thread::Builder::new()
            .name("agentbox-shutdowner".into())
            .spawn(move || {
                // A `max_time` too long for an `Instant` never aborts.
                let deadline = std::time::Instant::now().checked_add(max);
                loop {
                    let Some(inner) = me.upgrade() else { return };
                    let released = inner.state.lock().released;
                    if released {
                        return;
                    }
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        let line = format!(
                            "shutdowner: {} subscriber(s) still there after {:?}: aborting",
                            inner.state.lock().subscribers.len(),
                            max
                        );
                        match inner.env.upgrade() {
                            Some(env) => env.log_error(&line),
                            None => eprintln!("agentbox: {line}"),
                        }
                        std::process::abort();
                    }
                    drop(inner);
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
    }
}

impl Inner {
    /// Removes the stop guard, once.
    fn release(&self) {
        let guard = {
            let mut st = self.state.lock();
            if st.released {
                return;
            }
            st.released = true;
            self.guard.lock().take()
        };
        if let (Some(env), Some(guard)) = (self.env.upgrade(), guard) {
            env.remove_stop_guard(&guard);
        }
    }
}

impl ProxyHooks for Notices {
    fn subscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        inner.raw().subscribe(ty, who)?;
        if ty != MessageType::of::<ShutdownInitiated>() {
            return Ok(());
        }
        let Some(owner) = self.owner.upgrade() else {
            return Ok(());
        };
        let late = {
            let mut st = owner.state.lock();
            if !st.subscribers.contains(who) {
                st.subscribers.push(who.clone());
            }
            st.stopping
        };
        if late {
            // Subscribed after the notice went out: it gets its own.
            who.push_message(
                inner.id(),
                Message::new(ShutdownInitiated),
                0,
                DeliveryMode::Nonblocking,
            );
        }
        Ok(())
    }

    fn unsubscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        inner.raw().unsubscribe(ty, who);
        if ty != MessageType::of::<ShutdownInitiated>() {
            return;
        }
        let Some(owner) = self.owner.upgrade() else {
            return;
        };
        let done = {
            let mut st = owner.state.lock();
            st.subscribers.retain(|s| s != who);
            st.stopping && st.subscribers.is_empty()
        };
        if done {
            owner.release();
        }
    }

    fn deliver(
        &self,
        inner: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        inner.deliver_with(msg, depth, mode)
    }

    fn name(&self, inner: &Mbox) -> String {
        format!("shutdowner({})", inner.name())
    }
}
