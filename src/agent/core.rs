//! The untyped, shared part of an agent: what mboxes and dispatchers touch.

use std::any::TypeId;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use super::cell::{SetOnce, ThinArc, ThinWeak};

use parking_lot::{Mutex, RwLock};

use super::fast_types::{self, type_key, FastTypes};
use super::{AgentId, Priority};
use crate::coop::CoopInner;
use crate::dispatcher::{AgentKey, Demand, DemandKind, EventQueue, Run};
use crate::drops::{DropCounters, DropReason};
use crate::environment::{Environment, WeakEnv};
use crate::exception::ExceptionReaction;
use crate::limits::{Limit, LimitTable, Overflow};
use crate::mbox::{DeliveryFilter, DeliveryMode, MboxId};
use crate::message::{Access, Message, MessageType, RedirectionDepth};
use crate::small_map::SmallMap;
use crate::trace::{self, Trace, TraceEvent, TraceRecord};

/// Agent status, in the order an agent goes through them.
///
/// | value | status | demands |
/// |---|---|---|
/// | 0 | `DEFINING`: created, `define` may run | queued in `pending` |
/// | 1 | `ACTIVE`: bound, `on_start` queued first | handled |
/// | 2 | `DEREGISTERING`: its coop is going | messages dropped; `Finish` handled |
/// | 3 | `FINISHED`: `on_finish` has run | dropped |
pub(crate) const DEFINING: u8 = 0;
pub(crate) const ACTIVE: u8 = 1;
pub(crate) const DEREGISTERING: u8 = 2;
pub(crate) const FINISHED: u8 = 3;

/// One message type on the agent's direct mbox. A filter may exist without a subscription.
#[derive(Default)]
pub(crate) struct DirectEntry {
    subscribed: bool,
    filter: Option<DeliveryFilter>,
}

/// In declaration order (`repr(C)`), hot fields first: a send reads `binding`, `limits`,
/// `trace`, `id`, `status` and `fast_types`, and a worker reads `limits` and `status` for
/// every message; together they take the first 112 bytes (128 with the `Arc`'s counts), so
/// a send touches two or three cache lines of the core, where the compiler's order spread
/// them over five or six.
#[repr(C)]
pub(crate) struct AgentCore {
    /// Set once at binding: where this agent's demands go and its key there.
    binding: SetOnce<(Arc<dyn EventQueue>, AgentKey)>,
    /// Message limits, fixed at the agent's first subscription (unset: no limits). Boxed:
    /// most agents have none, and the core is allocated per agent.
    pub(crate) limits: OnceLock<Box<LimitTable>>,
    /// The environment's tracer, if tracing is on.
    pub(crate) trace: Trace,
    pub(crate) id: AgentId,
    status: AtomicU8,
    /// Where the executor is (see `cell.rs`), in what was padding.
    exec_state: AtomicU8,
    pub(crate) priority: Priority,
    pub(crate) reaction: ExceptionReaction,
    /// A lock-free copy of the subscribed types of the direct mbox, published under the
    /// `direct` write lock (see `fast_types.rs` for its protocol).
    fast_types: FastTypes,
    // Cold: registration, binding, subscription and the way out.
    pub(crate) env: WeakEnv,
    /// What waits in the core for the agent's worker (one lock for both: 8 bytes less in
    /// every agent than two).
    unbound: Mutex<Unbound>,
    direct: RwLock<SmallMap<TypeId, DirectEntry, 1>>,
    /// Set once, at registration (step 1), by the one coop the agent is in.
    coop: SetOnce<Weak<CoopInner>>,
    /// The environment's drop counters.
    pub(crate) drops: Arc<DropCounters>,
    /// Its type name and current state, for `Environment::introspect` (feature `monitor`
    /// only: 24 bytes an agent that a build without the page does not pay).
    #[cfg(feature = "monitor")]
    pub(crate) shown: super::shown::Shown,
}

