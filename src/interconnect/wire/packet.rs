//! [`Packet`]: the 22-byte header of the data stream and its payload.

use super::error::{need, WireError};
use super::{crc32c_extend, le_u16, le_u32, le_u64};

/// One packet of an established session (YDB's `TTcpPacketHeader_v2` and its payload).
///
/// The header is 22 bytes, packed, little-endian:
///
/// | offset | size | field | notes |
/// |---|---|---|---|
/// | 0 | 8 | [`confirm`](Self::confirm) | u64: the highest data serial this side has received and processed |
/// | 8 | 8 | [`serial`](Self::serial) | u64: the data serial (1, 2, 3, ...) or an auxiliary code (below) |
/// | 16 | 4 | checksum | u32: CRC32C of the 22 header bytes with these 4 set to zero, then the payload |
/// | 20 | 2 | payload length | u16: the number of [`payload`](Self::payload) bytes that follow |
///
/// The payload of a data packet is a sequence of [`ChannelPart`](super::ChannelPart)s.
/// Packets with an empty payload are auxiliary, told apart by the serial
/// ([`kind`](Self::kind)):
///
/// | packet | payload | serial | constructor |
/// |---|---|---|---|
/// | data | > 0 bytes | 1, 2, 3, ... within a session | [`data`](Self::data) |
/// | pure confirm | 0 | 0 | [`pure_confirm`](Self::pure_confirm) |
/// | ping request | 0 | `stamp \| 1 << 63` ([`PING_REQUEST_MASK`](Self::PING_REQUEST_MASK)) | [`ping_request`](Self::ping_request) |
/// | ping response | 0 | `stamp \| 1 << 62` ([`PING_RESPONSE_MASK`](Self::PING_RESPONSE_MASK)) | [`ping_response`](Self::ping_response) |
/// | clock sample | 0 | `unix_micros \| 1 << 61` ([`CLOCK_MASK`](Self::CLOCK_MASK)) | [`clock`](Self::clock) |
///
/// The checksum covers the header (its checksum field zeroed) and the payload, by the
/// [`PacketChecksum`] the session negotiated: CRC32C ([`encode`](Self::encode),
/// [`decode`](Self::decode)), or XXH3 when the handshake set `UseXxhash`
/// ([`encode_with`](Self::encode_with), [`decode_with`](Self::decode_with)). With TLS the
/// field is 0 and nothing is checked ([`PacketChecksum::Tls`], YDB's rule). XDC bytes sent on a second socket are not covered.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{Packet, PacketKind};
///
/// // A data packet: serial 7, confirming the peer's packets up to 3.
/// let packet = Packet::data(3, 7, b"parts".to_vec());
/// let bytes = packet.encode();
/// assert_eq!(bytes.len(), Packet::HEADER_LEN + 5);
/// assert_eq!(&bytes[0..8], &3u64.to_le_bytes());
/// assert_eq!(&bytes[8..16], &7u64.to_le_bytes());
/// assert_eq!(&bytes[20..22], &5u16.to_le_bytes());
/// assert_eq!(Packet::decode(&bytes)?, (packet.clone(), bytes.len()));
/// assert_eq!(packet.kind(), PacketKind::Data { serial: 7 });
///
/// // A ping and its answer carry the requester's stamp.
/// let ping = Packet::ping_request(3, 123_456);
/// assert_eq!(ping.serial, 123_456 | 1 << 63);
/// let PacketKind::PingRequest { stamp } = ping.kind() else { unreachable!() };
/// let pong = Packet::ping_response(9, stamp);
/// assert_eq!(pong.kind(), PacketKind::PingResponse { stamp: 123_456 });
///
/// // A flipped bit is caught by the checksum.
/// let mut bad = bytes.clone();
/// bad[23] ^= 1;
/// assert!(matches!(
///     Packet::decode(&bad),
///     Err(agentbox::interconnect::wire::WireError::BadChecksum { .. })
/// ));
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Packet {
    /// The highest data serial this side has received and processed. Every packet carries
    /// it; the peer drops its kept packets up to it.
    pub confirm: u64,
    /// The data serial, or the auxiliary code of an empty packet (see the table above).
    pub serial: u64,
    /// The payload: channel parts for a data packet, empty for an auxiliary one.
    pub payload: Vec<u8>,
}

