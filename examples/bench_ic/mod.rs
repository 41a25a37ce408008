//! The interconnect's figures: events between two nodes of one process over loopback
//! (`ic_small_events`, `ic_large_events`), and the same framing over a plain socket pair
//! with nothing else (`raw_tcp_framed`, the limit).

pub mod rtt;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::wire::{EventDescriptor, Packet};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::{ActorId, Environment};
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 7);

/// A payload of bytes (its body is the bytes and a length varint).
#[derive(Serialize, Deserialize)]
struct Blob(#[serde(with = "serde_bytes_compat")] Vec<u8>);
impl Event for Blob {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Blob {
    type Codec = Serde;
}

/// The sink's acknowledgement of `n` events.
#[derive(Serialize, Deserialize)]
struct Ack(u64);
impl Event for Ack {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Ack {
    type Codec = Serde;
}

/// `Vec<u8>` as serde bytes (one length, then the bytes) without another crate.
mod serde_bytes_compat {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let b: &[u8] = Deserialize::deserialize(d)?;
        Ok(b.to_vec())
    }
}

type Elapsed = Arc<parking_lot::Mutex<Option<Duration>>>;

/// Sends `total` blobs of `size` bytes to the sink on node 2, at most `window` unacked.
struct Source {
    sink: ActorId,
    size: usize,
    total: u64,
    sent: u64,
    acked: u64,
    window: u64,
    batch: u64,
    started: Instant,
    elapsed: Elapsed,
}

impl Actor for Source {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::sending);
        self.started = Instant::now();
        self.fill(ctx);
    }
}

impl Source {
    fn fill(&mut self, ctx: &mut ActorContext<Self>) {
        while self.sent < self.total && self.sent - self.acked < self.window {
            ctx.send(self.sink, Blob(vec![7; self.size]));
            self.sent += 1;
        }
    }

    fn sending(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(Ack(n)) = ev.get::<Ack>() else {
            return ev.unhandled();
        };
        self.acked = *n;
        if self.acked == self.total {
            *self.elapsed.lock() = Some(self.started.elapsed());
            ctx.system().environment().stop();
        } else {
            self.fill(ctx);
        }
        let _ = self.batch;
        Handled::Yes
    }
}

/// Counts blobs (checking their size), acknowledges every `batch` and the last one.
struct Sink {
    size: usize,
    total: u64,
    got: u64,
    batch: u64,
}

impl Actor for Sink {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::counting);
    }
}

impl Sink {
    fn counting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(Blob(bytes)) = ev.get::<Blob>() else {
            return ev.unhandled();
        };
        assert_eq!(bytes.len(), self.size, "blob size");
        self.got += 1;
        if self.got.is_multiple_of(self.batch) || self.got == self.total {
            ctx.send(ev.sender(), Ack(self.got));
        }
        Handled::Yes
    }
}

/// Two nodes over loopback; node 1 streams `total` events of `size` bytes to node 2.
pub fn stream(total: u64, size: usize, window: u64, batch: u64) -> Duration {
    let elapsed = Elapsed::default();
    let e = elapsed.clone();
    Environment::launch(move |env| {
        let l1 = TcpListener::bind("127.0.0.1:0").expect("bind");
        let l2 = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = |l: &TcpListener| l.local_addr().expect("addr").port();
        let names = NameService::new()
            .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
            .node(2, NodeAddress::new("127.0.0.1", port(&l2)));
        let mut systems = Vec::new();
        for (id, l) in [(1, l1), (2, l2)] {
            let sys = ActorSystem::start(env, SystemSetup::new(id)).expect("system");
            let setup = InterconnectSetup::new(names.clone())
                .listener(l)
                .event::<Blob>()
                .event::<Ack>();
            Interconnect::start(&sys, setup).expect("interconnect");
            systems.push(sys);
        }
        let sink = systems[1]
            .register(Sink {
                size,
                total,
                got: 0,
                batch,
            })
            .expect("sink");
        systems[0]
            .register(Source {
                sink,
                size,
                total,
                sent: 0,
                acked: 0,
                window,
                batch,
                started: Instant::now(),
                elapsed: e,
            })
            .expect("source");
    })
    .expect("environment");
    let t = elapsed.lock().take().expect("the stream finished");
    t
}

