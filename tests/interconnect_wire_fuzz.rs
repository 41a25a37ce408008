//! The wire codec's decoders on a fixed number of random and mutated inputs: no panic, and
//! successful decodes re-encode to what they consumed (the property of
//! `tests/fuzz/check.rs`, shared with the cargo-fuzz target of `tests/fuzz/`).
//!
//! Inputs are mutations of valid encodings of every frame (bit flips, byte overwrites,
//! truncations, extensions, splices, length-field edits), half of them re-signed with a
//! correct checksum so that decoding gets past the checksum and into the fields, plus plain
//! random bytes. The PRNG is seeded, so a failure reproduces; `WIRE_FUZZ_SEED` and
//! `WIRE_FUZZ_ITERATIONS` override the defaults.

#![cfg(feature = "interconnect")]

#[path = "fuzz/check.rs"]
mod check;

use agentbox::interconnect::wire::{
    crc32c, ChannelPart, ClusterUuids, EventDescriptor, ExBlock, HandshakeReply, HandshakeRequest,
    HandshakeSuccess, InitialPacket, KeyValuePair, Packet, ScopeId, SuccessRdma, XdcParams,
};
use agentbox::ActorId;

const ITERATIONS: u64 = 20_000;

#[path = "fuzz/rng.rs"]
mod rng;
use rng::Rng;

/// Which frame a seed is, to re-sign its mutations.
#[derive(Clone, Copy)]
enum Frame {
    Initial,
    ExBlock,
    Packet,
    Other,
}

fn seeds() -> Vec<(Frame, Vec<u8>)> {
    let descriptor = EventDescriptor {
        event_type: 0x1000_0001,
        flags: 0x0010_0021,
        recipient: ActorId::new(2, 77, 1),
        sender: ActorId::service(1, b"svc").unwrap(),
        cookie: 9,
        trace_id: [0x5A; 28],
        payload_checksum: crc32c(b"body"),
    };
    let mut payload = ChannelPart::inline(1, b"body".to_vec()).encode();
    payload.extend(ChannelPart::inline(2, vec![0; 40]).encode());
    payload.extend(ChannelPart::descriptor(1, &descriptor).encode());
    payload.extend(
        ChannelPart {
            channel: 3,
            flags: ChannelPart::XDC,
            bytes: vec![1, 2, 3],
        }
        .encode(),
    );

    let request = HandshakeRequest {
        protocol: 2,
        program_pid: 1234,
        program_start_time: 99,
        serial: 0xABCD,
        receiver_node_id: 2,
        sender_actor_id: "[1:43981:0]".into(),
        sender_host_name: Some("node-1".into()),
        receiver_host_name: Some("node-2".into()),
        cluster_uuids: Some(ClusterUuids {
            cluster_uuid: Some("c1".into()),
            accept_uuid: vec!["c1".into(), "c2".into()],
        }),
        client_scope_id: Some(ScopeId {
            x1: Some(1),
            x2: Some(2),
        }),
        request_modern_frame: Some(true),
        request_extended_trace_fmt: Some(true),
        request_xxhash: Some(false),
        handshake_id: Some(vec![7; 32]),
        params: vec![KeyValuePair {
            key: Some("proof".into()),
            value: Some(vec![0xEE; 16]),
        }],
        ..Default::default()
    };
    let success = HandshakeSuccess {
        protocol: 2,
        program_pid: 1,
        program_start_time: 2,
        serial: 3,
        sender_actor_id: "[2:3:0]".into(),
        use_modern_frame: Some(true),
        use_extended_trace_fmt: Some(true),
        use_xxhash: Some(false),
        rdma: Some(SuccessRdma::RdmaErr("not ready".into())),
        ..Default::default()
    };
    let reply = HandshakeReply {
        success: Some(success.clone()),
        params: vec![KeyValuePair::default()],
        ..Default::default()
    };

    let mut seeds = vec![
        (
            Frame::Initial,
            InitialPacket::resume(ActorId::new(1, 5, 0), ActorId::new(2, 6, 0), 17).encode(),
        ),
        (Frame::Initial, InitialPacket::empty_reply().encode()),
        (Frame::ExBlock, ExBlock::new(request.encode()).encode()),
        (Frame::ExBlock, ExBlock::new(reply.encode()).encode()),
        (Frame::ExBlock, ExBlock::new(vec![]).encode()),
        (Frame::Packet, Packet::data(4, 5, payload.clone()).encode()),
        (Frame::Packet, Packet::pure_confirm(3).encode()),
        (Frame::Packet, Packet::ping_request(3, 0x1234).encode()),
        (Frame::Packet, Packet::clock(3, 1_700_000_000).encode()),
        (Frame::Other, payload),
        (Frame::Other, descriptor.encode()),
        (Frame::Other, request.encode()),
        (Frame::Other, reply.encode()),
        (Frame::Other, success.encode()),
        (
            Frame::Other,
            XdcParams {
                handshake_id: Some(vec![1; 32]),
            }
            .encode(),
        ),
    ];
    seeds.push((Frame::Other, Vec::new()));
    seeds
}