/// The parts of an agent's core its worker has not taken yet. (The executor waits in the
/// agent's block between binding and its worker's taking it: see `cell.rs`. One never
/// taken, its `Bind` dropped unrun, is dropped with the coop, see `CoopInner`'s `Drop`, or
/// with the block.)
#[derive(Default)]
struct Unbound {
    /// Demands pushed before the agent was bound; flushed right after its `Start`.
    pending: Vec<DemandKind>,
}

impl AgentCore {
    pub(crate) fn new(
        id: AgentId,
        priority: Priority,
        reaction: ExceptionReaction,
        env: &Environment,
        type_name: fn() -> &'static str,
    ) -> Self {
        #[cfg(not(feature = "monitor"))]
        let _ = type_name;
        AgentCore {
            id,
            priority,
            reaction,
            env: env.downgrade(),
            status: AtomicU8::new(DEFINING),
            exec_state: super::cell::new_exec_state(),
            binding: SetOnce::new(),
            unbound: Mutex::new(Unbound::default()),
            direct: RwLock::new(SmallMap::default()),
            fast_types: FastTypes::new(),
            coop: SetOnce::new(),
            trace: env.0.trace.clone(),
            drops: env.0.drops.clone(),
            limits: OnceLock::new(),
            #[cfg(feature = "monitor")]
            shown: super::shown::Shown::new(type_name),
        }
    }

    pub(crate) fn mbox_id(&self) -> MboxId {
        MboxId(self.id.0)
    }

    /// Whether the agent's coop is going or gone: it handles no more messages.
    #[inline]
    pub(crate) fn takes_no_messages(&self) -> bool {
        self.status() >= DEREGISTERING
    }

    #[inline]
    pub(crate) fn status(&self) -> u8 {
        self.status.load(Ordering::Acquire)
    }

    /// Moves `from -> to`; false if the status was something else.
    pub(crate) fn transition(&self, from: u8, to: u8) -> bool {
        self.status
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn set_status(&self, to: u8) {
        self.status.store(to, Ordering::Release);
    }

    pub(crate) fn coop(&self) -> Option<Arc<CoopInner>> {
        self.coop.get().and_then(Weak::upgrade)
    }

    /// Puts the agent in its coop (registration step 1; the first coop stays).
    pub(crate) fn join_coop(&self, coop: &Arc<CoopInner>) {
        let _ = self.coop.set(Arc::downgrade(coop));
    }

    pub(crate) fn direct_set_subscribed(&self, ty: TypeId, on: bool) {
        // One lookup where an entry exists, a lookup and a push where it does not (and
        // nothing for an unsubscription of a type without one): `entry_or_insert_with`
        // looked the key up three times.
        self.direct_update(|t| match t.get_mut(&ty) {
            Some(e) => e.subscribed = on,
            None if on => {
                t.insert(
                    ty,
                    DirectEntry {
                        subscribed: true,
                        filter: None,
                    },
                );
            }
            None => {}
        });
    }

    pub(crate) fn direct_set_filter(&self, ty: MessageType, filter: Option<DeliveryFilter>) {
        self.direct_update(|t| {
            t.entry_or_insert_with(ty.type_id(), DirectEntry::default)
                .filter = filter
        });
    }

    pub(crate) fn direct_clear(&self) {
        let t = self.direct.read();
        if t.is_empty() {
            // Nothing to clear, and the fast copy already says so: every change to the
            // table published it, and a new core's copy is the empty table's.
            return;
        }
        drop(t);
        let mut t = self.direct.write();
        *t = SmallMap::default();
        self.fast_types.publish(Some(&[]));
    }

    /// Changes the table and publishes the fast copy, both under the write lock.
    ///
    /// Races: see `fast_types.rs` (a sender sees the whole old or the whole new set).
    fn direct_update(&self, change: impl FnOnce(&mut SmallMap<TypeId, DirectEntry, 1>)) {
        let mut t = self.direct.write();
        change(&mut t);
        t.retain(|_, e| e.subscribed || e.filter.is_some());
        // One walk: the copy is exact while every entry is a plain subscription and they
        // fit its slots.
        let mut keys = [0u32; fast_types::SLOTS];
        let mut n = 0;
        let mut exact = true;
        for (k, e) in t.iter() {
            if n == fast_types::SLOTS || e.filter.is_some() || !e.subscribed {
                exact = false;
                break;
            }
            keys[n] = type_key(k);
            n += 1;
        }
        self.fast_types.publish(exact.then_some(&keys[..n]));
    }

    /// Whether a message for this agent would surely be queued for it, and then could run
    /// only after the current thread returns from the demand it is running (see
    /// `EventQueue::blocked_by_current_thread`). An agent with message limits may send it
    /// elsewhere (a redirect): not sure.
    pub(crate) fn surely_blocked_by_current_thread(&self) -> bool {
        self.limits.get().is_none()
            && self
                .binding
                .get()
                .is_some_and(|(q, _)| q.blocked_by_current_thread())
    }

    /// Whether the direct mbox is subscribed to `ty` (its filter aside).
    pub(crate) fn subscribes_directly(&self, ty: TypeId) -> bool {
        self.direct
            .read_recursive()
            .get(&ty)
            .is_some_and(|e| e.subscribed)
    }

    /// Whether the direct mbox takes `msg`: subscribed, and through its filter if any.
    #[inline]
    fn direct_accepts(&self, msg: &Message) -> bool {
        let ty = msg.type_id();
        if let Some(subscribed) = self.fast_types.lookup(type_key(&ty)) {
            return subscribed;
        }
        // The filter runs after the table's lock is released: it is user code, and may
        // wait for this agent, which takes the table's write lock to subscribe.
        let filter = match self.direct.read_recursive().get(&ty) {
            Some(e) if e.subscribed => e.filter.clone(),
            _ => return false,
        };
        filter.is_none_or(|f| f.accepts(msg))
    }
}

impl super::cell::Header for AgentCore {
    fn exec_state(&self) -> &AtomicU8 {
        &self.exec_state
    }
}

impl Drop for AgentCore {
    /// Messages that waited for a binding that never came (the registration failed) are
    /// counted as dropped: their receiver is gone without having started.
    fn drop(&mut self) {
        if self.unbound.get_mut().pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.unbound.get_mut().pending);
        for kind in pending {
            if let DemandKind::Message { mbox, msg } = kind {
                receiver_finished(self, mbox, msg);
            }
        }
    }
}

