//! Coop registration and deregistration.
//!
//! # Registration
//!
//! 1. Each agent's `define` runs on the registering thread. Subscriptions are live at once;
//!    messages that arrive now wait in the agent's pending list.
//! 2. Agents are sorted by priority (highest first, stable) and every binder
//!    preallocates. A failure undoes the preallocations made so far.
//! 3. Under the environment's lock (and the parent's) the coop is linked into the
//!    registry and the parent's children; this fails if the environment is shutting down
//!    or the parent is not registered.
//! 4. Under the coop's lock every agent is bound (its dispatcher gives it a queue and a
//!    key; nothing is queued yet), then each is activated in binding order: its executor
//!    moves to its worker, `Start` is queued, then its pending demands. So no `on_start`
//!    runs before every agent of the coop is bound. `on_start` of the first may run while
//!    later ones are being activated; messages it sends them wait in their pending lists
//!    and come after their own `on_start`.
//! 5. Registration notifications are sent.
//!
//! Any failure in 1–3 drops every agent of the coop (subscriptions included).
//!
//! # Deregistration
//!
//! 1. `deregister(reason)`: a registered coop becomes deregistering, its agents stop
//!    handling messages (queued ones are dropped), and each child is deregistered with
//!    reason `Parent`.
//! 2. Once it has no children left, `Finish` is queued to each agent.
//! 3. Each agent's `on_finish` runs, then its subscriptions and filters are dropped.
//! 4. After the last agent finished, the coop is final: the agents are unbound and
//!    dropped, the coop unlinked, deregistration notifications sent, and the parent goes
//!    on with its step 2. This runs on the worker that ran the last `on_finish` when every
//!    agent's dispatcher can unbind from any thread and the environment is not shutting
//!    down; otherwise on the environment's finalizer thread (`active_obj` and
//!    `active_group` may join the agent's own thread, which cannot be done from it).
//!
//! # Races
//!
//! - Deregistration requested during step 4 of registration (by `stop()`, or the parent)
//!   is recorded and carried out when registration completes.
//! - A child registering while its parent deregisters either linked before (and is
//!   deregistered by the parent in step 1) or fails in step 3.
//! - `Finish` of an agent not yet activated waits in its pending list behind `Start`.
//! - An agent may deregister its coop in `on_start` on another thread, and the coop may go
//!   final, before the registering thread reaches step 5: the finalizer then leaves the
//!   deregistration notices to step 5, which sends them after the registration notices.
//!
//! Checked by `tests/coop_races.rs` (registering while deregistering and stopping) and
//! `tests/core_stress.rs` (coops coming and going while an MPMC mbox is busy).

use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::{
    Candidate, Coop, CoopDeregistered, CoopHandle, CoopRegistered, DeregReason, RegisterError,
};
use crate::agent::core::{push, ACTIVE, DEREGISTERING};
use crate::agent::{activate, AgentArc, AgentRef};
use crate::dispatcher::{AgentKey, Binder, DemandKind};
use crate::environment::{Environment, WeakEnv};
use crate::exception::ExceptionReaction;
use crate::mbox::{Mbox, MboxId};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Registering,
    Registered,
    Deregistering,
    Final,
}

struct Sync {
    status: Status,
    /// Inline for the common one-agent coop.
    agents: SmallVec<[(AgentArc, Binder, AgentKey); 1]>,
    /// Children and deregistration notices, allocated for the coops that have them: most
    /// coops are leaves nobody asked to hear from, and a coop is allocated per spawn (the
    /// spawn benchmark's time grows with the bytes an agent takes).
    links: Option<Box<Links>>,
    /// Agents whose `on_finish` has not completed.
    live: u32,
    finishing: bool,
    /// Registration notifications have been sent (registration step 5).
    reg_notified: bool,
    /// Why it is being (or was) deregistered; while `Registering`, the deregistration
    /// requested meanwhile (carried out when registration completes). One field for
    /// both: `CoopInner` is then 104 bytes, and with `Arc`'s counts a 128-byte malloc
    /// chunk, which glibc frees to a fast bin (the 144-byte one went through the
    /// unsorted bin and consolidation, ~250 instructions a free, callgrind).
    reason: Option<DeregReason>,
}