/// How a session's packets are checksummed: chosen by the handshake's `UseXxhash` (YDB's
/// responder sets it to the requester's `RequestXxhash`) and kept for the whole session,
/// resumes included.
///
/// Both cover the 22 header bytes with the checksum field (bytes 16..20) zeroed, then the
/// payload:
///
/// | mode | checksum field |
/// |---|---|
/// | [`Crc32c`](Self::Crc32c) (`UseXxhash` false or absent) | CRC32C of those bytes |
/// | [`Xxh3`](Self::Xxh3) (`UseXxhash` true) | the low 32 bits of XXH3-64 (seed 0) of those bytes |
/// | [`Tls`](Self::Tls) (the session runs TLS, either way) | 0, and not checked |
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{Packet, PacketChecksum};
///
/// let packet = Packet::data(3, 7, b"parts".to_vec());
/// let bytes = packet.encode_with(PacketChecksum::Xxh3)?;
/// assert_eq!(&bytes[16..20], &PacketChecksum::Xxh3.compute(3, 7, b"parts").to_le_bytes());
/// assert_eq!(Packet::decode_with(&bytes, PacketChecksum::Xxh3)?.0, packet);
/// // The other mode's receiver sees a checksum error.
/// assert!(Packet::decode(&bytes).is_err());
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PacketChecksum {
    /// CRC32C, YDB's mode when XXH3 was not negotiated.
    #[default]
    Crc32c,
    /// XXH3-64 with seed 0, truncated to its low 32 bits (YDB's `UseXxhash` mode: the
    /// digest is stored in a 32-bit field).
    Xxh3,
    /// A session under TLS, whatever the handshake chose (YDB's rule: TLS guards the
    /// bytes): the sender writes 0 and the receiver checks nothing.
    Tls,
}

impl PacketChecksum {
    /// The mode a handshake's `UseXxhash` field selects.
    pub fn negotiated(use_xxhash: Option<bool>) -> PacketChecksum {
        if use_xxhash == Some(true) {
            PacketChecksum::Xxh3
        } else {
            PacketChecksum::Crc32c
        }
    }

    /// The checksum field of a packet with these fields in this mode.
    pub fn compute(self, confirm: u64, serial: u64, payload: &[u8]) -> u32 {
        let header = Packet::header(confirm, serial, 0, payload.len() as u16);
        match self {
            PacketChecksum::Crc32c => crc32c_extend(crc32c_extend(0, &header), payload),
            // YDB keeps the 64-bit digest in a u32: its low half.
            // A small packet hashed in one go from the stack (profile: the streaming hasher
            // allocates its buffer, ~1,000 instructions for a ping-pong packet against ~200
            // in one go). Same digest: XXH3 of the same bytes. A ping-pong's packet uses
            // the small buffer (profile, `ic_ping_pong_rtt`: zeroing the 1 046-byte one
            // was ~80 instructions per packet, a third of the checksum's cost).
            PacketChecksum::Xxh3 if payload.len() <= XXH3_SMALL_PAYLOAD => {
                let mut bytes = [0u8; Packet::HEADER_LEN + XXH3_SMALL_PAYLOAD];
                oneshot_xxh3(&mut bytes, &header, payload)
            }
            PacketChecksum::Xxh3 if payload.len() <= XXH3_ONESHOT_PAYLOAD => {
                let mut bytes = [0u8; Packet::HEADER_LEN + XXH3_ONESHOT_PAYLOAD];
                oneshot_xxh3(&mut bytes, &header, payload)
            }
            PacketChecksum::Xxh3 => {
                use std::hash::Hasher as _;
                let mut h = twox_hash::XxHash3_64::new();
                h.write(&header);
                h.write(payload);
                h.finish() as u32
            }
            PacketChecksum::Tls => 0,
        }
    }
}

impl PacketChecksum {
    /// The checksum of a whole packet laid out in `bytes` (header, then payload) whose
    /// checksum field holds 0: [`compute`](Self::compute) of its fields, in one go over
    /// the bytes where they lie (the writer builds packets in its batch this way: no copy,
    /// and no streaming hasher, which allocates its buffer, for a large packet).
    pub(crate) fn compute_in_place(self, bytes: &[u8]) -> u32 {
        match self {
            PacketChecksum::Crc32c => crc32c_extend(0, bytes),
            PacketChecksum::Xxh3 => twox_hash::XxHash3_64::oneshot(bytes) as u32,
            PacketChecksum::Tls => 0,
        }
    }
}

/// The largest payload whose XXH3 checksum is computed in one go from a stack copy.
const XXH3_ONESHOT_PAYLOAD: usize = 1024;
/// The largest payload copied into the smaller stack buffer.
const XXH3_SMALL_PAYLOAD: usize = 234;