/// The same framing over a plain socket pair: one thread writes packets of channel parts
/// (a `size`-byte body and an 80-byte descriptor per event, CRC32C per packet), another
/// reads them back, checks each packet's checksum and counts the descriptors.
pub fn raw_tcp_framed(total: u64, size: usize) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 512 << 10];
        let (mut start, mut end) = (0, 0);
        let mut events = 0u64;
        while events < total {
            if buf.len() - end < 128 << 10 {
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            let n = s.read(&mut buf[end..]).expect("read");
            assert!(n > 0, "the writer closed early");
            end += n;
            while end - start >= Packet::HEADER_LEN {
                let b = &buf[start..end];
                let len = u16::from_le_bytes([b[20], b[21]]) as usize;
                if b.len() < Packet::HEADER_LEN + len {
                    break;
                }
                let confirm = u64::from_le_bytes(b[0..8].try_into().expect("8"));
                let serial = u64::from_le_bytes(b[8..16].try_into().expect("8"));
                let sum = u32::from_le_bytes(b[16..20].try_into().expect("4"));
                let payload = &b[Packet::HEADER_LEN..Packet::HEADER_LEN + len];
                assert_eq!(Packet::checksum(confirm, serial, payload), sum, "checksum");
                let mut at = 0;
                while at < payload.len() {
                    let flags = u16::from_le_bytes([payload[at], payload[at + 1]]);
                    let n = u16::from_le_bytes([payload[at + 2], payload[at + 3]]) as usize;
                    if flags & 0x8000 != 0 {
                        events += 1;
                    }
                    at += 4 + n;
                }
                start += Packet::HEADER_LEN + len;
            }
        }
        events
    });
    let mut w = TcpStream::connect(addr).expect("connect");
    let _ = w.set_nodelay(true);
    let descriptor = EventDescriptor {
        event_type: Blob::EVENT_TYPE,
        recipient: ActorId::new(2, 1, 0),
        sender: ActorId::new(1, 1, 0),
        ..Default::default()
    }
    .encode();
    let body = vec![7u8; size];
    let start = Instant::now();
    let mut batch = Vec::with_capacity(300 << 10);
    let mut payload = Vec::with_capacity(Packet::SENDER_PAYLOAD);
    let mut serial = 0u64;
    let mut sent = 0u64;
    while sent < total {
        batch.clear();
        while batch.len() < 256 << 10 && sent < total {
            payload.clear();
            while sent < total && payload.len() + 8 + size + 80 <= Packet::SENDER_PAYLOAD {
                payload.extend_from_slice(&0u16.to_le_bytes());
                payload.extend_from_slice(&(size as u16).to_le_bytes());
                payload.extend_from_slice(&body);
                payload.extend_from_slice(&0x8000u16.to_le_bytes());
                payload.extend_from_slice(&80u16.to_le_bytes());
                payload.extend_from_slice(&descriptor);
                sent += 1;
            }
            serial += 1;
            let sum = Packet::checksum(0, serial, &payload);
            batch.extend_from_slice(&0u64.to_le_bytes());
            batch.extend_from_slice(&serial.to_le_bytes());
            batch.extend_from_slice(&sum.to_le_bytes());
            batch.extend_from_slice(&(payload.len() as u16).to_le_bytes());
            batch.extend_from_slice(&payload);
        }
        w.write_all(&batch).expect("write");
    }
    let events = reader.join().expect("reader");
    let t = start.elapsed();
    assert_eq!(events, total, "raw events");
    t
}