/// What a coop links to besides its agents.
#[derive(Default)]
struct Links {
    children: Vec<Arc<CoopInner>>,
    dereg_notify: Vec<Mbox>,
    /// The coop went final before step 5: its deregistration notifications wait for it
    /// (here, not in `Sync`: only a coop with notices has any to hold, and `CoopInner`
    /// is then 8 bytes smaller).
    held: Option<DeregReason>,
}

impl Sync {
    fn new(status: Status, dereg_notify: Vec<Mbox>) -> Self {
        Sync {
            status,
            agents: SmallVec::new(),
            links: (!dereg_notify.is_empty()).then(|| {
                Box::new(Links {
                    children: Vec::new(),
                    dereg_notify,
                    held: None,
                })
            }),
            live: 0,
            finishing: false,
            reg_notified: false,
            reason: None,
        }
    }

    /// Step 2 begins (the caller checked that it may): every agent is counted live, and
    /// returned for its `Finish`.
    fn start_finishing(&mut self) -> SmallVec<[AgentArc; 1]> {
        self.finishing = true;
        self.live = self.agents.len() as u32;
        if let [(a, _, _)] = &self.agents[..] {
            // The common one-agent coop, without the iterator's collecting.
            return smallvec::smallvec![a.clone()];
        }
        self.agents.iter().map(|(a, _, _)| a.clone()).collect()
    }

    fn has_children(&self) -> bool {
        self.links.as_ref().is_some_and(|l| !l.children.is_empty())
    }

    fn children(&self) -> Vec<Arc<CoopInner>> {
        self.links
            .as_ref()
            .map(|l| l.children.clone())
            .unwrap_or_default()
    }

    fn take_dereg_notify(&mut self) -> Vec<Mbox> {
        self.links
            .as_mut()
            .map(|l| std::mem::take(&mut l.dereg_notify))
            .unwrap_or_default()
    }

    /// Step 4 begins: the coop is final; its agents, why it went, and the deregistration
    /// notices to send now.
    fn seal(&mut self) -> Sealed {
        self.status = Status::Final;
        let reason = self.reason.unwrap_or(DeregReason::Normal);
        // The deregistration notice never precedes the registration notice: if the
        // registering thread has not sent that yet, it sends both, in order.
        let notify = if self.reg_notified {
            self.take_dereg_notify()
        } else {
            if let Some(l) = self.links.as_mut() {
                l.held = Some(reason);
            }
            Vec::new()
        };
        (std::mem::take(&mut self.agents), reason, notify)
    }
}

/// What [`Sync::seal`] takes out of a final coop.
type Sealed = (
    SmallVec<[(AgentArc, Binder, AgentKey); 1]>,
    DeregReason,
    Vec<Mbox>,
);

pub(crate) struct CoopInner {
    pub(crate) id: u64,
    env: WeakEnv,
    pub(crate) parent: Option<Arc<CoopInner>>,
    reaction: ExceptionReaction,
    sync: Mutex<Sync>,
    /// Its slot in the environment's registry (set and read under the environment's lock).
    /// 32 bits, beside `reaction`: the coop is then one malloc size class smaller, and
    /// 2³² live coops would take more than 500 GB.
    pub(crate) registry_slot: std::sync::atomic::AtomicU32,
}

/// An executor still waiting in an agent's core when its coop goes (its `Bind` demand was
/// dropped unrun: the worker gone) is dropped here: it must not live on in the core, where
/// an agent that holds its own mbox would keep itself alive.
impl Drop for CoopInner {
    fn drop(&mut self) {
        for (a, _, _) in &self.sync.get_mut().agents {
            drop(a.take_over());
        }
    }
}

