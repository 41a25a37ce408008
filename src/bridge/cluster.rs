//! [`ClusterMbox`]: one named MPMC mbox on every node of a cluster (its docs state the rules).

#[path = "cluster/core.rs"]
mod core;
#[path = "cluster/filter.rs"]
mod filter;
#[path = "cluster/mboxes.rs"]
mod mboxes;
#[path = "cluster/send.rs"]
mod send;
#[path = "cluster/wire.rs"]
mod wire;

use std::any::TypeId;
use std::sync::{Arc, OnceLock};

use thiserror::Error;

use self::core::{convert_of, encode_of, key_of, Core, Local, TypeEntry};
pub use self::filter::{ClusterKey, ShippableFilter};
use self::mboxes::{ClusterMboxImpl, ServiceMbox};
pub use self::wire::{ClusterInterest, ClusterMboxEvents, EV_CLUSTER_INTEREST};
use crate::actors::{ActorSystem, Event, EventFlags, EventType, RegisterActorError, ServiceError};
use crate::interconnect::Interconnect;
use crate::mbox::{Mbox, MboxId, MboxImpl};
use crate::message::Message;
use crate::ActorId;

/// The builder of a cluster-wide MPMC mbox: one named mbox on every node of a cluster.
///
/// Each node builds the mbox under the same name with the same message types. Agents on
/// any node subscribe to it by type, with delivery filters and states, exactly as to a
/// local MPMC mbox; a send on any node reaches every subscriber in the cluster.
///
/// # Rules
///
/// 1. **Exactly once per subscriber, one wire copy per node.** A send hands the message
///    to this node's subscribers (a local MPMC mbox inside does the fan-out) and sends
///    *one* copy, encoded once on the sender's thread, to each other node that has a
///    subscriber for its type; that node fans it out to its own subscribers (on the
///    interconnect's reader thread, where their delivery filters run). That thread serves
///    the whole session, so it never waits there: a full bounded chain bound to the mbox
///    applies its overflow reaction at once, as for a timer's delivery (a refusal is
///    counted `refused` in [`DropCounts`](crate::DropCounts)). A node never
///    passes on what it received from another node. Within a session, cuts and resumes
///    lose and repeat nothing (the interconnect's rule); a message in flight when a
///    session ends is not delivered there (at most once).
/// 2. **Who wants what.** A node learns which types another node wants from that node's
///    announcements ([`ClusterInterest`], to the service `ab.c` + a hash of the name, on
///    the peer): a node announces its whole interest in the mbox to a peer each time the
///    session to it comes up (and the peer answers with its own, in case its first
///    announcement came before this node's mbox was built), and to every connected peer
///    when the first subscriber of a type comes or the last one goes (and, for the
///    round-robin kind, at every change of the count). Sends reach another node's new subscriber once its announcement has
///    arrived; [`ClusterView::nodes_wanting`] tells when.
/// 3. **Filters.** Delivery filters run on the receiving node, as on a local mbox.
///    A [`ShippableFilter`] (a predicate over the message's [`ClusterKey`]: equal, range,
///    set) is announced too, and the sending node — when the mbox was built with
///    [`keyed_event`](ClusterMbox::keyed_event) for the type — sends a message to a node
///    only if one of that node's filters accepts it: a filtered-out message never crosses
///    the wire (counted `filtered` in [`DropCounts`](crate::DropCounts) on the sender, once
///    per node). A node ships its filters for a type only if every subscriber there has a
///    shippable filter; closure filters ([`Context::set_delivery_filter`](crate::Context::set_delivery_filter))
///    never ship.
/// 4. **Membership follows the sessions.** When the session to a node ends (the node
///    stopped, restarted, or stayed unreachable for the interconnect's lost-connection
///    timeout), everything it wanted vanishes on this node: later sends of its types go to
///    the remaining subscribers, and a send nobody else wants is counted `no_subscribers`
///    in [`DropCounts`](crate::DropCounts) (events already queued in the ended session are
///    the interconnect's dead letters, reason `Disconnected`). When the node comes back,
///    its announcement comes with the new session. A cluster mbox dropped on a node (the
///    last handle gone) announces that it wants nothing. The mbox subscribes to every
///    peer's session, so the interconnect connects to every peer while it exists; after a
///    session ends it subscribes again 100 ms later, and after each session in a row that
///    ended without coming up (a peer that cannot be reached) twice as late, up to 1.6 s.
/// 5. **Order.** Messages from one sender thread to the subscribers of one node keep
///    their order: all of one mbox's events to a node go on one interconnect channel
///    ([`ClusterMbox::channel`]), announcements included.
/// 6. **Types.** Only the types named in the builder may be sent or subscribed to (others
///    are refused with [`SendError::NotSerializable`](crate::SendError::NotSerializable)
///    and [`SubscribeError::Refused`](crate::SubscribeError::Refused)); each needs a codec
///    registered with the interconnect on every node, and so does the mbox's own event:
///    call [`ClusterMboxEvents::cluster_mbox_events`] on each node's setup. Mutable
///    messages are refused, as by any MPMC mbox.
/// 7. **Round robin.** [`ClusterMbox::round_robin`] makes a mbox where each message goes
///    to *one* subscriber in the cluster: the sending node picks, in turn, among all the
///    subscribers it knows of (its own, and each node's announced count), and a message
///    for another node goes there once and is given to one of its subscribers, in turn.
///    A filter runs on the chosen node: a refusal there drops the message (counted
///    `filtered`) and does not offer it to another node. Subscriber priorities play no
///    part in the choice; the chosen agent's message limits apply as always.
///
/// # Examples
///
/// Two nodes in one process: an agent on node 2 gets a job sent on node 1.
///
/// ```
/// use std::net::TcpListener;
/// use agentbox::actors::*;
/// use agentbox::bridge::{ClusterMbox, ClusterMboxEvents};
/// use agentbox::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde};
/// use agentbox::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Job(u32);
/// impl Event for Job { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE + 7) + 1; }
/// impl RemoteEvent for Job { type Codec = Serde; }
///
/// struct Worker { jobs: Mbox }
/// impl Agent for Worker {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         ctx.subscribe(&self.jobs).event(|_: &mut Self, ctx, job: &Job| {
///             assert_eq!(job.0, 42);
///             ctx.environment().stop();
///         })?;
///         Ok(())
///     }
/// }
///
/// Environment::launch(|env| {
///     let (l1, l2) = (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
///     let names = NameService::new()
///         .node(1, NodeAddress::new("127.0.0.1", l1.local_addr().unwrap().port()))
///         .node(2, NodeAddress::new("127.0.0.1", l2.local_addr().unwrap().port()));
///     let mut views = Vec::new();
///     for (id, listener) in [(1, l1), (2, l2)] {
///         let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
///         let setup = InterconnectSetup::new(names.clone()).listener(listener)
///             .cluster_mbox_events()
///             .event::<Job>();
///         let ic = Interconnect::start(&system, setup).unwrap();
///         // The same mbox on every node.
///         views.push(ClusterMbox::new(&system, &ic, "jobs").event::<Job>().build_with_view().unwrap());
///     }
///     let jobs2 = views[1].0.clone();
///     env.introduce_coop(|coop| coop.add_agent(Worker { jobs: jobs2 })).unwrap();
///     // Node 1 learns that node 2 wants jobs, then sends one.
///     while views[0].1.nodes_wanting::<Job>().is_empty() {
///         std::thread::sleep(std::time::Duration::from_millis(5));
///     }
///     send(&views[0].0, Job(42)).unwrap();
/// }).unwrap();
/// ```
#[must_use = "build() makes the mbox"]
pub struct ClusterMbox {
    system: ActorSystem,
    peers: Vec<u32>,
    node: u32,
    name: String,
    types: Vec<TypeEntry>,
    round_robin: bool,
    channel: u16,
}

