//! [`ActorId`]: YDB's 16-byte actor address, bit for bit.

use std::cmp::Ordering;
use std::fmt;
use std::hash::Hash;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The address of an actor or of a service, bit-compatible with YDB's `TActorId`.
///
/// Two 64-bit words, `x1` and `x2`, sent little-endian in that order (16 bytes):
///
/// | word | bits | field | accessor |
/// |---|---|---|---|
/// | `x1` | 63..0 | local id (u64) | [`local_id`](Self::local_id) |
/// | `x2` | 63 | service flag | [`is_service`](Self::is_service) |
/// | `x2` | 62..52 | pool id (11 bits, 0..=2047) | [`pool_id`](Self::pool_id) |
/// | `x2` | 51..32 | node id (20 bits, 0..=1 048 575) | [`node_id`](Self::node_id) |
/// | `x2` | 31..0 | hint (u32) | [`hint`](Self::hint) |
///
/// Bits 63..32 of `x2` are YDB's *node word*. Node id 0 means "this node". The all-zero id
/// is [`ActorId::EMPTY`] (also the [`Default`]); any other id is "set".
///
/// A **service id** ([`ActorId::service`]) has the service flag set and a name of at most
/// 12 bytes in place of the local id and the hint: name bytes 0..8 are `x1` and bytes 8..12
/// are the hint, both little-endian, zero-padded. Its pool bits are zero.
///
/// # Out-of-range fields
///
/// [`new`](Self::new) and [`with_pool`](Self::with_pool) keep the low 20 bits of the node
/// id and the low 11 bits of the pool id, so an oversized value never leaks into the
/// neighbouring fields (YDB ORs them in unchecked). [`try_new`](Self::try_new) and
/// [`try_with_pool`](Self::try_with_pool) report them as [`ActorIdError`] instead. Nothing
/// here panics.
///
/// # Text form
///
/// `Display` prints `[node:local:hint]` in decimal, as YDB does: the pool id and the service
/// flag are not printed, so the text round-trips only ids whose pool and service bits are
/// zero. `FromStr` parses exactly YDB's way, quirks included: see
/// [`ParseActorIdError`](super::ParseActorIdError).
///
/// # Order
///
/// `Ord` is YDB's: by `x1` (the local id) first, then `x2`. [`cmp_ordered`](Self::cmp_ordered)
/// is YDB's "ordered" comparison, by node id then local id, for range scans;
/// [`OrderedActorId`] wraps an id to use it as a map key.
///
/// # Serde
///
/// Laid out as YDB's protobuf message `NActorsProto.TActorId` (`fixed64 RawX1 = 1;
/// fixed64 RawX2 = 2`): a struct named `ActorId` with the two fields `raw_x1` and `raw_x2`,
/// the raw words as `u64` (in JSON: `{"raw_x1":2,"raw_x2":4294967299}` for `[1:2:3]`).
/// Any pair of words deserializes; nothing is validated, as with
/// [`from_raw`](Self::from_raw).
///
/// # Examples
///
/// ```
/// use agentbox::ActorId;
///
/// let id = ActorId::with_pool(7, 2, 1000, 5);
/// assert_eq!((id.node_id(), id.pool_id(), id.local_id(), id.hint()), (7, 2, 1000, 5));
/// assert_eq!(id.raw(), (1000, (7 | 2 << 20) << 32 | 5));
/// assert_eq!(id.to_string(), "[7:1000:5]"); // the pool is not printed
///
/// let plain: ActorId = "[7:1000:5]".parse()?;
/// assert_eq!(plain, ActorId::new(7, 1000, 5));
/// assert_eq!(ActorId::from_le_bytes(plain.to_le_bytes()), plain);
///
/// let svc = ActorId::service(0, b"namesvc")?;
/// assert!(svc.is_service());
/// assert_eq!(svc, ActorId::name_service());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(from = "ActorIdProto", into = "ActorIdProto")]
pub struct ActorId {
    // Field order matters: the derived `Ord` compares `x1` first, as YDB does.
    x1: u64,
    x2: u64,
}

const _: () = assert!(std::mem::size_of::<ActorId>() == 16);

// Pinned auto traits: ids are plain values shared everywhere.
const _: fn() = || {
    fn pinned<T: Copy + Send + Sync + Eq + Ord + Hash + Unpin + 'static>() {}
    pinned::<ActorId>();
};