impl CoopInner {
    pub(crate) fn is_registered(&self) -> bool {
        self.sync.lock().status == Status::Registered
    }

    /// Its status and agents, for `Environment::introspect` (read-only).
    pub(crate) fn introspect(
        &self,
    ) -> (
        crate::environment::introspect::CoopStatus,
        SmallVec<[AgentArc; 1]>,
    ) {
        use crate::environment::introspect::CoopStatus;
        let s = self.sync.lock();
        let status = match s.status {
            Status::Registering => CoopStatus::Registering,
            Status::Registered => CoopStatus::Registered,
            Status::Deregistering => CoopStatus::Deregistering,
            Status::Final => CoopStatus::Final,
        };
        (status, s.agents.iter().map(|(a, _, _)| a.clone()).collect())
    }

    /// Why the coop is being (or was) deregistered; `None` while it is registered.
    pub(crate) fn dereg_reason(&self) -> Option<DeregReason> {
        let s = self.sync.lock();
        // While registering, `reason` is only a request.
        s.reason.filter(|_| s.status != Status::Registering)
    }

    /// The coop's reaction, inherited from its parents.
    pub(crate) fn exception_reaction(&self) -> ExceptionReaction {
        let mut c = Some(self);
        while let Some(coop) = c {
            if coop.reaction != ExceptionReaction::Inherit {
                return coop.reaction;
            }
            c = coop.parent.as_deref();
        }
        ExceptionReaction::Inherit
    }

    /// Links a child; fails unless this coop is registered (registration step 3).
    pub(crate) fn add_child(&self, child: &Arc<CoopInner>) -> Result<(), RegisterError> {
        let mut s = self.sync.lock();
        if s.status != Status::Registered {
            return Err(RegisterError::ParentNotRegistered);
        }
        s.links.get_or_insert_default().children.push(child.clone());
        Ok(())
    }

    fn remove_child(self: &Arc<Self>, id: u64) {
        if let Some(l) = self.sync.lock().links.as_mut() {
            l.children.retain(|c| c.id != id);
        }
        self.try_finish();
    }

    /// Deregistration step 1.
    pub(crate) fn deregister(self: &Arc<Self>, reason: DeregReason) {
        let children = {
            let mut s = self.sync.lock();
            match s.status {
                Status::Registering => {
                    s.reason.get_or_insert(reason);
                    return;
                }
                Status::Registered => {}
                Status::Deregistering | Status::Final => return,
            }
            s.status = Status::Deregistering;
            s.reason = Some(reason);
            for (a, _, _) in &s.agents {
                a.transition(ACTIVE, DEREGISTERING);
            }
            if !s.has_children() {
                // A leaf goes on to step 2 under the same lock.
                let agents = s.start_finishing();
                drop(s);
                return self.finish_agents(agents);
            }
            s.children()
        };
        for c in children {
            c.deregister(DeregReason::Parent);
        }
        self.try_finish();
    }

    /// Deregistration step 2, once the last child is gone.
    fn try_finish(self: &Arc<Self>) {
        let agents = {
            let mut s = self.sync.lock();
            if s.status != Status::Deregistering || s.has_children() || s.finishing {
                return;
            }
            s.start_finishing()
        };
        self.finish_agents(agents);
    }

    /// Step 2 for the agents [`Sync::start_finishing`] returned.
    fn finish_agents(self: &Arc<Self>, agents: SmallVec<[AgentArc; 1]>) {
        if agents.is_empty() {
            self.go_final();
        }
        for a in &agents {
            push(a, DemandKind::Finish);
        }
    }