impl std::fmt::Debug for ClusterMbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMbox")
            .field("name", &self.name)
            .field("node", &self.node)
            .field("peers", &self.peers)
            .field(
                "types",
                &self.types.iter().map(|t| t.name).collect::<Vec<_>>(),
            )
            .field("round_robin", &self.round_robin)
            .finish_non_exhaustive()
    }
}

impl ClusterMbox {
    /// The cluster mbox `name` on the node of `system`, whose interconnect is `ic` (its
    /// peers are the other nodes of `ic`'s name service). No type named yet.
    pub fn new(system: &ActorSystem, ic: &Interconnect, name: &str) -> ClusterMbox {
        ClusterMbox {
            system: system.clone(),
            peers: ic.stats().iter().map(|s| s.peer_node).collect(),
            node: ic.node_id(),
            name: name.to_owned(),
            types: Vec::new(),
            round_robin: false,
            channel: 0,
        }
    }

    /// Messages of type `E` may be sent and subscribed to (as `E`).
    pub fn event<E: Event + Sync>(self) -> Self {
        self.with::<E>(None)
    }

    /// As [`event`](Self::event), and shippable filters over `E`'s [`ClusterKey`] run on
    /// this (the sending) node too.
    pub fn keyed_event<E: Event + Sync + ClusterKey>(self) -> Self {
        self.with::<E>(Some(key_of::<E>))
    }