/// Bits 63..32 of `x2`: the node word.
const NODE_WORD_SHIFT: u32 = 32;
/// The pool id's position in the node word.
const POOL_SHIFT: u32 = 20;
/// The service flag in the node word.
const SERVICE_FLAG: u32 = 0x8000_0000;

/// Why an [`ActorId`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ActorIdError {
    /// The node id does not fit in its 20 bits.
    #[error("node id {0} does not fit in 20 bits (max {max})", max = ActorId::MAX_NODE_ID)]
    NodeIdTooLarge(u32),
    /// The pool id does not fit in its 11 bits.
    #[error("pool id {0} does not fit in 11 bits (max {max})", max = ActorId::MAX_POOL_ID)]
    PoolIdTooLarge(u32),
    /// A service name is longer than 12 bytes.
    #[error("service name of {0} bytes is longer than {max}", max = ActorId::MAX_SERVICE_NAME_LEN)]
    ServiceNameTooLong(usize),
}

impl ActorId {
    /// The empty id: both words zero. Equal to `ActorId::default()`.
    pub const EMPTY: ActorId = ActorId { x1: 0, x2: 0 };
    /// The largest node id (20 bits).
    pub const MAX_NODE_ID: u32 = 0x000F_FFFF;
    /// The largest pool id (11 bits).
    pub const MAX_POOL_ID: u32 = 0x0000_07FF;
    /// The longest service name, in bytes.
    pub const MAX_SERVICE_NAME_LEN: usize = 12;

    /// An actor id on pool 0.
    ///
    /// Only the low 20 bits of `node_id` are kept (see [`try_new`](Self::try_new)).
    pub const fn new(node_id: u32, local_id: u64, hint: u32) -> ActorId {
        ActorId::with_pool(node_id, 0, local_id, hint)
    }

    /// An actor id on pool `pool_id`.
    ///
    /// Only the low 20 bits of `node_id` and the low 11 bits of `pool_id` are kept (see
    /// [`try_with_pool`](Self::try_with_pool)).
    pub const fn with_pool(node_id: u32, pool_id: u32, local_id: u64, hint: u32) -> ActorId {
        let node_word =
            (node_id & Self::MAX_NODE_ID) | ((pool_id & Self::MAX_POOL_ID) << POOL_SHIFT);
        ActorId::from_parts(node_word, local_id, hint)
    }

    /// [`new`](Self::new) that refuses a node id wider than 20 bits.
    ///
    /// # Errors
    ///
    /// [`ActorIdError::NodeIdTooLarge`] if `node_id > ActorId::MAX_NODE_ID`.
    pub const fn try_new(node_id: u32, local_id: u64, hint: u32) -> Result<ActorId, ActorIdError> {
        ActorId::try_with_pool(node_id, 0, local_id, hint)
    }

    /// [`with_pool`](Self::with_pool) that refuses oversized fields.
    ///
    /// # Errors
    ///
    /// [`ActorIdError::NodeIdTooLarge`] if `node_id > ActorId::MAX_NODE_ID`,
    /// [`ActorIdError::PoolIdTooLarge`] if `pool_id > ActorId::MAX_POOL_ID`.
    pub const fn try_with_pool(
        node_id: u32,
        pool_id: u32,
        local_id: u64,
        hint: u32,
    ) -> Result<ActorId, ActorIdError> {
        if node_id > Self::MAX_NODE_ID {
            return Err(ActorIdError::NodeIdTooLarge(node_id));
        }
        if pool_id > Self::MAX_POOL_ID {
            return Err(ActorIdError::PoolIdTooLarge(pool_id));
        }
        Ok(ActorId::with_pool(node_id, pool_id, local_id, hint))
    }

