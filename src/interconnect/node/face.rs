//! [`Interconnect`]: the node's public face (start, figures, stop) over its shared core.

use super::*;

/// One node's end of YDB's interconnect: sessions to the other nodes of the name service,
/// over TCP, framed as YDB frames them. A cheap handle.
///
/// Once started, a send from any actor of the system to an [`ActorId`] on another node
/// goes through the session to that node, created on the first send: the event is encoded
/// with its [`RemoteEvent`](crate::interconnect::RemoteEvent) codec on the sender's thread, cut into
/// channel parts, and kept in data packets until the peer confirms them. The rules a user
/// relies on:
///
/// - **Order**: events on one channel ([`EventFlags::with_channel`](crate::actors::EventFlags::with_channel)) arrive in the order
///   they were sent, across reconnects; channels do not wait for each other.
/// - **Exactly once within a session**: a broken connection is resumed (the unconfirmed
///   packets are sent again with their serials, and the receiver skips what it already
///   processed).
/// - **Non-delivery**: when a session ends (no connection within the lost-connection
///   timeout, a dead peer, a refused handshake, a protocol violation, a clean close by the
///   peer with nothing pending), its queued events are not delivered, reason
///   `Disconnected`: an event with `TRACK_DELIVERY` gets
///   [`Undelivered`](crate::actors::Undelivered); one already sent but never confirmed
///   (the peer may have processed it) is forwarded or gets it only if it also asked for
///   `GENERATE_UNSURE_UNDELIVERED` (then `unsure: true`). When the peer restarted (it
///   refuses a resume, or asks for a new session), the queued events go out in a new
///   session instead, started at once. A session that ends with events it did not
///   deliver logs their number once (a `tracing` warning) and counts them in its
///   [`SessionStats::events_not_delivered`](crate::interconnect::SessionStats::events_not_delivered);
///   those dropped count as the environment's
///   [`DropCounts::unreachable`](crate::DropCounts::unreachable).
/// - **Stopping** closes every connection cleanly (an end of stream; what the peer sends
///   meanwhile is taken for [`close_linger`](crate::interconnect::InterconnectSetup::close_linger)),
///   also one whose handshake was answered but not yet installed: a peer with nothing
///   pending ends its session at once.
/// - **Bounded queues**: a session queues at most
///   [`max_queued_events`](crate::interconnect::InterconnectSetup::max_queued_events) events and
///   [`max_queued_bytes`](crate::interconnect::InterconnectSetup::max_queued_bytes) bytes; an event
///   beyond them is not delivered at once (reason
///   [`Overloaded`](crate::actors::DeadLetterReason::Overloaded)) and counted.
/// - **Dead peers**: a peer silent, or confirming nothing it was sent, for the dead-peer
///   timeout ends the session.
///   On the peer, an unknown recipient gives `Undelivered(ActorUnknown)` back over the
///   wire, with the cookie.
/// - **Subscriptions**: [`Subscribe`] to [`ActorId::interconnect_proxy`]`(node)`, or any
///   event sent with `SUBSCRIBE_ON_SESSION`, gives
///   [`NodeConnected`](crate::interconnect::NodeConnected) when the session is up and
///   [`NodeDisconnected`](crate::interconnect::NodeDisconnected) when it ends. A subscriber list that
///   grows drops this node's actors that are gone ([`SessionStats::subscribers`]).
/// - **What a peer may not do**: the flags of a local send (`FORWARD_ON_NONDELIVERY`,
///   `SUBSCRIBE_ON_SESSION`) are cleared from a received event
///   ([`SessionStats::local_only_flags_cleared`]); the proxies refuse a
///   [`Poison`](crate::actors::Poison), from anyone ([`SessionStats::proxy_refusals`]); the
///   event types without a codec are logged for the first 256 types only.
/// - **Who may join**: nodes of the name service only, with matching host names, cluster
///   ids and (if set) the shared secret, proven afresh in every handshake, resumes
///   included; a refused peer gets nothing delivered. Incoming handshakes are admitted
///   fairly: the name service's addresses have slots of their own, any other address a
///   few, and a connection that sends nothing is closed within a second. With a secret, a
///   member proves it in its first bytes and gets a slot kept for proven peers: strangers,
///   from any address (the member's own host included), cannot keep it out.
/// - **TLS** (feature `tls`, `InterconnectSetup::tls`): YDB's modes decide per session;
///   both sides' certificates are checked against the cluster's CA (as YDB does; against
///   the name service's host names too with `TlsSetup::check_host_names`), packets carry
///   no checksum (0, as YDB writes), and a session with TLS is taken over only by a peer
///   that completed TLS.
/// - An event type without a codec, or an event over the size limit, is not delivered
///   (reason `NotSerializable`); the session goes on.
/// - Bodies in YDB's extended `TEventPB` format (descriptor flag `0x20`) reach the handler
///   as the raw bytes ([`EventHandle::serialized_bytes`](crate::actors::EventHandle::serialized_bytes));
///   the [`Protobuf`](crate::interconnect::Protobuf) codec reads plain protobuf bodies only.
///
/// The interconnect stops with its environment (or with [`stop`](Self::stop)).
///
/// # Examples
///
/// ```
/// use std::net::TcpListener;
/// use agentbox::actors::*;
/// use agentbox::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde};
/// use agentbox::{ActorId, Environment};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Hello(String);
/// impl Event for Hello { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
/// impl RemoteEvent for Hello { type Codec = Serde; }
///
/// /// Node 2's greeter: prints, then ends everything.
/// struct Greeter;
/// impl Actor for Greeter {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
///         ctx.become_state(Self::serving);
///     }
/// }
/// impl Greeter {
///     fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
///         let Some(Hello(text)) = ev.get::<Hello>() else { return ev.unhandled() };
///         assert_eq!(text, "hello from node 1");
///         ctx.system().environment().stop();
///         Handled::Yes
///     }
/// }
///
/// Environment::launch(|env| {
///     // Two nodes in one process, on ports the OS picks.
///     let (l1, l2) = (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
///     let names = NameService::new()
///         .node(1, NodeAddress::new("127.0.0.1", l1.local_addr().unwrap().port()))
///         .node(2, NodeAddress::new("127.0.0.1", l2.local_addr().unwrap().port()));
///     let mut nodes = Vec::new();
///     for (id, listener) in [(1, l1), (2, l2)] {
///         let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
///         let setup = InterconnectSetup::new(names.clone()).listener(listener).event::<Hello>();
///         Interconnect::start(&system, setup).unwrap();
///         nodes.push(system);
///     }
///     let greeter = ActorId::service(2, b"greeter").unwrap();
///     let actor = nodes[1].register(Greeter).unwrap();
///     nodes[1].register_local_service(greeter, actor).unwrap();
///     nodes[0].send(greeter, Hello("hello from node 1".into()));
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Interconnect {
    node: Arc<NodeShared>,
}

