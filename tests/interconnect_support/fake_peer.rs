//! A fake peer node for the interconnect tests: a plain `TcpStream` driven by the test with
//! the public wire codec, on either side of the handshake, that sends and reads packets as
//! the test says (it confirms, pings and answers only when told to).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use agentbox::interconnect::wire::{
    ChannelPart, EventDescriptor, ExBlock, HandshakeReply, HandshakeRequest, HandshakeSuccess,
    InitialPacket, Packet, PacketChecksum, PacketKind, WireError, HANDSHAKE_PROTOCOL,
};
use agentbox::ActorId;

/// Socket timeouts of a fake peer: a read waits at most this long at a time.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);

/// The peer's program as its handshakes name it: (PID, start time).
pub const PROGRAM: (u64, u64) = (4242, 1);

/// The handshake request of node `from`'s session `session` to node `to` (both on
/// 127.0.0.1), from [`PROGRAM`]; `xxhash` asks for XXH3 checksums.
pub fn request(from: ActorId, to: u32, xxhash: bool) -> HandshakeRequest {
    HandshakeRequest {
        protocol: HANDSHAKE_PROTOCOL,
        program_pid: PROGRAM.0,
        program_start_time: PROGRAM.1,
        serial: from.local_id(),
        receiver_node_id: to,
        sender_actor_id: from.to_string(),
        sender_host_name: Some("127.0.0.1".into()),
        receiver_host_name: Some("127.0.0.1".into()),
        request_modern_frame: Some(true),
        request_extended_trace_fmt: Some(true),
        request_xxhash: Some(xxhash),
        ..Default::default()
    }
}

/// One packet the node sent, as the fake peer read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub packet: Packet,
    /// When it was read.
    pub at: Instant,
}

impl Seen {
    pub fn kind(&self) -> PacketKind {
        self.packet.kind()
    }
}

/// One connection of a fake peer with a node.
pub struct FakePeer {
    pub stream: TcpStream,
    /// Our session id.
    pub ours: ActorId,
    /// The node's session id.
    pub theirs: ActorId,
    /// The packet checksum of the session.
    pub mode: PacketChecksum,
    /// The node's handshake message: its success (we connected) or its request (it did).
    pub success: Option<HandshakeSuccess>,
    pub request: Option<HandshakeRequest>,
    inbuf: Vec<u8>,
}

fn set_timeouts(s: &TcpStream) {
    s.set_read_timeout(Some(SOCKET_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(SOCKET_TIMEOUT)).unwrap();
    let _ = s.set_nodelay(true);
}

fn read_n(s: &mut TcpStream, n: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf)
        .map_err(|e| format!("reading {n} bytes: {e}"))?;
    Ok(buf)
}

fn read_exblock(s: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut bytes = read_n(s, ExBlock::HEADER_LEN)?;
    let size = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if size > ExBlock::MAX_SIZE {
        return Err(format!("ExBlock of {size} bytes"));
    }
    bytes.extend(read_n(s, size)?);
    let (block, _) = ExBlock::decode(&bytes).map_err(|e| format!("ExBlock: {e}"))?;
    Ok(block.payload)
}

fn read_initial(s: &mut TcpStream) -> Result<InitialPacket, String> {
    let bytes = read_n(s, InitialPacket::LEN)?;
    Ok(InitialPacket::decode(&bytes)
        .map_err(|e| format!("initial packet: {e}"))?
        .0)
}

impl FakePeer {
    /// Connects to the node at `addr` and does the handshake of a new session with
    /// `request`; fails with the reason if the node refuses or drops the connection.
    pub fn connect(addr: SocketAddr, request: HandshakeRequest) -> Result<FakePeer, String> {
        let ours: ActorId = request.sender_actor_id.parse().unwrap();
        let mut stream = TcpStream::connect_timeout(&addr, SOCKET_TIMEOUT)
            .map_err(|e| format!("connect: {e}"))?;
        set_timeouts(&stream);
        stream
            .write_all(&InitialPacket::new_session(ours).encode())
            .map_err(|e| format!("initial packet: {e}"))?;
        let reply = read_initial(&mut stream)?;
        if reply != InitialPacket::empty_reply() {
            return Err(format!("initial reply of a new session: {reply:?}"));
        }
        stream
            .write_all(&ExBlock::new(request.encode()).encode())
            .map_err(|e| format!("sending the request: {e}"))?;
        let payload = read_exblock(&mut stream)?;
        let (reply, _) = HandshakeReply::decode(&payload).map_err(|e| format!("reply: {e}"))?;
        if let Some(why) = reply.error_explanation {
            return Err(format!("refused: {why}"));
        }
        let success = reply.success.ok_or("empty reply")?;
        let theirs: ActorId = success.sender_actor_id.parse().unwrap();
        Ok(FakePeer {
            stream,
            ours,
            theirs,
            mode: PacketChecksum::negotiated(success.use_xxhash),
            success: Some(success),
            request: None,
            inbuf: Vec::new(),
        })
    }