    fn with<E: Event + Sync>(mut self, key: Option<core::KeyOf>) -> Self {
        self.types.push(TypeEntry {
            type_id: TypeId::of::<E>(),
            event_type: E::EVENT_TYPE,
            name: std::any::type_name::<E>(),
            encode: encode_of::<E>,
            convert: convert_of::<E>,
            key,
        });
        self
    }

    /// Each message goes to one subscriber in the cluster, not to all (rule 7).
    pub fn round_robin(mut self) -> Self {
        self.round_robin = true;
        self
    }

    /// The interconnect channel of the mbox's events (default 0; at most
    /// [`EventFlags::MAX_CHANNEL`]). Give a busy mbox a channel of its own so that other
    /// traffic does not wait behind it.
    pub fn channel(mut self, channel: u16) -> Self {
        self.channel = channel;
        self
    }

    /// Makes the mbox.
    ///
    /// # Errors
    ///
    /// See [`build_with_view`](Self::build_with_view).
    pub fn build(self) -> Result<Mbox, ClusterMboxError> {
        self.build_with_view().map(|(m, _)| m)
    }

    /// Makes the mbox, and a [`ClusterView`] of what it knows of the other nodes.
    ///
    /// # Errors
    ///
    /// [`ClusterMboxError`]: no type named, a type named twice, a type (or the mbox's own
    /// [`ClusterInterest`]) without a codec, a bad channel, a mbox of that name already
    /// built on this node, a system whose node is not the interconnect's, or one that is
    /// stopping.
    pub fn build_with_view(mut self) -> Result<(Mbox, ClusterView), ClusterMboxError> {
        if self.types.is_empty() {
            return Err(ClusterMboxError::NoEvents);
        }
        if self.node != self.system.node_id() {
            return Err(ClusterMboxError::OtherNode {
                system: self.system.node_id(),
                interconnect: self.node,
            });
        }
        self.types.sort_by_key(|t| t.type_id);
        let mut by_event: Vec<(EventType, &'static str)> =
            self.types.iter().map(|t| (t.event_type, t.name)).collect();
        by_event.sort_unstable();
        if let Some(w) = by_event.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ClusterMboxError::DuplicateEventType {
                event_type: w[0].0,
                first: w[0].1,
                second: w[1].1,
            });
        }
        let sys = self.system.0.clone();
        let can = |ty| sys.remote.get().is_some_and(|r| r.can_encode(ty));
        for (event_type, type_name) in
            std::iter::once((EV_CLUSTER_INTEREST, "ClusterInterest")).chain(by_event)
        {
            if !can(event_type) {
                return Err(ClusterMboxError::NoCodec {
                    type_name,
                    event_type,
                });
            }
        }
        let flags = EventFlags::empty()
            .try_with_channel(self.channel)
            .map_err(|_| ClusterMboxError::Channel(self.channel))?;
        let service_name = service_name(&self.name);
        let service = ActorId::service(self.node, &service_name).map_err(|_| {
            ClusterMboxError::Service(ServiceError::NotAService(ActorId::default()))
        })?;
        if self.system.lookup_local_service(service).is_some() {
            return Err(ClusterMboxError::AlreadyBuilt(self.name));
        }
        let env = self.system.environment().clone();
        let (id, local) = if self.round_robin {
            (MboxId::next(), Local::RoundRobin)
        } else {
            let inner = env.create_mbox();
            (inner.id(), Local::Fanout(inner))
        };
        let core = Arc::new(Core::new(
            id,
            self.name,
            service_name,
            Arc::downgrade(&sys),
            env.downgrade(),
            local,
            self.types,
            self.peers,
            flags,
            incarnation(),
        ));
        let endpoint = Arc::new(ServiceMbox {
            id: MboxId::next(),
            core: Arc::downgrade(&core),
            me: OnceLock::new(),
        });
        let as_dyn: Arc<dyn MboxImpl> = endpoint.clone();
        let _ = endpoint.me.set(Arc::downgrade(&as_dyn));
        let me = sys.register_endpoint(0, Mbox::custom(as_dyn))?;
        let _ = core.me.set(me);
        if let Err(e) = self.system.register_local_service(service, me) {
            sys.forget(me);
            return Err(ClusterMboxError::Service(e));
        }
        let _ = core.service.set(service);
        core.subscribe_sessions();
        let mbox = Mbox::custom(Arc::new(ClusterMboxImpl(core.clone())));
        Ok((mbox, ClusterView { core }))
    }
}