impl Interconnect {
    /// Starts the interconnect of `system`'s node: binds (or takes) the listener, installs
    /// the remote router, and registers a proxy service per peer node.
    ///
    /// # Errors
    ///
    /// [`InterconnectError`]: the node is not in the name service, the address cannot be
    /// bound, the system already has an interconnect, or the environment is stopping.
    pub fn start(
        system: &ActorSystem,
        setup: InterconnectSetup,
    ) -> Result<Interconnect, InterconnectError> {
        let node_id = system.node_id();
        let own = setup
            .names
            .get(node_id)
            .cloned()
            .ok_or(InterconnectError::NotInNameService(node_id))?;
        let listener = match setup.listener {
            Some(l) => l,
            None => TcpListener::bind((own.address.as_str(), own.port)).map_err(|source| {
                InterconnectError::Listen {
                    address: format!("{}:{}", own.address, own.port),
                    source,
                }
            })?,
        };
        let local_addr = listener
            .local_addr()
            .map_err(|source| InterconnectError::Listen {
                address: format!("{}:{}", own.address, own.port),
                source,
            })?;
        let start_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let node = Arc::new_cyclic(|me: &Weak<NodeShared>| {
            let mut n = NodeShared {
                base: NodeBase {
                    node_id,
                    system: system.clone(),
                    codecs: setup.codecs.clone(),
                    cfg: setup.cfg.clone(),
                    epoch: Instant::now(),
                    stopping: AtomicBool::new(false),
                    next_session: AtomicU64::new(0),
                    missing_codecs: Mutex::new(ahash::AHashSet::new()),
                },
                names: setup.names.clone(),
                cluster_uuid: setup.cluster_uuid.clone(),
                accept_uuids: setup.accept_uuids.clone(),
                secret: setup.secret.clone(),
                #[cfg(feature = "tls")]
                tls: setup.tls.clone(),
                sessions: BTreeMap::new(),
                local_addr,
                pid: u64::from(std::process::id()),
                start_time,
                admission: Arc::new(Admission::new(&setup.names)),
                refusals: Mutex::new(VecDeque::new()),
                stats_source: Arc::new(IcStatsSource(me.clone())),
            };
            let first = ((start_time / 1_000_000) << 32) | (n.random_u64() & 0x7FFF_FFFF);
            n.base.next_session = AtomicU64::new(first.max(1));
            let peers: Vec<u32> = setup.names.node_ids().filter(|&p| p != node_id).collect();
            for p in peers {
                let id = n.new_session_id();
                n.sessions.insert(p, Arc::new(Session::new(p, id)));
            }
            n
        });
        if system
            .0
            .remote
            .set(Box::new(Router(Arc::downgrade(&node))))
            .is_err()
        {
            return Err(InterconnectError::AlreadyStarted(node_id));
        }
        system.environment().0.stats.add_source(&node.stats_source);
        let guard = Arc::new(Guard {
            node: Arc::downgrade(&node),
            env: system.environment().downgrade(),
            me: Mutex::new(None),
        });
        let as_dyn: Arc<dyn StopGuard> = guard.clone();
        *guard.me.lock() = Some(as_dyn.clone());
        if system.environment().setup_stop_guard(as_dyn).is_err() {
            shutdown(&node);
            return Err(InterconnectError::Stopping);
        }
        for &peer in node.sessions.keys() {
            let proxy = Proxy {
                node: Arc::downgrade(&node),
                peer,
            };
            if let Ok(actor) = system.register(proxy) {
                let _ = system.register_local_service(ActorId::interconnect_proxy(peer), actor);
            }
        }
        let listening = node.clone();
        std::thread::Builder::new()
            .name(format!("ic{node_id}-listen"))
            .spawn(move || listen(&listening, listener))
            .map_err(|source| InterconnectError::Listen {
                address: local_addr.to_string(),
                source,
            })?;
        Ok(Interconnect { node })
    }

