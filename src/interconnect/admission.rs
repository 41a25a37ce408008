//! Admission of incoming connections: which ones may run a handshake now, so that
//! connections nobody completes cannot keep the cluster's nodes out.
//!
//! Rules, checked by the listener before a handshake thread starts (a connection refused
//! here is closed at once, and the peer retries as after any failed connect):
//! 1. An accepted connection first waits, without a thread, for its first bytes: the
//!    initial packet and, in a cluster with a secret, the admission frame that a member
//!    sends with it (`challenge.rs`). At most [`WAITING`] connections wait at once (a
//!    newer one closes the oldest), each for [`INITIAL_PACKET_DEADLINE`] at most (or the
//!    handshake timeout, if shorter): a connected node sends these bytes at once.
//! 2. A connection whose admission frame proves the cluster's secret (a nonce not seen
//!    lately, for a node of the name service) gets one of the slots kept for proven
//!    peers: up to [`PROVEN_PER_NODE`] for the node it claims to be, [`PROVEN_HANDSHAKES`]
//!    in all. No stranger can take these, from any address, the member's own included: a
//!    member with the secret gets its handshake whatever strangers hold.
//! 3. Any other connection (every connection in a cluster without a secret) takes a slot by
//!    its source address. An address the name service lists (a member's host) may run up
//!    to [`PER_MEMBER_ADDRESS`] handshakes per node listed there (at least
//!    [`MEMBER_ADDRESS_MIN`]), and all members' addresses together up to
//!    [`MEMBER_HANDSHAKES`]; any other address up to [`PER_STRANGER_ADDRESS`], and all of
//!    them together up to [`STRANGER_HANDSHAKES`]: a node whose connections come from an
//!    address not listed (NAT, another interface) still gets in, and a stranger holding
//!    connections from one address takes a few slots of its pool only. With a secret, such
//!    a handshake is refused as soon as it fails to prove it (`handshake.rs`).
//!
//! Without a secret nothing tells a member from a stranger on its host before the
//! handshake ends: such a stranger shares that host's slots (rule 3), and cannot take the
//! slots of the other members' hosts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::names::NameService;

/// Handshakes from all the members' addresses together.
pub(crate) const MEMBER_HANDSHAKES: usize = 64;
/// Handshakes from one member address, per node listed at it.
pub(crate) const PER_MEMBER_ADDRESS: usize = 4;
/// Handshakes from one member address, at least.
pub(crate) const MEMBER_ADDRESS_MIN: usize = 8;
/// Handshakes from all other addresses together.
pub(crate) const STRANGER_HANDSHAKES: usize = 16;
/// Handshakes from one address the name service does not list.
pub(crate) const PER_STRANGER_ADDRESS: usize = 4;
/// How long an accepted connection may take to send its initial packet (and, with a
/// secret, its admission frame).
pub(crate) const INITIAL_PACKET_DEADLINE: Duration = Duration::from_secs(1);
/// Accepted connections waiting for their first bytes, at most.
pub(crate) const WAITING: usize = 256;
/// Proven handshakes (rule 2) of one node at once.
pub(crate) const PROVEN_PER_NODE: usize = 4;
/// Proven handshakes at once, in all.
pub(crate) const PROVEN_HANDSHAKES: usize = 64;
/// Admission nonces remembered (a repeated one proves nothing).
const NONCES_KEPT: usize = 4096;
/// The handshakes in progress, by source address or proven node (see the module docs).
pub(crate) struct Admission {
    /// Each member address and how many handshakes it may run.
    members: HashMap<IpAddr, usize>,
    counts: Mutex<Counts>,
    nonces: Mutex<Nonces>,
}

/// The admission nonces seen lately, and their order (oldest first).
#[derive(Default)]
struct Nonces {
    seen: HashSet<Vec<u8>>,
    order: VecDeque<Vec<u8>>,
}

#[derive(Default)]
struct Counts {
    by_address: HashMap<IpAddr, usize>,
    members: usize,
    strangers: usize,
    by_node: HashMap<u32, usize>,
    proven: usize,
}

/// Which slot a [`Ticket`] holds.
#[derive(Clone, Copy)]
enum Slot {
    Member(IpAddr),
    Stranger(IpAddr),
    Proven(u32),
}

