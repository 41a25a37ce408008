//! The [`Actor`] trait and its [`ActorContext`]: what a YDB developer writes.

use std::any::TypeId;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use super::delivery::{Delivery, ScheduleHandle};
use super::event::Event;
use super::flags::EventFlags;
use super::handle::{EventHandle, Handled};
use super::id::ActorId;
use super::idle::{Dock, Parked};
use super::inner::{ActorSystem, RegisterActorError, SystemInner};
use super::mailbox::{Guest, HostSignal, Hosted, MailboxAgent};
use super::routing::RouteCache;
use crate::exception::ExceptionReaction;
use crate::mbox::Mbox;

/// A state function: receives every event of its actor while it is the current one
/// (YDB's `STFUNC`). Switch with [`ActorContext::become_state`].
pub type StateFn<A> = fn(&mut A, &mut ActorContext<A>, EventHandle) -> Handled;

/// A YDB actor: a struct that owns its data and reacts to events, one at a time.
///
/// [`bootstrap`](Self::bootstrap) is its first event, with its parent's id (empty when
/// registered from outside any actor); it normally sets the state function with
/// [`ActorContext::become_state`]. Every later event goes to the current state function.
/// An actor ends only by calling [`ActorContext::pass_away`] from its own code — or by
/// leaving [`Poison`](super::Poison) unhandled, which passes it away.
///
/// An actor runs as an agent of the core on its pool's dispatcher, so the core's
/// exception reactions, tracing and stats apply; a panic in its code is handled by
/// [`exception_reaction`](Self::exception_reaction) (`DeregisterCoop` passes it away).
///
/// # Examples
///
/// ```
/// use agentbox::actors::*;
/// use agentbox::{ActorId, Environment};
///
/// const MY_EVENTS: u32 = event_space_begin(ES_USERSPACE);
/// struct Ping(u32);
/// impl Event for Ping { const EVENT_TYPE: u32 = MY_EVENTS + 1; }
/// struct Pong(u32);
/// impl Event for Pong { const EVENT_TYPE: u32 = MY_EVENTS + 2; }
///
/// struct Ponger;
/// impl Actor for Ponger {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
///         ctx.become_state(Self::serving);
///     }
/// }
/// impl Ponger {
///     fn serving(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
///         if let Some(ping) = ev.take::<Ping>() {
///             // Reply to the sender, echoing the cookie.
///             ctx.send_with(ev.sender(), Pong(ping.0), EventFlags::empty(), ev.cookie());
///             return Handled::Yes;
///         }
///         ev.unhandled() // Poison given back: the actor passes away
///     }
/// }
///
/// struct Pinger { ponger: ActorId, left: u32 }
/// impl Actor for Pinger {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
///         ctx.become_state(Self::playing);
///         ctx.send_with(self.ponger, Ping(self.left), EventFlags::empty(), 7);
///     }
/// }
/// impl Pinger {
///     fn playing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
///         let Some(pong) = ev.get::<Pong>() else { return ev.unhandled() };
///         assert_eq!(ev.cookie(), 7);
///         if pong.0 == 0 {
///             ctx.send(self.ponger, Poison);
///             ctx.pass_away().unwrap();
///         } else {
///             ctx.send_with(self.ponger, Ping(pong.0 - 1), EventFlags::empty(), 7);
///         }
///         Handled::Yes
///     }
/// }
///
/// Environment::launch(|env| {
///     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
///     let ponger = system.register(Ponger).unwrap();
///     system.register(Pinger { ponger, left: 3 }).unwrap();
/// }).unwrap(); // returns once both actors have passed away
/// ```
pub trait Actor: Send + Sized + 'static {
    /// The actor's first event; `parent` is the id of the actor that registered it.
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, parent: ActorId);

    /// The reaction to a panic in this actor's code, read once at registration (default
    /// [`ExceptionReaction::Inherit`]: the environment's). Actors sharing a mailbox share
    /// the reaction of the first.
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Inherit
    }
}

/// Why [`ActorContext::pass_away`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PassAwayError {
    /// The actor has already passed away (in this handler or an earlier one).
    #[error("actor {0} has already passed away")]
    AlreadyPassedAway(ActorId),
}

/// An actor's handle to its system, given to `bootstrap` and every state function.
pub struct ActorContext<A: Actor> {
    pub(crate) sys: Arc<SystemInner>,
    pub(crate) self_id: ActorId,
    pub(crate) state: Option<StateFn<A>>,
    pub(crate) passed_away: bool,
    /// Its mailbox (set when the mailbox is defined).
    pub(crate) mailbox: Option<Mbox>,
    /// Actors registered with the same mailbox in the running handler, with their parent.
    pub(crate) children: Vec<Box<dyn Hosted>>,
    /// The route of the last recipient sent to twice in a row.
    route_cache: RefCell<RouteCache>,
}