/// The 12-byte service name of a cluster mbox: `ab.c` and an FNV-1a hash of its name.
fn service_name(name: &str) -> [u8; 12] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut out = [0u8; 12];
    out[..4].copy_from_slice(b"ab.c");
    out[4..].copy_from_slice(&(h | 1 << 63).to_le_bytes());
    out
}

/// A random number telling this build of the mbox from an earlier one on the same node
/// (a restarted node starts its announcements' versions again).
fn incarnation() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = t.to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// What a node's cluster mbox knows of the others (from
/// [`ClusterMbox::build_with_view`]). A cheap handle; it keeps the mbox's core alive but
/// not the mbox (which closes when its last [`Mbox`] handle goes).
#[derive(Clone)]
pub struct ClusterView {
    core: Arc<Core>,
}

impl ClusterView {
    /// The other nodes known, now, to have a subscriber for `E` (sorted).
    pub fn nodes_wanting<E: Event>(&self) -> Vec<u32> {
        let mut v = self.core.nodes_wanting(E::EVENT_TYPE);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// How many subscribers to `E` node `node` announced: for the round-robin kind, its
    /// count; for the fan-out kind 1 if it has any (only that matters there); 0 when it is
    /// not known to want `E`.
    pub fn subscribers_on<E: Event>(&self, node: u32) -> u32 {
        self.core.subscribers_on(E::EVENT_TYPE, node)
    }

    /// The other nodes a send of `event` would go to now: those with a subscriber for its
    /// type whose shipped filters (if any, and if this node knows the type's key) accept
    /// it (sorted). For a round-robin mbox, the nodes it may go to.
    pub fn nodes_for<E: Event + Sync>(&self, event: E) -> Vec<u32> {
        let mut v = self.core.nodes_for(&Message::new(event));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The other nodes whose session this mbox saw come up and not yet end (sorted).
    pub fn connected_nodes(&self) -> Vec<u32> {
        self.core.connected_peers()
    }

    /// The mbox's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }
}

impl std::fmt::Debug for ClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("name", &self.core.name)
            .finish_non_exhaustive()
    }
}

/// Why a [`ClusterMbox`] could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClusterMboxError {
    /// No message type named.
    #[error("the cluster mbox names no message type")]
    NoEvents,
    /// Two Rust types (or one twice) were named for one YDB event type.
    #[error("event type {event_type:#x} is named twice ({first}, {second})")]
    DuplicateEventType {
        /// The YDB event type.
        event_type: EventType,
        /// One Rust type named for it.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// A type cannot cross: no codec registered with the interconnect (for the mbox's own
    /// [`ClusterInterest`]: call [`ClusterMboxEvents::cluster_mbox_events`]).
    #[error(
        "{type_name} (event type {event_type:#x}) has no codec registered with the interconnect"
    )]
    NoCodec {
        /// The Rust type.
        type_name: &'static str,
        /// Its YDB event type.
        event_type: EventType,
    },
    /// The channel is out of range.
    #[error("channel {0} is out of range")]
    Channel(u16),
    /// A cluster mbox of this name (or of the same hash) already exists on this node.
    #[error("a cluster mbox {0:?} already exists on this node")]
    AlreadyBuilt(String),
    /// The actor system and the interconnect are different nodes.
    #[error("the system is node {system}, the interconnect node {interconnect}")]
    OtherNode {
        /// The system's node.
        system: u32,
        /// The interconnect's node.
        interconnect: u32,
    },
    /// No endpoint id could be registered (a stopping system).
    #[error(transparent)]
    Register(#[from] RegisterActorError),
    /// The service could not be registered.
    #[error(transparent)]
    Service(ServiceError),
}