    /// The node's shared core (unit tests of the handshake).
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<NodeShared> {
        &self.node
    }

    /// This node's id.
    pub fn node_id(&self) -> u32 {
        self.node.node_id
    }

    /// The address the node listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.node.local_addr
    }

    /// The figures of the session with `peer` (`None` if `peer` is not in the name
    /// service or is this node).
    pub fn session_stats(&self, peer: u32) -> Option<SessionStats> {
        self.node.session(peer).map(|s| s.stats())
    }

    /// The figures of every session, by peer node.
    pub fn stats(&self) -> Vec<SessionStats> {
        self.node.sessions.values().map(|s| s.stats()).collect()
    }

    /// Whether a connection to `peer` is up now.
    pub fn is_connected(&self, peer: u32) -> bool {
        self.session_stats(peer).is_some_and(|s| s.connected)
    }

    /// How many event types without a codec this node has logged (the tests' view of a
    /// bound: at most 256).
    #[doc(hidden)]
    pub fn missing_codec_types_logged(&self) -> usize {
        self.node.missing_codecs.lock().len()
    }

    /// The last handshakes this node refused (at most 64), oldest first.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.node.refusals.lock().iter().cloned().collect()
    }

    /// Stops the node's interconnect: sessions end (their queued events are not
    /// delivered, subscribers get `NodeDisconnected`), connections close, and sends to
    /// other nodes are not delivered from now on (`Disconnected`). Returns at once.
    pub fn stop(&self) {
        shutdown(&self.node);
    }
}

impl std::fmt::Debug for Interconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interconnect")
            .field("node_id", &self.node.node_id)
            .field("local_addr", &self.node.local_addr)
            .field("peers", &self.node.sessions.len())
            .finish()
    }
}