    /// The service id named `name` on node `node_id`.
    ///
    /// The name (at most 12 bytes, zero-padded) becomes the local id (bytes 0..8) and the
    /// hint (bytes 8..12), little-endian; the service flag is set, the pool is 0. Services
    /// are looked up by all 16 bytes: `(0, "namesvc")` and `(5, "namesvc")` differ.
    ///
    /// # Errors
    ///
    /// [`ActorIdError::ServiceNameTooLong`] if `name` is longer than 12 bytes,
    /// [`ActorIdError::NodeIdTooLarge`] if `node_id > ActorId::MAX_NODE_ID`.
    pub const fn service(node_id: u32, name: &[u8]) -> Result<ActorId, ActorIdError> {
        if name.len() > Self::MAX_SERVICE_NAME_LEN {
            return Err(ActorIdError::ServiceNameTooLong(name.len()));
        }
        if node_id > Self::MAX_NODE_ID {
            return Err(ActorIdError::NodeIdTooLarge(node_id));
        }
        let mut buf = [0u8; 12];
        let mut i = 0;
        while i < name.len() {
            buf[i] = name[i];
            i += 1;
        }
        Ok(ActorId::service_from_array(node_id, buf))
    }

    /// A service id from exactly 12 name bytes; `node_id` is within 20 bits.
    const fn service_from_array(node_id: u32, name: [u8; 12]) -> ActorId {
        let local = u64::from_le_bytes([
            name[0], name[1], name[2], name[3], name[4], name[5], name[6], name[7],
        ]);
        let hint = u32::from_le_bytes([name[8], name[9], name[10], name[11]]);
        ActorId::from_parts(node_id | SERVICE_FLAG, local, hint)
    }

    /// The interconnect proxy of node `node_id`: the service `"ICProxy@"` followed by
    /// `node_id` as 4 little-endian bytes, on node 0 (YDB's `MakeInterconnectProxyId`).
    ///
    /// All 32 bits of `node_id` go into the name, unmasked, as in YDB.
    pub const fn interconnect_proxy(node_id: u32) -> ActorId {
        let n = node_id.to_le_bytes();
        ActorId::service_from_array(
            0,
            [
                b'I', b'C', b'P', b'r', b'o', b'x', b'y', b'@', n[0], n[1], n[2], n[3],
            ],
        )
    }

    /// The name service: the service `"namesvc"` on node 0.
    pub const fn name_service() -> ActorId {
        ActorId::service_from_array(0, *b"namesvc\0\0\0\0\0")
    }

    /// The id with these raw words, taken as they are (any value is an id).
    pub const fn from_raw(x1: u64, x2: u64) -> ActorId {
        ActorId { x1, x2 }
    }

    /// The raw words `(x1, x2)`, as in YDB's protobuf form.
    pub const fn raw(&self) -> (u64, u64) {
        (self.x1, self.x2)
    }