/// XXH3 (its low 32 bits) of `header` then `payload`, copied into `bytes` (long enough).
fn oneshot_xxh3(bytes: &mut [u8], header: &[u8; Packet::HEADER_LEN], payload: &[u8]) -> u32 {
    let n = Packet::HEADER_LEN + payload.len();
    bytes[..Packet::HEADER_LEN].copy_from_slice(header);
    bytes[Packet::HEADER_LEN..n].copy_from_slice(payload);
    twox_hash::XxHash3_64::oneshot(&bytes[..n]) as u32
}

/// What a [`Packet`] is, by its payload length and serial, tested in YDB's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketKind {
    /// A non-empty payload: a data packet with this serial (whatever its bits).
    Data {
        /// The data serial.
        serial: u64,
    },
    /// An empty packet whose serial has none of bits 63, 62, 61 set: only its confirm
    /// counts. YDB sends serial 0 and ignores any other value here.
    Confirm,
    /// Bit 63 set: a ping request; the peer answers with a ping response carrying `stamp`.
    PingRequest {
        /// The serial without bit 63: YDB's CPU-cycle stamp, opaque to the peer.
        stamp: u64,
    },
    /// Bit 62 set (bit 63 clear): the answer to a ping request.
    PingResponse {
        /// The serial without bit 62: the stamp of the request it answers.
        stamp: u64,
    },
    /// Bit 61 set (bits 63 and 62 clear): the sender's wall clock.
    Clock {
        /// The serial without bit 61: microseconds since the Unix epoch.
        unix_micros: u64,
    },
}

impl Packet {
    /// The header length: 22 bytes.
    pub const HEADER_LEN: usize = 22;
    /// The largest payload the length field can carry (`u16::MAX`); a receiver accepts any.
    pub const MAX_PAYLOAD: usize = u16::MAX as usize;
    /// The largest payload YDB's sender puts in one packet, 8074 bytes
    /// (`TTcpPacketBuf::PacketDataLen` = 4096 * 2 - 96 - 22).
    pub const SENDER_PAYLOAD: usize = 4096 * 2 - 96 - Self::HEADER_LEN;
    /// Bit 63 of an empty packet's serial: ping request.
    pub const PING_REQUEST_MASK: u64 = 1 << 63;
    /// Bit 62 of an empty packet's serial: ping response.
    pub const PING_RESPONSE_MASK: u64 = 1 << 62;
    /// Bit 61 of an empty packet's serial: clock sample.
    pub const CLOCK_MASK: u64 = 1 << 61;

    /// A data packet: `serial` counts from 1 within a session, `payload` holds channel parts.
    pub fn data(confirm: u64, serial: u64, payload: Vec<u8>) -> Packet {
        Packet {
            confirm,
            serial,
            payload,
        }
    }

    /// An empty packet that only carries `confirm` (serial 0).
    pub const fn pure_confirm(confirm: u64) -> Packet {
        Packet::aux(confirm, 0)
    }

    /// A ping request: serial `stamp | 1 << 63`. YDB's stamp is a CPU-cycle counter; the
    /// peer echoes it without bit 63, so bit 63 of `stamp` is lost.
    pub const fn ping_request(confirm: u64, stamp: u64) -> Packet {
        Packet::aux(confirm, stamp | Self::PING_REQUEST_MASK)
    }

    /// The answer to a ping request whose [`PacketKind::PingRequest`] stamp was `stamp`:
    /// serial `stamp | 1 << 62` (bit 63 of `stamp` cleared, as YDB does).
    pub const fn ping_response(confirm: u64, stamp: u64) -> Packet {
        Packet::aux(
            confirm,
            (stamp & !Self::PING_REQUEST_MASK) | Self::PING_RESPONSE_MASK,
        )
    }

    /// A clock sample: serial `unix_micros | 1 << 61`.
    pub const fn clock(confirm: u64, unix_micros: u64) -> Packet {
        Packet::aux(confirm, unix_micros | Self::CLOCK_MASK)
    }

    const fn aux(confirm: u64, serial: u64) -> Packet {
        Packet {
            confirm,
            serial,
            payload: Vec::new(),
        }
    }

    /// What this packet is, tested as YDB's receiver does: a non-empty payload is data;
    /// otherwise bit 63, then 62, then 61 of the serial.
    pub fn kind(&self) -> PacketKind {
        let serial = self.serial;
        if !self.payload.is_empty() {
            PacketKind::Data { serial }
        } else if serial & Self::PING_REQUEST_MASK != 0 {
            PacketKind::PingRequest {
                stamp: serial & !Self::PING_REQUEST_MASK,
            }
        } else if serial & Self::PING_RESPONSE_MASK != 0 {
            PacketKind::PingResponse {
                stamp: serial & !Self::PING_RESPONSE_MASK,
            }
        } else if serial & Self::CLOCK_MASK != 0 {
            PacketKind::Clock {
                unix_micros: serial & !Self::CLOCK_MASK,
            }
        } else {
            PacketKind::Confirm
        }
    }