/// The agent's block (its core, then its executor: one allocation), by a one-word pointer.
pub(crate) type AgentArc = ThinArc<AgentCore>;
/// A weak reference to the agent's block.
pub(crate) type AgentWeak = ThinWeak<AgentCore>;
/// The owner of the executor in the agent's block.
pub(crate) type ExecBox = super::cell::ExecBox<AgentCore>;

/// The executable half of an agent: the user's value, its context and handlers. Owned by
/// exactly one party at a time — the coop while registering, then the worker that serves
/// the agent's queue (it arrives there in a `Bind` demand) — so it needs no lock.
pub(crate) trait AgentExec: Send + 'static {
    /// Runs one demand on the worker thread; returns `true` after `Finish` (the agent is
    /// done and its executor may be dropped).
    fn execute(&mut self, core: &AgentArc, demand: Run<'_>) -> bool;
    /// [`execute`](Self::execute) for a message (`Run::Message { mbox, msg }`): the
    /// worker's common call, with its pieces in registers and none of the control
    /// demands' code in the callee.
    fn execute_message(&mut self, core: &AgentArc, mbox: MboxId, msg: &Message) -> bool {
        self.execute(core, Run::Message { mbox, msg })
    }
    /// Runs the agent's `define` hook during registration.
    fn define(&mut self) -> Result<(), crate::agent::DefineError>;
    /// Drops every subscription and filter (a registration that failed).
    fn discard(&mut self);
    /// Shared access for thread-safe handlers; only agents added as thread-safe have it.
    fn shared(&self) -> Option<Arc<dyn crate::agent::exec::SharedExec>> {
        None
    }
}

/// Called by the party that ran an agent's `Finish` (its executor returned `true`) right
/// after dropping the executor: the coop counts the agent out, and may take its last step.
pub(crate) fn finished(core: &AgentCore) {
    if let Some(coop) = core.coop() {
        coop.agent_finished();
    }
}