    /// The 16 bytes of the wire: `x1` then `x2`, each little-endian.
    pub const fn to_le_bytes(&self) -> [u8; 16] {
        let a = self.x1.to_le_bytes();
        let b = self.x2.to_le_bytes();
        [
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1], b[2], b[3], b[4], b[5],
            b[6], b[7],
        ]
    }

    /// The id read from the 16 bytes of the wire (the inverse of
    /// [`to_le_bytes`](Self::to_le_bytes)).
    pub const fn from_le_bytes(bytes: [u8; 16]) -> ActorId {
        let b = bytes;
        ActorId {
            x1: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            x2: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }

    /// The node id (20 bits); 0 means "this node".
    pub const fn node_id(&self) -> u32 {
        self.node_word() & Self::MAX_NODE_ID
    }

    /// The pool id (11 bits). Always 0 for ids built by [`service`](Self::service).
    pub const fn pool_id(&self) -> u32 {
        (self.node_word() >> POOL_SHIFT) & Self::MAX_POOL_ID
    }

    /// The local id: all of `x1`. For a service id, its name bytes 0..8.
    pub const fn local_id(&self) -> u64 {
        self.x1
    }

    /// The hint: the low 32 bits of `x2`. For a service id, its name bytes 8..12.
    pub const fn hint(&self) -> u32 {
        self.x2 as u32
    }

    /// Whether the service flag (bit 63 of `x2`) is set.
    pub const fn is_service(&self) -> bool {
        self.node_word() & SERVICE_FLAG != 0
    }

    /// Whether this is the empty id (both words zero).
    pub const fn is_empty(&self) -> bool {
        self.x1 == 0 && self.x2 == 0
    }

    /// The 12 name bytes of a service id, zero padding included (as YDB's `ServiceId()`),
    /// or `None` if this is not a service id.
    ///
    /// A name that ends in zero bytes cannot be told from a shorter one: both are the same
    /// id.
    pub const fn service_name(&self) -> Option<[u8; 12]> {
        if !self.is_service() {
            return None;
        }
        let a = self.x1.to_le_bytes();
        let b = self.hint().to_le_bytes();
        Some([
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1], b[2], b[3],
        ])
    }

    /// YDB's "ordered" comparison: by [`node_id`](Self::node_id), then
    /// [`local_id`](Self::local_id); the hint, the pool and the service flag are ignored.
    ///
    /// Ids of one node sort by local id, so a range of them can be scanned. This is a
    /// weaker order than `Ord`: two different ids with the same node and local id compare
    /// `Equal`. YDB allows it for plain ids only (a debug assertion); here service ids are
    /// compared the same way, by their node and name bytes 0..8, and nothing panics. Use
    /// [`OrderedActorId`] for a key type whose order is total.
    pub const fn cmp_ordered(&self, other: &ActorId) -> Ordering {
        let (a, b) = (self.node_id(), other.node_id());
        if a != b {
            return if a < b {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (a, b) = (self.x1, other.x1);
        if a < b {
            Ordering::Less
        } else if a > b {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    const fn node_word(&self) -> u32 {
        (self.x2 >> NODE_WORD_SHIFT) as u32
    }

    const fn from_parts(node_word: u32, local_id: u64, hint: u32) -> ActorId {
        ActorId {
            x1: local_id,
            x2: ((node_word as u64) << NODE_WORD_SHIFT) | hint as u64,
        }
    }
}

impl fmt::Display for ActorId {
    /// `[node:local:hint]`, decimal, node masked to its 20 bits (YDB's `TActorId::Out`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}:{}:{}]",
            self.node_id(),
            self.local_id(),
            self.hint()
        )
    }
}

impl fmt::Debug for ActorId {
    /// `[node:local:hint]`, then the pool when it is not 0; a service id shows its name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.service_name() {
            let len = name.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            let name = name[..len].escape_ascii();
            return write!(f, "ActorId(service \"{name}\" on node {})", self.node_id());
        }
        write!(f, "ActorId{self}")?;
        if self.pool_id() != 0 {
            write!(f, "@pool{}", self.pool_id())?;
        }
        Ok(())
    }
}

/// An [`ActorId`] ordered by node, then local id, for sorted maps and range scans.
///
/// Its order is [`ActorId::cmp_ordered`], with ties (same node and local id) broken by the
/// raw words so that it stays consistent with `Eq`: all ids of node `n` form one contiguous
/// range, sorted by local id.
///
/// # Examples
///
/// ```
/// use std::collections::BTreeSet;
/// use agentbox::actors::OrderedActorId;
/// use agentbox::ActorId;
///
/// let ids: BTreeSet<_> = [(2, 5), (1, 9), (2, 1), (1, 3)]
///     .into_iter()
///     .map(|(node, local)| OrderedActorId(ActorId::new(node, local, 0)))
///     .collect();
/// let node_2: Vec<u64> = ids
///     .range(OrderedActorId(ActorId::new(2, 0, 0))..OrderedActorId(ActorId::new(3, 0, 0)))
///     .map(|id| id.0.local_id())
///     .collect();
/// assert_eq!(node_2, [1, 5]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct OrderedActorId(pub ActorId);

impl Ord for OrderedActorId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .cmp_ordered(&other.0)
            .then_with(|| self.0.x2.cmp(&other.0.x2))
            .then_with(|| self.0.x1.cmp(&other.0.x1))
    }
}

impl PartialOrd for OrderedActorId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<ActorId> for OrderedActorId {
    fn from(id: ActorId) -> Self {
        OrderedActorId(id)
    }
}

/// The serde form: YDB's `NActorsProto.TActorId { fixed64 RawX1 = 1; fixed64 RawX2 = 2; }`.
#[derive(Serialize, Deserialize)]
#[serde(rename = "ActorId")]
struct ActorIdProto {
    raw_x1: u64,
    raw_x2: u64,
}

impl From<ActorIdProto> for ActorId {
    fn from(p: ActorIdProto) -> Self {
        ActorId::from_raw(p.raw_x1, p.raw_x2)
    }
}

impl From<ActorId> for ActorIdProto {
    fn from(id: ActorId) -> Self {
        ActorIdProto {
            raw_x1: id.x1,
            raw_x2: id.x2,
        }
    }
}