impl<A: Actor> std::fmt::Debug for ActorContext<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorContext")
            .field("self_id", &self.self_id)
            .field("passed_away", &self.passed_away)
            .finish_non_exhaustive()
    }
}

impl<A: Actor> ActorContext<A> {
    pub(crate) fn new(sys: Arc<SystemInner>, self_id: ActorId) -> Self {
        ActorContext {
            sys,
            self_id,
            state: None,
            passed_away: false,
            mailbox: None,
            children: Vec::new(),
            route_cache: RefCell::new(RouteCache::default()),
        }
    }

    /// The actor's own id.
    pub fn self_id(&self) -> ActorId {
        self.self_id
    }

    /// The node id of the actor's system.
    pub fn node_id(&self) -> u32 {
        self.sys.node_id
    }

    /// A handle to the actor's system.
    pub fn system(&self) -> ActorSystem {
        ActorSystem(self.sys.clone())
    }

    /// Makes `state` the state function for the next event (YDB's `Become`).
    pub fn become_state(&mut self, state: StateFn<A>) {
        self.state = Some(state);
    }

    /// Whether `state` is the current state function.
    pub fn is_in_state(&self, state: StateFn<A>) -> bool {
        self.state.is_some_and(|s| std::ptr::fn_addr_eq(s, state))
    }

    /// Sends `event` to `recipient` from this actor: no flags, cookie 0. A send to a dead
    /// or unknown actor is safe (see the non-delivery rules in the module docs).
    #[inline]
    pub fn send<E: Event>(&self, recipient: ActorId, event: E) {
        self.sys.send_event_cached(
            &self.route_cache,
            recipient,
            self.self_id,
            event,
            EventFlags::empty(),
            0,
        );
    }

    /// Sends `event` with `flags` (and channel) and `cookie`.
    #[inline]
    pub fn send_with<E: Event>(
        &self,
        recipient: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) {
        self.sys.send_event_cached(
            &self.route_cache,
            recipient,
            self.self_id,
            event,
            flags,
            cookie,
        );
    }

    /// Sends a handle as it is (its sender included), e.g. one built with
    /// [`EventHandle::forward_on_nondelivery`].
    pub fn send_handle(&self, handle: EventHandle) {
        self.sys.send(handle);
    }

    /// Forwards `handle` to `recipient`, keeping its sender, cookie and flags (YDB's
    /// `Forward`).
    pub fn forward(&self, mut handle: EventHandle, recipient: ActorId) {
        handle.readdress(recipient);
        self.sys.send(handle);
    }

    /// Sends `event` to this actor after `delay` (YDB's `Schedule`), from this actor.
    pub fn schedule<E: Event>(&self, delay: Duration, event: E) -> ScheduleHandle {
        let handle = EventHandle::new(self.self_id, self.self_id, event);
        match &self.mailbox {
            Some(m) => self.sys.schedule(m, delay, handle),
            None => {
                self.sys.send(handle);
                ScheduleHandle::new(None, Arc::new(AtomicBool::new(false)))
            }
        }
    }

    /// Registers `actor` on this actor's pool with a mailbox of its own; this actor is
    /// its parent. Its bootstrap may run on another thread before this returns.
    ///
    /// # Errors
    ///
    /// [`RegisterActorError`] when the system is stopping or the core refuses the coop.
    pub fn register<B: Actor>(&self, actor: B) -> Result<ActorId, RegisterActorError> {
        self.sys
            .register(self.self_id.pool_id(), actor, self.self_id)
    }

    /// Registers `actor` on the pool named `pool` with a mailbox of its own.
    ///
    /// # Errors
    ///
    /// [`RegisterActorError::UnknownPool`], or as [`register`](Self::register).
    pub fn register_on<B: Actor>(
        &self,
        pool: &str,
        actor: B,
    ) -> Result<ActorId, RegisterActorError> {
        let pool = self.sys.pool_id(pool)?;
        self.sys.register(pool, actor, self.self_id)
    }

    /// Registers `actor` on this actor's mailbox (YDB's `RegisterWithSameMailbox`): it never
    /// runs concurrently with this actor (nor with any actor of the mailbox). Its
    /// bootstrap runs right after the running handler returns, before any other event.
    ///
    /// # Errors
    ///
    /// [`RegisterActorError::ShuttingDown`] when the system is stopping,
    /// [`RegisterActorError::TableFull`] when the pool's hints are exhausted.
    pub fn register_with_same_mailbox<B: Actor>(
        &mut self,
        actor: B,
    ) -> Result<ActorId, RegisterActorError> {
        let Some(mailbox) = self.mailbox.clone() else {
            return Err(RegisterActorError::ShuttingDown);
        };
        let child =
            self.sys
                .host_in_mailbox(self.self_id.pool_id(), actor, self.self_id, mailbox)?;
        let id = child.id();
        self.children.push(child);
        Ok(id)
    }