/// One admitted handshake; its slot is given back when it drops.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    slot: Slot,
}

impl Admission {
    /// The admission of a node with `names` (each listed address resolved once, now; one
    /// that does not resolve is left out: its nodes share the strangers' pool).
    pub(crate) fn new(names: &NameService) -> Admission {
        let mut nodes_at: HashMap<IpAddr, usize> = HashMap::new();
        for id in names.node_ids() {
            let Some(entry) = names.get(id) else { continue };
            let Ok(addrs) = (entry.address.as_str(), entry.port).to_socket_addrs() else {
                continue;
            };
            let mut ips: Vec<IpAddr> = addrs.map(|a| canonical(a.ip())).collect();
            ips.dedup();
            for ip in ips {
                *nodes_at.entry(ip).or_default() += 1;
            }
        }
        let members = nodes_at
            .into_iter()
            .map(|(ip, n)| (ip, (n * PER_MEMBER_ADDRESS).max(MEMBER_ADDRESS_MIN)))
            .collect();
        Admission {
            members,
            counts: Mutex::new(Counts::default()),
            nonces: Mutex::default(),
        }
    }

    /// A slot kept for proven peers (rule 2), for a handshake from node `node`.
    pub(crate) fn admit_proven(self: &Arc<Self>, node: u32) -> Option<Ticket> {
        let mut c = self.counts.lock();
        let at_node = c.by_node.get(&node).copied().unwrap_or(0);
        if c.proven >= PROVEN_HANDSHAKES || at_node >= PROVEN_PER_NODE {
            return None;
        }
        *c.by_node.entry(node).or_default() += 1;
        c.proven += 1;
        Some(Ticket {
            admission: self.clone(),
            slot: Slot::Proven(node),
        })
    }

    /// Whether `nonce` is new (it is remembered from now on, among the last
    /// [`NONCES_KEPT`]).
    pub(super) fn fresh_nonce(&self, nonce: &[u8]) -> bool {
        let mut n = self.nonces.lock();
        if !n.seen.insert(nonce.to_vec()) {
            return false;
        }
        n.order.push_back(nonce.to_vec());
        if n.order.len() > NONCES_KEPT {
            if let Some(old) = n.order.pop_front() {
                n.seen.remove(&old);
            }
        }
        true
    }

    /// A slot for a handshake from `peer`, if its address and its pool have one left.
    pub(crate) fn admit(self: &Arc<Self>, peer: SocketAddr) -> Option<Ticket> {
        let ip = canonical(peer.ip());
        let member_cap = self.members.get(&ip).copied();
        let mut c = self.counts.lock();
        let (pool, pool_cap, address_cap) = match member_cap {
            Some(cap) => (c.members, MEMBER_HANDSHAKES, cap),
            None => (c.strangers, STRANGER_HANDSHAKES, PER_STRANGER_ADDRESS),
        };
        let at_address = c.by_address.get(&ip).copied().unwrap_or(0);
        if pool >= pool_cap || at_address >= address_cap {
            return None;
        }
        *c.by_address.entry(ip).or_default() += 1;
        let slot = if member_cap.is_some() {
            c.members += 1;
            Slot::Member(ip)
        } else {
            c.strangers += 1;
            Slot::Stranger(ip)
        };
        Some(Ticket {
            admission: self.clone(),
            slot,
        })
    }
}

/// Takes one from `key`'s count in `map`, removing the entry at 0.
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.admission.counts.lock();
        match self.slot {
            Slot::Member(ip) => {
                release(&mut c.by_address, &ip);
                c.members -= 1;
            }
            Slot::Stranger(ip) => {
                release(&mut c.by_address, &ip);
                c.strangers -= 1;
            }
            Slot::Proven(node) => {
                release(&mut c.by_node, &node);
                c.proven -= 1;
            }
        }
    }
}