    /// Accepts the node's next connection on `listener` and reads its initial packet;
    /// fails if none comes within [`SOON`](super::SOON).
    pub fn accept_initial(listener: &TcpListener) -> (TcpStream, InitialPacket) {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + super::SOON;
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "the node did not connect");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        set_timeouts(&stream);
        let hello = read_initial(&mut stream).expect("the node's initial packet");
        (stream, hello)
    }

    /// The accepting side of a new session on `stream`, whose initial packet was `hello`:
    /// our session is `ours`; the node's request is kept, and answered as YDB does (XXH3
    /// if asked).
    pub fn accept_new(mut stream: TcpStream, hello: &InitialPacket, ours: ActorId) -> FakePeer {
        assert!(hello.peer_virtual_id.is_empty(), "a new session: {hello:?}");
        stream
            .write_all(&InitialPacket::empty_reply().encode())
            .unwrap();
        let payload = read_exblock(&mut stream).expect("the node's request");
        let (request, _) = HandshakeRequest::decode(&payload).unwrap();
        let success = HandshakeSuccess {
            protocol: HANDSHAKE_PROTOCOL,
            program_pid: PROGRAM.0,
            program_start_time: PROGRAM.1,
            serial: ours.local_id(),
            sender_actor_id: ours.to_string(),
            use_modern_frame: Some(true),
            use_extended_trace_fmt: Some(true),
            use_xxhash: request.request_xxhash,
            ..Default::default()
        };
        let reply = HandshakeReply {
            success: Some(success),
            ..Default::default()
        };
        stream
            .write_all(&ExBlock::new(reply.encode()).encode())
            .unwrap();
        FakePeer {
            stream,
            ours,
            theirs: hello.self_virtual_id,
            mode: PacketChecksum::negotiated(request.request_xxhash),
            success: None,
            request: Some(request),
            inbuf: Vec::new(),
        }
    }

    /// Sends a packet in the session's checksum mode.
    pub fn send(&mut self, p: &Packet) -> std::io::Result<()> {
        self.stream.write_all(&p.encode_with(self.mode).unwrap())
    }

    /// Reads the node's packets until `done` says so (it sees each), failing after
    /// `patience` or if the node closes the connection. A read waits at most the patience
    /// left (not the socket's timeout): a caller that pings between reads keeps pinging
    /// while the node has nothing to send.
    pub fn read_until(
        &mut self,
        patience: Duration,
        done: impl FnMut(&Seen) -> bool,
    ) -> Result<(), String> {
        let r = self.read_until_inner(patience, done);
        let _ = self.stream.set_read_timeout(Some(SOCKET_TIMEOUT));
        r
    }

    fn read_until_inner(
        &mut self,
        patience: Duration,
        mut done: impl FnMut(&Seen) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + patience;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            loop {
                match Packet::decode_with(&self.inbuf, self.mode) {
                    Ok((packet, n)) => {
                        self.inbuf.drain(..n);
                        let seen = Seen {
                            packet,
                            at: Instant::now(),
                        };
                        if done(&seen) {
                            return Ok(());
                        }
                    }
                    Err(WireError::Truncated { .. }) => break,
                    Err(e) => return Err(format!("the node sent a bad packet: {e}")),
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("gave up after {patience:?}"));
            }
            let left = (deadline - now).clamp(Duration::from_millis(1), SOCKET_TIMEOUT);
            let _ = self.stream.set_read_timeout(Some(left));
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("the node closed the connection".into()),
                Ok(n) => self.inbuf.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// Whether the node closes the connection within `patience` (whatever it sends first
    /// is read and dropped).
    pub fn closed_by_node(&mut self, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

/// The payload of one whole event on `channel`: its body in inline parts of at most
/// `part` bytes, then its descriptor.
pub fn event_payload(d: &EventDescriptor, channel: u16, body: &[u8], part: usize) -> Vec<u8> {
    let mut payload = Vec::new();
    for chunk in body.chunks(part.max(1)) {
        payload.extend(ChannelPart::inline(channel, chunk.to_vec()).encode());
    }
    payload.extend(ChannelPart::descriptor(channel, d).encode());
    payload
}

/// The events whose descriptors are in a data packet's payload: (descriptor, body bytes
/// of the same packet on its channel).
pub fn events_of(payload: &[u8]) -> Vec<EventDescriptor> {
    agentbox::interconnect::wire::parts(payload)
        .filter_map(Result::ok)
        .filter(|p| p.is_descriptor())
        .filter_map(|p| EventDescriptor::decode(p.bytes).ok().map(|(d, _)| d))
        .collect()
}