    /// Ends the actor (YDB's `PassAway`): its id stops resolving at once, the running
    /// handler completes, and events still queued for it get the non-delivery treatment.
    ///
    /// Only an actor's own code can do this: nothing outside a handler has an
    /// `ActorContext`, and the system handle has no such method:
    ///
    /// ```compile_fail
    /// use agentbox::actors::ActorSystem;
    /// fn from_outside(system: &ActorSystem) {
    ///     system.pass_away(); // no: an actor is never killed from outside
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// [`PassAwayError::AlreadyPassedAway`] on a second call.
    pub fn pass_away(&mut self) -> Result<(), PassAwayError> {
        if self.passed_away {
            return Err(PassAwayError::AlreadyPassedAway(self.self_id));
        }
        self.passed_away = true;
        self.sys.forget(self.self_id);
        Ok(())
    }

    /// Whether [`pass_away`](Self::pass_away) has been called.
    pub fn has_passed_away(&self) -> bool {
        self.passed_away
    }
}

/// An actor with its context: what a mailbox hosts ([`Hosted`]).
pub(crate) struct Cell<A: Actor> {
    pub(crate) actor: A,
    pub(crate) ctx: ActorContext<A>,
    pub(crate) parent: ActorId,
}

impl<A: Actor> Cell<A> {
    pub(crate) fn new(actor: A, ctx: ActorContext<A>, parent: ActorId) -> Self {
        Cell { actor, ctx, parent }
    }
}

impl<A: Actor> Hosted for Cell<A> {
    #[inline]
    fn id(&self) -> ActorId {
        self.ctx.self_id
    }

    fn bootstrap(&mut self, parent: ActorId) {
        self.actor.bootstrap(&mut self.ctx, parent);
    }

    #[inline]
    fn handle(&mut self, ev: EventHandle) -> Option<EventHandle> {
        match self.ctx.state {
            Some(f) => match f(&mut self.actor, &mut self.ctx, ev) {
                Handled::Yes => None,
                Handled::No(ev) => Some(ev),
            },
            None => Some(ev),
        }
    }

    #[inline]
    fn passed_away(&self) -> bool {
        self.ctx.passed_away
    }

    fn pass_away_quietly(&mut self) {
        let _ = self.ctx.pass_away();
    }

    fn take_children(&mut self) -> Vec<Box<dyn Hosted>> {
        std::mem::take(&mut self.ctx.children)
    }

    fn set_mailbox(&mut self, mbox: &crate::Mbox) {
        self.ctx.mailbox = Some(mbox.clone());
    }

    fn parent(&self) -> ActorId {
        self.parent
    }

    /// The handle in `slot` (always `Some`) is taken out only as the state function's
    /// argument: moved through the mailbox's steps by value, the 88-byte handle was copied
    /// three times between its node and the call (callgrind, `ydb_ping_pong_one_thread`).
    #[inline(always)]
    fn handle_in(&mut self, slot: &mut Option<EventHandle>) -> Option<EventHandle> {
        match self.ctx.state {
            Some(f) => match f(&mut self.actor, &mut self.ctx, slot.take()?) {
                Handled::Yes => None,
                Handled::No(ev) => Some(ev),
            },
            None => slot.take(),
        }
    }

    #[inline]
    fn has_children(&self) -> bool {
        !self.ctx.children.is_empty()
    }

    fn exception_reaction(&self) -> ExceptionReaction {
        self.actor.exception_reaction()
    }
}

/// An actor given to a parked mailbox, with its id and parent (see `idle.rs`).
pub(crate) struct Pending<A> {
    actor: A,
    id: ActorId,
    parent: ActorId,
}

impl<A: Actor> Guest for A {
    type Cell = Cell<A>;
    type Pending = Pending<A>;

    fn adopt(p: Pending<A>, sys: Arc<SystemInner>, mbox: &Mbox) -> Cell<A> {
        let mut ctx = ActorContext::new(sys, p.id);
        ctx.mailbox = Some(mbox.clone());
        Cell::new(p.actor, ctx, p.parent)
    }

    fn pending_id(p: &Pending<A>) -> ActorId {
        p.id
    }
}