/// An IPv4 address mapped into IPv6 counts as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interconnect::NodeAddress;

    fn addr(ip: [u8; 4]) -> SocketAddr {
        SocketAddr::from((ip, 4000))
    }

    #[test]
    fn a_stranger_address_gets_a_few_slots_and_members_keep_theirs() {
        let names = NameService::new()
            .node(1, NodeAddress::new("127.0.0.1", 1))
            .node(2, NodeAddress::new("127.0.0.1", 2))
            .node(3, NodeAddress::new("10.0.0.3", 3));
        let a = Arc::new(Admission::new(&names));
        let stranger: Vec<Ticket> = (0..100)
            .filter_map(|_| a.admit(addr([127, 0, 0, 2])))
            .collect();
        assert_eq!(stranger.len(), PER_STRANGER_ADDRESS);
        // Other strangers fill their pool, never the members'.
        let others: Vec<Ticket> = (0..100u8)
            .filter_map(|k| a.admit(addr([192, 168, 0, k])))
            .collect();
        assert_eq!(others.len(), STRANGER_HANDSHAKES - PER_STRANGER_ADDRESS);
        // Two nodes at 127.0.0.1: 8 slots there; one at 10.0.0.3: 8 (the minimum).
        let local: Vec<Ticket> = (0..100)
            .filter_map(|_| a.admit(addr([127, 0, 0, 1])))
            .collect();
        assert_eq!(
            local.len(),
            (2 * PER_MEMBER_ADDRESS).max(MEMBER_ADDRESS_MIN)
        );
        let far: Vec<Ticket> = (0..100)
            .filter_map(|_| a.admit(addr([10, 0, 0, 3])))
            .collect();
        assert_eq!(far.len(), MEMBER_ADDRESS_MIN);
        // A slot given back is free again; an IPv4-mapped address is the IPv4 one.
        drop(stranger);
        let mapped = std::net::Ipv4Addr::new(127, 0, 0, 2).to_ipv6_mapped();
        let mapped = SocketAddr::from((mapped, 1));
        assert!(a.admit(mapped).is_some());
        drop(local);
        assert!(a.admit(addr([127, 0, 0, 1])).is_some());
    }

    /// Slots kept for proven peers: taken whatever the address pools hold, a few per node,
    /// and a nonce proves once.
    #[test]
    fn proven_peers_have_slots_of_their_own() {
        let names = NameService::new()
            .node(1, NodeAddress::new("127.0.0.1", 1))
            .node(2, NodeAddress::new("127.0.0.1", 2));
        let a = Arc::new(Admission::new(&names));
        let full: Vec<Ticket> = (0..100)
            .filter_map(|_| a.admit(addr([127, 0, 0, 1])))
            .collect();
        assert!(a.admit(addr([127, 0, 0, 1])).is_none());
        let proven: Vec<Ticket> = (0..100).filter_map(|_| a.admit_proven(2)).collect();
        assert_eq!(proven.len(), PROVEN_PER_NODE);
        assert!(a.admit_proven(1).is_some(), "another node's are its own");
        drop(proven);
        assert!(a.admit_proven(2).is_some());
        drop(full);
        assert!(a.fresh_nonce(&[1; 32]));
        assert!(!a.fresh_nonce(&[1; 32]), "a repeated nonce");
        for k in 0..NONCES_KEPT as u32 {
            a.fresh_nonce(&k.to_le_bytes());
        }
        assert!(a.fresh_nonce(&[1; 32]), "forgotten after so many others");
    }

    /// The per-address cap holds however a stranger cycles its connections: finishing one
    /// handshake frees one slot of its address, never the others it still holds.
    #[test]
    fn a_stranger_cycling_its_connections_never_holds_more_than_its_address_cap() {
        let names = NameService::new().node(1, NodeAddress::new("127.0.0.1", 1));
        let a = Arc::new(Admission::new(&names));
        for (ip, cap) in [
            ([127, 0, 0, 2], PER_STRANGER_ADDRESS),
            ([127, 0, 0, 1], MEMBER_ADDRESS_MIN),
        ] {
            let mut held: Vec<Ticket> = (0..100).filter_map(|_| a.admit(addr(ip))).collect();
            assert_eq!(held.len(), cap);
            for round in 0..50 {
                // One handshake ends (the oldest, the newest, one between), the stranger
                // opens as many connections as it can: it gets that one slot back, no more.
                held.remove(round % held.len());
                held.extend((0..100).filter_map(|_| a.admit(addr(ip))));
                assert_eq!(held.len(), cap, "round {round}");
            }
            drop(held);
            let again: Vec<Ticket> = (0..100).filter_map(|_| a.admit(addr(ip))).collect();
            assert_eq!(again.len(), cap, "all slots free again");
        }
    }
}