/// A reference to an agent, as custom mboxes see subscribers.
///
/// Equal when they refer to the same agent. Holding one keeps a small part of the agent
/// alive, not the user's agent value (that is dropped when its coop is final).
#[derive(Clone)]
pub struct AgentRef(pub(crate) AgentArc);

impl AgentRef {
    /// The agent's unique id.
    pub fn id(&self) -> AgentId {
        self.0.id
    }

    /// The agent's priority (delivery order in multi-consumer mboxes, binding order).
    pub fn priority(&self) -> Priority {
        self.0.priority
    }

    /// The agent's name, if it was given one
    /// ([`Context::set_name`](crate::Context::set_name)).
    pub fn name(&self) -> Option<Arc<str>> {
        self.0.env.upgrade()?.0.names.get(self.0.id)
    }

    /// Queues a message from mbox `mbox` for this agent. Custom mboxes call this for each
    /// subscriber a message goes to, with the redirection depth they were given; the agent
    /// looks its handler up by `(mbox, type)` when the demand runs. The agent's message
    /// limit for the type applies here (a message over it is dropped, redirected or
    /// transformed instead). Never blocks.
    #[inline]
    pub fn push_message(&self, mbox: MboxId, msg: Message, depth: RedirectionDepth) {
        deliver_to(&self.0, mbox, msg, depth);
    }

    /// Whether giving this agent a message runs no user code: no message limits, no
    /// tracing (see [`push_plain`](Self::push_plain)).
    #[inline]
    pub(crate) fn is_plain(&self) -> bool {
        self.0.limits.get().is_none() && self.0.trace.is_none()
    }

    /// [`push_message`](Self::push_message) for an agent [`is_plain`](Self::is_plain)
    /// said yes to.
    #[inline]
    pub(crate) fn push_plain(&self, mbox: MboxId, msg: Message) {
        push_message(&self.0, mbox, msg);
    }

    /// Traces that a message was not given to this agent: a delivery filter refused it.
    /// Custom mboxes that filter call this so that delivery tracing sees the step.
    pub fn trace_filtered(&self, mbox: MboxId, msg: &Message) {
        self.0.drops.count(DropReason::Filtered);
        trace::emit(&self.0.trace, || {
            TraceRecord::new(TraceEvent::RejectedByFilter)
                .agent(self.0.id)
                .mbox(mbox)
                .msg(msg.message_type())
        });
    }

    /// Queues a message from the pseudo-mbox `mbox` with no subscription check and no
    /// limits (a state's time limit, from the timer thread).
    pub(crate) fn push_straight(&self, mbox: MboxId, msg: Message) {
        push(&self.0, DemandKind::Message { mbox, msg })
    }
}

/// Queues a message demand: [`push`] without the control kinds, so that the send path's
/// code holds only what a message needs (with the worker's `bind` taken out of line too:
/// 6.7% fewer instructions per message on peerbench's pipeline, callgrind).
#[inline]
fn push_message(core: &AgentArc, mbox: MboxId, msg: Message) {
    if let Some((q, key)) = core.binding.get() {
        if core.status() != FINISHED {
            q.push_message(*key, mbox, msg, core);
        } else {
            receiver_finished(core, mbox, msg);
        }
        return;
    }
    push_unbound(core, mbox, msg);
}

/// Counts and traces a message for an agent that has finished, and drops it. (One that
/// finishes after this check is counted where its demand is dropped: see
/// `dispatcher::table`.)
#[cold]
#[inline(never)]
fn receiver_finished(core: &AgentCore, mbox: MboxId, msg: Message) {
    core.drops.count(DropReason::ReceiverFinished);
    trace::emit(&core.trace, || {
        TraceRecord::new(TraceEvent::DroppedReceiverFinished)
            .agent(core.id)
            .mbox(mbox)
            .msg(msg.message_type())
    });
}

/// [`push`] for an agent not bound yet (at most once per agent on the send path).
#[cold]
#[inline(never)]
fn push_unbound(core: &AgentArc, mbox: MboxId, msg: Message) {
    push(core, DemandKind::Message { mbox, msg })
}

