//! [`NameService`]: the static table of nodes (YDB's table name service).

use std::collections::BTreeMap;
use std::fmt;

/// Where a node listens: its address and port, and its "technical" host name, which the
/// handshake cross-checks (YDB's `TTableNameserverSetup` entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// The address to connect to (an IP address or a name to resolve).
    pub address: String,
    /// The TCP port.
    pub port: u16,
    /// The host name this node calls itself in handshakes. A connecting node sends the
    /// host name the table lists for itself and the one it lists for the peer; the peer
    /// refuses a mismatch.
    pub host: String,
}

impl NodeAddress {
    /// A node at `address:port` whose host name is `address`.
    pub fn new(address: impl Into<String>, port: u16) -> NodeAddress {
        let address = address.into();
        NodeAddress {
            host: address.clone(),
            address,
            port,
        }
    }

    /// This entry with host name `host`.
    pub fn host(mut self, host: impl Into<String>) -> NodeAddress {
        self.host = host.into();
        self
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} ({})", self.address, self.port, self.host)
    }
}

/// The static table of the cluster's nodes: node id → [`NodeAddress`] (YDB's table name
/// service). Every node of a cluster gets the same table; a node that is not in it is a
/// stranger and is refused.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::{NameService, NodeAddress};
///
/// let names = NameService::new()
///     .node(1, NodeAddress::new("127.0.0.1", 13301))
///     .node(2, NodeAddress::new("127.0.0.1", 13302));
/// assert_eq!(names.get(2).map(|a| a.port), Some(13302));
/// assert!(names.get(3).is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameService {
    nodes: BTreeMap<u32, NodeAddress>,
}

impl NameService {
    /// An empty table.
    pub fn new() -> NameService {
        NameService::default()
    }

    /// This table with node `node_id` at `address` (replacing an earlier entry).
    pub fn node(mut self, node_id: u32, address: NodeAddress) -> NameService {
        self.nodes.insert(node_id, address);
        self
    }

    /// The entry of `node_id`.
    pub fn get(&self, node_id: u32) -> Option<&NodeAddress> {
        self.nodes.get(&node_id)
    }

    /// The node ids, in order.
    pub fn node_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.nodes.keys().copied()
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}
