//! Admission of incoming connections: which ones may run a handshake now, so that
//! connections nobody completes cannot keep the cluster's nodes out.
//!
//! Rules, checked by the listener before a handshake thread starts (a connection refused
//! here is closed at once, and the peer retries as after any failed connect):
//! 1. A source address the name service lists (a member's host) may run up to
//!    [`PER_MEMBER_ADDRESS`] handshakes per node listed there (at least
//!    [`MEMBER_ADDRESS_MIN`]), and all members' addresses together up to
//!    [`MEMBER_HANDSHAKES`]: this capacity is theirs alone.
//! 2. Any other source address may run up to [`PER_STRANGER_ADDRESS`] handshakes, and all
//!    of them together up to [`STRANGER_HANDSHAKES`]: a node whose connections come from an
//!    address not listed (NAT, another interface) still gets in, and a stranger holding
//!    connections from one address takes a few slots of this pool only.
//! 3. The initial packet must come within [`INITIAL_PACKET_DEADLINE`] (or the handshake
//!    timeout, if shorter): a connected node sends it at once, so an idle connection holds
//!    its slot for about a second, not the whole handshake timeout.
//!
//! A stranger on a member's host shares that host's slots (rule 1) and, by rule 3, holds
//! each for a second at most; it cannot take the slots of the other members' hosts.

use std::collections::HashMap;
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
/// How long an accepted connection may take to send its initial packet.
pub(crate) const INITIAL_PACKET_DEADLINE: Duration = Duration::from_secs(1);

/// The handshakes in progress, by source address (see the module docs).
pub(crate) struct Admission {
    /// Each member address and how many handshakes it may run.
    members: HashMap<IpAddr, usize>,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    by_address: HashMap<IpAddr, usize>,
    members: usize,
    strangers: usize,
}

/// One admitted handshake; its slot is given back when it drops.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    ip: IpAddr,
    member: bool,
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
        }
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
        if member_cap.is_some() {
            c.members += 1;
        } else {
            c.strangers += 1;
        }
        Some(Ticket {
            admission: self.clone(),
            ip,
            member: member_cap.is_some(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.admission.counts.lock();
        if let Some(n) = c.by_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.by_address.remove(&self.ip);
            }
        }
        if self.member {
            c.members -= 1;
        } else {
            c.strangers -= 1;
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