    /// Deregistration step 3 ends here for one agent. After the last one, step 4 begins
    /// under the same taking of the coop's lock when it runs right here (see `go_final`
    /// for when): one taking less per coop.
    pub(crate) fn agent_finished(self: &Arc<Self>) {
        let mut s = self.sync.lock();
        s.live -= 1;
        if s.live != 0 {
            return;
        }
        let here = s.agents.iter().all(|(_, b, _)| b.0.unbinds_anywhere());
        let env = if here { self.env.upgrade() } else { None };
        if let Some(env) = env.as_ref().filter(|e| !e.is_shutting_down()) {
            let sealed = s.seal();
            drop(s);
            return self.finalize_sealed(Some(env), true, sealed);
        }
        // Released before the environment handle (whose drop may be its last).
        drop(s);
        drop(env);
        self.go_final();
    }

    /// Step 4 on the finalizer thread (or here, with the environment gone). The worker
    /// that ran the coop's last `on_finish` takes it itself instead (`agent_finished`)
    /// when every agent's dispatcher unbinds without blocking on any thread (all but
    /// `active_obj` and `active_group`, which may join the agent's thread) and the
    /// environment is not shutting down (its teardown stays on the finalizer thread).
    ///
    /// Why: with the finalizer thread, a stream of deregistrations had two threads freeing
    /// the same allocator arena at once (the worker the executors, the finalizer the cores
    /// and coops, all allocated by the worker) and waking each other: the profile of the
    /// peerbench stop workload showed ~40 000 futex calls per 100 000 agents on the
    /// arena's lock, and finalizing on the worker cut its time by a quarter.
    fn go_final(self: &Arc<Self>) {
        match self.env.upgrade() {
            Some(env) => env.schedule_final(self.clone()),
            None => self.finalize(None),
        }
    }

    /// Deregistration step 4, on the environment's finalizer thread (or on the worker
    /// that ran the last `on_finish`, see `agent_finished`).
    pub(crate) fn finalize(self: &Arc<Self>, env: Option<&Environment>) {
        let sealed = self.sync.lock().seal();
        self.finalize_sealed(env, false, sealed);
    }

    /// The rest of step 4, after [`Sync::seal`]. `on_worker`: running on a dispatcher's
    /// worker (which sealed the coop under the lock it counted its last agent out with),
    /// not on the finalizer thread.
    fn finalize_sealed(
        self: &Arc<Self>,
        env: Option<&Environment>,
        on_worker: bool,
        (agents, reason, notify): Sealed,
    ) {
        // The executors were dropped on their workers after `Finish`, before the agents
        // were counted out.
        let release = |(a, binder, key): (AgentArc, Binder, AgentKey)| {
            binder.0.unbind(&AgentRef(a), key);
            match env {
                // The last reference to a dispatcher stops and joins its threads when
                // dropped; on one of them it could not join itself, and `launch` could
                // return before that thread (and the agent it was dropping) had ended.
                // The finalizer thread drops it instead, and `launch` joins that thread.
                // Checked and dropped under one lock: two workers finishing the last two
                // coops of a dispatcher at once would each see the other's reference.
                Some(env) if on_worker => {
                    let _one_at_a_time = WORKER_BINDER_DROPS.lock();
                    if Arc::strong_count(&binder.0) == 1 {
                        env.drop_on_finalizer(binder);
                    } else {
                        drop(binder);
                    }
                }
                _ => drop(binder),
            }
        };
        let mut agents = agents;
        if agents.len() == 1 {
            // The common one-agent coop, without the list's iterator (~40 instructions).
            if let Some(one) = agents.pop() {
                release(one);
            }
        } else {
            agents.into_iter().for_each(release);
        }
        if let (Some(env), true, None) = (env, notify.is_empty(), &self.parent) {
            // Nothing to do between the unlinking and the environment's check: one lock.
            env.unlink_coop_finalized(self);
            return;
        }
        if let Some(env) = env {
            env.unlink_coop(self);
        }
        if !notify.is_empty() {
            send_dereg_notices(&CoopHandle::from_inner(self), notify, reason);
        }
        if let Some(p) = &self.parent {
            p.remove_child(self.id);
        }
        if let Some(env) = env {
            env.coop_finalized();
        }
    }
}