/// Writes a correct checksum into a mutated frame, where its header allows.
fn resign(frame: Frame, bytes: &mut [u8]) {
    match frame {
        Frame::Initial if bytes.len() >= InitialPacket::LEN => {
            let crc = crc32c(&bytes[..48]);
            bytes[48..52].copy_from_slice(&crc.to_le_bytes());
        }
        Frame::ExBlock if bytes.len() >= ExBlock::HEADER_LEN => {
            let size = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
            if let Some(end) = size.checked_add(8).filter(|&end| end <= bytes.len()) {
                let crc = crc32c(&bytes[4..end]);
                bytes[..4].copy_from_slice(&crc.to_le_bytes());
            }
        }
        Frame::Packet if bytes.len() >= Packet::HEADER_LEN => {
            let end = Packet::HEADER_LEN + usize::from(u16::from_le_bytes([bytes[20], bytes[21]]));
            if end <= bytes.len() {
                bytes[16..20].fill(0);
                let crc = crc32c(&bytes[..end]);
                bytes[16..20].copy_from_slice(&crc.to_le_bytes());
            }
        }
        _ => {}
    }
}

fn mutate(rng: &mut Rng, seeds: &[(Frame, Vec<u8>)]) -> Vec<u8> {
    let (frame, seed) = &seeds[rng.below(seeds.len())];
    let mut bytes = seed.clone();
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            // Bit flip.
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            // Overwrite a byte with an interesting value.
            1 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] = [0x00, 0x01, 0x7F, 0x80, 0xFF, rng.byte()][rng.below(6)];
            }
            // Truncate.
            2 if !bytes.is_empty() => {
                let n = rng.below(bytes.len());
                bytes.truncate(n);
            }
            // Extend with random bytes.
            3 => {
                let n = 1 + rng.below(32);
                let more = rng.bytes(n);
                bytes.extend(more);
            }
            // Splice in the start of another seed.
            4 => {
                let (_, other) = &seeds[rng.below(seeds.len())];
                let at = rng.below(bytes.len() + 1);
                let n = rng.below(other.len() + 1);
                bytes.splice(at..at, other[..n].iter().copied());
            }
            // Edit a length field: ExBlock size, packet payload length, part size.
            5 => {
                let at = [4usize, 20, 2][rng.below(3)];
                if bytes.len() >= at + 2 {
                    let v = [0u16, 1, 80, 0x7FFF, 0xFFFF, rng.next() as u16][rng.below(6)];
                    bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
            // Delete a range.
            _ if !bytes.is_empty() => {
                let at = rng.below(bytes.len());
                let n = 1 + rng.below(bytes.len() - at);
                bytes.drain(at..at + n);
            }
            _ => {}
        }
    }
    if rng.below(2) == 0 {
        resign(*frame, &mut bytes);
    }
    bytes
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn every_decoder_survives_random_and_mutated_input() {
    let seed = env_u64("WIRE_FUZZ_SEED").unwrap_or(0x1CE_C0DE);
    let iterations = env_u64("WIRE_FUZZ_ITERATIONS").unwrap_or(ITERATIONS);
    let seeds = seeds();
    let mut rng = Rng(seed);
    let mut accepted = [0u64; check::DECODERS.len()];

    // The valid encodings themselves pass.
    for (_, bytes) in &seeds {
        check::check(bytes);
    }
    for i in 0..iterations {
        let input = if rng.below(4) == 0 {
            let n = rng.below(160);
            rng.bytes(n)
        } else {
            mutate(&mut rng, &seeds)
        };
        let result = std::panic::catch_unwind(|| check::check(&input));
        match result {
            Ok(ok) => {
                for (count, ok) in accepted.iter_mut().zip(ok) {
                    *count += u64::from(ok);
                }
            }
            Err(_) => panic!(
                "iteration {i} (WIRE_FUZZ_SEED={seed}) broke the property on {} bytes: {input:02x?}",
                input.len()
            ),
        }
    }

    eprintln!(
        "accepted per decoder: {:?}",
        check::DECODERS.iter().zip(accepted).collect::<Vec<_>>()
    );
    // The mutations must reach past the checks into successful decodes of every decoder,
    // or the test would only exercise the error paths.
    if iterations >= ITERATIONS {
        for (name, count) in check::DECODERS.iter().zip(accepted) {
            assert!(
                count > 0,
                "no mutated input decoded as {name}: {accepted:?}"
            );
        }
    }
}