    /// Whether this is a data packet (a non-empty payload).
    pub fn is_data(&self) -> bool {
        !self.payload.is_empty()
    }

    /// The checksum of a packet with these fields: CRC32C of the header with its checksum
    /// field zeroed, then the payload. `payload` must fit a u16 length (its length is
    /// truncated to 16 bits otherwise).
    ///
    /// For writers that build packets in place rather than through [`encode`](Self::encode).
    pub fn checksum(confirm: u64, serial: u64, payload: &[u8]) -> u32 {
        PacketChecksum::Crc32c.compute(confirm, serial, payload)
    }

    fn header(confirm: u64, serial: u64, checksum: u32, len: u16) -> [u8; Self::HEADER_LEN] {
        let mut h = [0u8; Self::HEADER_LEN];
        h[0..8].copy_from_slice(&confirm.to_le_bytes());
        h[8..16].copy_from_slice(&serial.to_le_bytes());
        h[16..20].copy_from_slice(&checksum.to_le_bytes());
        h[20..22].copy_from_slice(&len.to_le_bytes());
        h
    }

    /// The 22-byte header, checksum included, and the payload.
    ///
    /// # Panics
    ///
    /// If the payload is over [`MAX_PAYLOAD`](Self::MAX_PAYLOAD) bytes; see
    /// [`try_encode`](Self::try_encode).
    pub fn encode(&self) -> Vec<u8> {
        match self.try_encode() {
            Ok(bytes) => bytes,
            Err(e) => panic!("Packet::encode: {e}"),
        }
    }

    /// [`encode`](Self::encode) that reports an oversized payload instead of panicking.
    ///
    /// # Errors
    ///
    /// [`WireError::TooLarge`] if the payload is over [`MAX_PAYLOAD`](Self::MAX_PAYLOAD)
    /// bytes.
    pub fn try_encode(&self) -> Result<Vec<u8>, WireError> {
        self.encode_with(PacketChecksum::Crc32c)
    }

    /// [`try_encode`](Self::try_encode) with the checksum of `mode`.
    ///
    /// # Errors
    ///
    /// [`WireError::TooLarge`] if the payload is over [`MAX_PAYLOAD`](Self::MAX_PAYLOAD)
    /// bytes.
    pub fn encode_with(&self, mode: PacketChecksum) -> Result<Vec<u8>, WireError> {
        let size = self.payload.len();
        if size > Self::MAX_PAYLOAD {
            return Err(WireError::TooLarge {
                size,
                max: Self::MAX_PAYLOAD,
            });
        }
        let checksum = mode.compute(self.confirm, self.serial, &self.payload);
        let mut out = Vec::with_capacity(Self::HEADER_LEN + size);
        out.extend_from_slice(&Self::header(
            self.confirm,
            self.serial,
            checksum,
            size as u16,
        ));
        out.extend_from_slice(&self.payload);
        Ok(out)
    }

    /// Reads a packet from the start of `bytes`; returns it and the bytes consumed (22 +
    /// payload length).
    ///
    /// # Errors
    ///
    /// - [`WireError::Truncated`] if the header, or the payload it announces, is not all
    ///   there (`need` is then the whole packet's length once the header is known);
    /// - [`WireError::BadChecksum`] if the checksum does not match (YDB drops the
    ///   connection and resumes the session on a new one).
    pub fn decode(bytes: &[u8]) -> Result<(Packet, usize), WireError> {
        Self::decode_with(bytes, PacketChecksum::Crc32c)
    }

    /// [`decode`](Self::decode) of a packet checksummed in `mode`.
    ///
    /// # Errors
    ///
    /// As [`decode`](Self::decode).
    pub fn decode_with(bytes: &[u8], mode: PacketChecksum) -> Result<(Packet, usize), WireError> {
        need(bytes, Self::HEADER_LEN)?;
        let confirm = le_u64(bytes, 0);
        let serial = le_u64(bytes, 8);
        let expected = le_u32(bytes, 16);
        let total = Self::HEADER_LEN + le_u16(bytes, 20) as usize;
        need(bytes, total)?;
        let payload = &bytes[Self::HEADER_LEN..total];
        let actual = mode.compute(confirm, serial, payload);
        if expected != actual && mode != PacketChecksum::Tls {
            return Err(WireError::BadChecksum { expected, actual });
        }
        let packet = Packet {
            confirm,
            serial,
            payload: payload.to_vec(),
        };
        Ok((packet, total))
    }
}