fn send_dereg_notices(handle: &CoopHandle, notify: Vec<Mbox>, reason: DeregReason) {
    for m in notify {
        let _ = m.send(CoopDeregistered {
            coop: handle.clone(),
            reason,
        });
    }
}

/// Serializes the binder drops of final steps run on workers (see `finalize_sealed`).
static WORKER_BINDER_DROPS: Mutex<()> = Mutex::new(());

/// The binder of an agent being registered (resolved before step 1, so always set).
fn binder(b: &Option<Binder>) -> &Binder {
    b.as_ref()
        .unwrap_or_else(|| unreachable!("binders are resolved first"))
}

/// Drops agents whose registration failed, subscriptions first.
fn discard(agents: SmallVec<[Candidate; 1]>) {
    for (_, mut exec, _) in agents {
        exec.discard();
    }
}

/// Registration, steps 1 to 5.
pub(crate) fn register(coop: Coop) -> Result<CoopHandle, RegisterError> {
    // Taken apart by moves (no clone of the environment, no drop of an emptied `Coop`);
    // until `agents` is taken out of `candidates`, an early return drops them as an
    // unregistered coop's.
    let Coop {
        env,
        agents: mut candidates,
        parent,
        binder: default_binder,
        reaction,
        notify,
    } = coop;
    let parent = match &parent {
        Some(p) => Some(p.upgrade().ok_or(RegisterError::ParentNotRegistered)?),
        None => None,
    };
    if env.is_shutting_down() {
        return Err(RegisterError::ShuttingDown);
    }
    let (reg_notify, dereg_notify) = match notify {
        Some(n) => {
            let n = *n;
            (n.reg, n.dereg)
        }
        None => (Vec::new(), Vec::new()),
    };
    // Resolved in place: collecting into a new list cost more than the rest of
    // registering a one-agent coop (profile of the spawn benchmark).
    let mut agents: SmallVec<[Candidate; 1]> = std::mem::take(&mut candidates.0);
    drop(candidates);
    for (_, _, b) in agents.iter_mut() {
        if b.is_none() {
            *b = Some(
                default_binder
                    .clone()
                    .unwrap_or_else(|| env.default_binder()),
            );
        }
    }
    drop(default_binder);
    let inner = Arc::new(CoopInner {
        id: MboxId::next().0,
        env: env.downgrade(),
        parent,
        reaction,
        sync: Mutex::new(Sync::new(Status::Registering, dereg_notify)),
        registry_slot: std::sync::atomic::AtomicU32::new(u32::MAX),
    });
    // Step 1.
    for index in 0..agents.len() {
        let (a, exec, _) = &mut agents[index];
        a.0.join_coop(&inner);
        if let Err(source) = exec.define() {
            discard(agents);
            return Err(RegisterError::Define { index, source });
        }
    }
    // Step 2.
    agents.sort_by_key(|(a, _, _)| std::cmp::Reverse(a.0.priority));
    for i in 0..agents.len() {
        let (a, _, b) = &agents[i];
        if let Err(e) = binder(b).0.preallocate(a) {
            for (a, _, b) in &agents[..i] {
                binder(b).0.undo_preallocation(a);
            }
            discard(agents);
            return Err(e.into());
        }
    }
    // Step 3.
    if let Err(e) = env.link_coop(&inner) {
        for (a, _, b) in &agents {
            binder(b).0.undo_preallocation(a);
        }
        discard(agents);
        return Err(e);
    }
    // Step 4: every agent is bound before the first `Start` is queued.
    let requested = {
        let mut s = inner.sync.lock();
        if agents.len() == 1 {
            // The common one-agent coop: bound, then activated, without the list of
            // bindings and its zipped walk (~90 instructions per spawn, callgrind).
            if let Some((a, exec, b)) = agents.pop() {
                let b = b.unwrap_or_else(|| unreachable!("binders are resolved first"));
                let (queue, key) = b.0.bind(&a);
                a.0.set_status(ACTIVE);
                activate(&a.0, queue, key, exec);
                s.agents.push((a.0, b, key));
            }
        } else {
            let mut bound: SmallVec<[_; 1]> = SmallVec::with_capacity(agents.len());
            for (a, _, b) in &agents {
                bound.push(binder(b).0.bind(a));
            }
            s.agents.reserve_exact(agents.len());
            for ((a, exec, b), (queue, key)) in agents.into_iter().zip(bound) {
                a.0.set_status(ACTIVE);
                activate(&a.0, queue, key, exec);
                let b = b.unwrap_or_else(|| unreachable!("binders are resolved first"));
                s.agents.push((a.0, b, key));
            }
        }
        s.status = Status::Registered;
        // With no registration notices to send, step 5 has nothing that deregistration
        // notices must wait for: it is done here, under this lock (one taking of the
        // coop's lock less per registration).
        s.reg_notified = reg_notify.is_empty();
        // A deregistration requested while registering (`reason`), carried out below.
        s.reason.take()
    };
    let handle = CoopHandle::from_inner(&inner);
    // Step 5.
    if !reg_notify.is_empty() {
        for m in &reg_notify {
            let _ = m.send(CoopRegistered {
                coop: handle.clone(),
            });
        }
        let held = {
            let mut s = inner.sync.lock();
            s.reg_notified = true;
            s.links
                .as_mut()
                .and_then(|l| l.held.take())
                .map(|reason| (s.take_dereg_notify(), reason))
        };
        if let Some((notify, reason)) = held {
            send_dereg_notices(&handle, notify, reason);
        }
    }
    if let Some(reason) = requested {
        inner.deregister(reason);
    }
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::dispatcher::AgentKey;

    /// An agent that holds its own direct mbox, so that its core and executor refer to
    /// each other, and counts its drops.
    struct SelfHeld {
        /// Held, never read: it keeps the agent's own mbox (and so its core) alive.
        _me: Arc<Mutex<Option<Mbox>>>,
        drops: Arc<AtomicUsize>,
    }
    impl crate::agent::Agent for SelfHeld {}
    impl Drop for SelfHeld {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// An executor whose `Bind` demand was dropped unrun waits in its core; a core and an
    /// agent holding its mbox keep each other alive, so the coop drops the executor when
    /// it goes.
    #[test]
    fn a_coop_drops_an_executor_its_worker_never_took() {
        crate::test_support::within_patience(a_coop_drops_an_executor_its_worker_never_took_);
    }

    fn a_coop_drops_an_executor_its_worker_never_took_() {
        crate::Environment::launch(|env| {
            let drops = Arc::new(AtomicUsize::new(0));
            let me = Arc::new(Mutex::new(None));
            let (core, exec) = crate::agent::create(
                SelfHeld {
                    _me: me.clone(),
                    drops: drops.clone(),
                },
                env,
            );
            // The agent keeps its own mbox, as one that remembers `ctx.direct_mbox()` does.
            *me.lock() = Some(Mbox(crate::mbox::Repr::Direct(core.clone())));
            drop(me);
            exec.hand_over();
            let weak_core = core.downgrade();
            let coop = CoopInner {
                id: MboxId::next().0,
                env: env.downgrade(),
                parent: None,
                reaction: ExceptionReaction::Inherit,
                sync: Mutex::new(Sync {
                    agents: smallvec::smallvec![(core, env.default_binder(), AgentKey::single())],
                    live: 1,
                    reg_notified: true,
                    ..Sync::new(Status::Registered, Vec::new())
                }),
                registry_slot: std::sync::atomic::AtomicU32::new(u32::MAX),
            };
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            drop(coop);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with the coop");
            assert!(weak_core.upgrade().is_none(), "and the core with it");
        })
        .unwrap();
    }
}