impl SystemInner {
    /// Registers `actor` with a mailbox of its own on `pool`.
    ///
    /// 1. A local id and a slot (hint) are reserved.
    /// 2. A parked mailbox for actors of type `A` (see `idle.rs`) is taken if there is
    ///    one: the slot resolves to it, the actor's cell goes to its hand-off slot and a
    ///    signal to its queue. Done: no agent, no coop.
    /// 3. Else the mailbox agent is made and the slot filled with its mbox, so that the
    ///    actor's bootstrap can already reach itself.
    /// 4. Its coop is registered on the pool's dispatcher; on failure the slot is freed.
    pub(crate) fn register<A: Actor>(
        &self,
        pool: u32,
        actor: A,
        parent: ActorId,
    ) -> Result<ActorId, RegisterActorError> {
        let parked = match self.pools.get(pool as usize) {
            Some(p) => p.idle.take(TypeId::of::<A>()),
            None => None,
        };
        let (actor, id) = match parked {
            Some(parked) => match self.register_parked(pool, parked, actor, parent)? {
                Ok(id) => return Ok(id),
                Err(p) => (p.actor, p.id),
            },
            None => (actor, self.new_id(pool)?),
        };
        let sys = match self.arc() {
            Ok(sys) => sys,
            Err(e) => {
                self.forget(id);
                return Err(e);
            }
        };
        let cell = Cell::new(actor, ActorContext::new(sys.clone(), id), parent);
        self.register_fresh(pool, sys, cell)
    }

    /// Steps 3 and 4 of [`register`](Self::register): `cell`, whose id is reserved, gets
    /// a mailbox of its own.
    fn register_fresh<A: Actor>(
        &self,
        pool: u32,
        sys: Arc<SystemInner>,
        cell: Cell<A>,
    ) -> Result<ActorId, RegisterActorError> {
        let id = cell.ctx.self_id;
        let p = self.pool(pool);
        let agent = MailboxAgent::<A>::new(sys, pool, cell);
        let mut coop = self.env.make_coop();
        coop.set_binder(p.binder.clone());
        let mbox = coop.add_agent(agent);
        let mbox_for_stop = mbox.clone();
        p.table.fill(id.hint(), id.local_id(), mbox);
        match self.env.register_coop(coop) {
            Ok(_) => {
                // A stop that began after `new_id`'s check did not see this mailbox.
                if self.stopping.load(Ordering::Acquire) {
                    let _ = mbox_for_stop.send_mutable(Delivery::stop());
                }
                Ok(id)
            }
            Err(e) => {
                p.table.remove(id.hint(), id.local_id());
                Err(e.into())
            }
        }
    }

    /// Step 2 of [`register`](Self::register): `actor` goes to the parked mailbox
    /// `parked`, its id resolving to it at once. `Ok(Err(pending))` when the mailbox has
    /// ended meanwhile (the environment stops): the actor, its id reserved, needs a
    /// mailbox of its own. The mailbox makes the actor's context (`Guest::adopt`): here
    /// the system's reference count, shared by every thread, would be taken, and dropped
    /// there.
    fn register_parked<A: Actor>(
        &self,
        pool: u32,
        parked: Parked,
        actor: A,
        parent: ActorId,
    ) -> Result<Result<ActorId, Pending<A>>, RegisterActorError> {
        self.env.idle_coops_changed(-1);
        let mbox = parked.mbox();
        let id = match self.new_id_with(pool, Some(mbox.clone())) {
            Ok(id) => id,
            Err(e) => {
                let _ = mbox.send_mutable(Delivery::stop());
                return Err(e);
            }
        };
        let pending = Pending { actor, id, parent };
        let Some(dock) = parked.as_any().downcast_ref::<Dock<Pending<A>>>() else {
            return Ok(Err(pending)); // never: the lists are by actor type
        };
        if let Err(pending) = dock.put(pending) {
            return Ok(Err(pending));
        }
        let _ = mbox.send(HostSignal);
        // A stop that began after `new_id`'s check did not see this mailbox.
        if self.stopping.load(Ordering::Acquire) {
            let _ = mbox.send_mutable(Delivery::stop());
        }
        Ok(Ok(id))
    }

    /// An actor for an existing mailbox (`register_with_same_mailbox`); it resolves at
    /// once.
    pub(crate) fn host_in_mailbox<A: Actor>(
        &self,
        pool: u32,
        actor: A,
        parent: ActorId,
        mailbox: Mbox,
    ) -> Result<Box<dyn Hosted>, RegisterActorError> {
        let sys = self.arc()?;
        let id = self.new_id(pool)?;
        let mut ctx = ActorContext::new(sys, id);
        ctx.mailbox = Some(mailbox.clone());
        self.pool(pool)
            .table
            .fill(id.hint(), id.local_id(), mailbox);
        Ok(Box::new(Cell::new(actor, ctx, parent)))
    }
}