#[inline]
pub(crate) fn push(core: &AgentArc, kind: DemandKind) {
    if let Some((q, key)) = core.binding.get() {
        // A finished agent's queue may outlive it (a stale reference in a custom mbox): do
        // not fill it with demands nobody will run.
        if core.status() != FINISHED {
            q.push(Demand::new(*key, kind));
        } else if let DemandKind::Message { mbox, msg } = kind {
            receiver_finished(core, mbox, msg);
        }
        return;
    }
    let mut unbound = core.unbound.lock();
    // The agent may have been bound while we waited for the lock.
    if let Some((q, key)) = core.binding.get() {
        drop(unbound);
        q.push(Demand::new(*key, kind));
    } else {
        unbound.pending.push(kind);
    }
}

/// Binds the agent: its executor goes to the queue's worker (`Bind`), then `Start` (both in
/// one demand where the queue runs `Start` on binding), then whatever arrived before
/// binding.
///
/// Races: holding the `unbound` lock across the pushes means a concurrent sender either got
/// into `pending` before (and is flushed here, in its order) or sees the binding set after;
/// the executor is handed over (left in the block) before the `Bind` is queued, and a worker
/// on another thread that takes the `Bind` at once waits for the lock to take it
/// ([`take_bound_exec`]): so the agent's `Start`, which may run right after, sees its binding
/// (`request_reply` to itself from `on_start` is refused by it, not left waiting).
/// Checked by `tests/coop_lifecycle.rs` (a sibling's message sent from `on_start` waits for
/// the receiver's `on_start`) and `tests/core_stress.rs` (coops coming and going while an
/// MPMC mbox streams to them).
pub(crate) fn activate(core: &AgentArc, queue: Arc<dyn EventQueue>, key: AgentKey, exec: ExecBox) {
    let mut unbound = core.unbound.lock();
    exec.hand_over();
    if queue.starts_on_bind() {
        queue.push(Demand::bind(key, core.clone(), true));
    } else {
        queue.push(Demand::bind(key, core.clone(), false));
        queue.push(Demand::new(key, DemandKind::Start));
    }
    if !unbound.pending.is_empty() {
        for kind in unbound.pending.drain(..) {
            queue.push(Demand::new(key, kind));
        }
    }
    let _ = core.binding.set((queue, key));
}

/// The executor `activate` left in the block, for the worker that took its `Bind`; `None`
/// once taken. Taken under the `unbound` lock, which `activate` holds until the binding is
/// set (a compare-exchange alone let a worker on another thread run `on_start` before it:
/// `tests/request_reply_same_thread.rs` hung, 1 in several hundred runs under load).
pub(crate) fn take_bound_exec(core: &AgentArc) -> Option<ExecBox> {
    let _bound = core.unbound.lock();
    core.take_over()
}

/// Queues a message for the agent, within its message limit.
#[inline]
pub(crate) fn deliver_to(core: &AgentArc, mbox: MboxId, msg: Message, depth: RedirectionDepth) {
    if let Some(limits) = core.limits.get() {
        if let Err(limit) = limits.admit(msg.type_id()) {
            return overflow(core, &limit, mbox, msg, depth);
        }
    }
    trace::emit(&core.trace, || {
        TraceRecord::new(TraceEvent::Delivered)
            .agent(core.id)
            .mbox(mbox)
            .msg(msg.message_type())
    });
    push_message(core, mbox, msg);
}

/// Sending to an agent's direct mbox: types it does not subscribe to are not queued at
/// all, and its filter (if any) runs here, on the sender's thread.
///
/// The common case — the lock-free copy says the type is subscribed, and the agent has
/// no limits and no tracing — asks nothing more and goes straight to the queue; anything
/// else is out of line ([`direct_deliver_checked`], [`deliver_checked`]). Inlined into
/// the send, the fast lane then needs no stack frame and ends in a tail call to the queue
/// (ping-pong, callgrind: 75.5 instructions per message here before the split).
#[inline]
pub(crate) fn direct_deliver(core: &AgentArc, msg: Message, depth: RedirectionDepth) {
    // An envelope's type is asked out of line, by the checked lane: asked here, it kept
    // the message on the stack and the fast lane in a frame.
    let Some(ty) = msg.plain_type_id() else {
        return direct_deliver_checked(core, msg, depth);
    };
    match core.fast_types.lookup(type_key(&ty)) {
        Some(true) if core.limits.get().is_none() && core.trace.is_none() => {
            push_message(core, core.mbox_id(), msg)
        }
        Some(true) => deliver_checked(core, core.mbox_id(), msg, depth),
        _ => direct_deliver_checked(core, msg, depth),
    }
}

/// [`deliver_to`] out of line: for an agent with limits or tracing.
#[inline(never)]
fn deliver_checked(core: &AgentArc, mbox: MboxId, msg: Message, depth: RedirectionDepth) {
    deliver_to(core, mbox, msg, depth);
}

/// [`direct_deliver`] when the lock-free copy cannot answer (a filter, many types, a
/// concurrent subscription) or says the type is not subscribed.
#[inline(never)]
fn direct_deliver_checked(core: &AgentArc, msg: Message, depth: RedirectionDepth) {
    if !core.direct_accepts(&msg) {
        direct_refused(core, &msg);
        return;
    }
    deliver_to(core, core.mbox_id(), msg, depth);
}

/// Counts and traces a message the direct mbox refused (off the sending path's fast lane).
#[cold]
#[inline(never)]
fn direct_refused(core: &AgentArc, msg: &Message) {
    let subscribed = core
        .direct
        .read_recursive()
        .get(&msg.type_id())
        .is_some_and(|e| e.subscribed);
    core.drops.count(if subscribed {
        DropReason::Filtered
    } else {
        DropReason::NoSubscribers
    });
    {
        trace::emit(&core.trace, || {
            let event = if subscribed {
                TraceEvent::RejectedByFilter
            } else {
                TraceEvent::NoSubscribers
            };
            TraceRecord::new(event)
                .agent(core.id)
                .mbox(core.mbox_id())
                .msg(msg.message_type())
        });
    }
}

/// A redirected or transformed message that went past the redirection depth is a drop
/// nobody else reports (the sender's `send` returned long ago).
fn count_redirect_failure(core: &AgentArc, sent: &Result<(), crate::mbox::SendError>) {
    if let Err(e) = sent {
        core.drops.count(e.drop_reason());
    }
}

/// Rules 3 and 4: what happens to a message over the limit.
#[cold]
#[inline(never)]
fn overflow(core: &AgentArc, limit: &Limit, mbox: MboxId, msg: Message, depth: RedirectionDepth) {
    trace::emit(&core.trace, || {
        TraceRecord::new(TraceEvent::OverLimit(limit.spec.overflow.action()))
            .agent(core.id)
            .mbox(mbox)
            .msg(msg.message_type())
    });
    match &limit.spec.overflow {
        Overflow::Drop => core.drops.count(DropReason::OverLimit),
        Overflow::Abort => {
            let line = format!(
                "agent {} is over its limit of {} for {}: aborting",
                core.id,
                limit.spec.max,
                msg.message_type().name()
            );
            match core.env.upgrade() {
                Some(env) => env.log_error(&line),
                None => eprintln!("agentbox: {line}"),
            }
            std::process::abort();
        }
        Overflow::Redirect(to) => {
            let sent = to.deliver_with(msg, depth + 1, DeliveryMode::Nonblocking);
            count_redirect_failure(core, &sent);
        }
        Overflow::Transform(f) => {
            let Some(payload) = msg.reveal(Access::Transformation) else {
                return;
            };
            if let Some(t) = f(payload) {
                let sent =
                    t.to.deliver_with(t.msg, depth + 1, DeliveryMode::Nonblocking);
                count_redirect_failure(core, &sent);
            }
        }
    }
}

impl PartialEq for AgentRef {
    fn eq(&self, other: &Self) -> bool {
        AgentArc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for AgentRef {}

impl fmt::Debug for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentRef({})", self.0.id.0)
    }
}
