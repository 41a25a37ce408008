//! Byte vectors of the interconnect wire codec, derived by hand from YDB_WIRE.md (§2) with
//! an independent bitwise CRC-32C, so that the codec is checked against the specification
//! and not against itself.

#![cfg(feature = "interconnect")]

use agentbox::interconnect::wire::{
    crc32c, ChannelPart, EventDescriptor, ExBlock, HandshakeReply, HandshakeRequest,
    HandshakeSuccess, InitialPacket, Packet, PacketKind, WireError,
};
use agentbox::ActorId;

#[test]
fn crc32c_check_value() {
    // The standard CRC-32C check value, which YDB_WIRE.md §2.1 gives for YDB's Crc32c.
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c(b"abc"), 0x364B_3FB7);
}

/// §2.2: a resume packet from node 1 to node 2, last serial received 5, version 2.
#[test]
fn initial_packet_52_bytes() {
    let packet = InitialPacket {
        self_virtual_id: ActorId::new(1, 0x0102_0304_0506_0708, 0),
        peer_virtual_id: ActorId::new(2, 0x1112_1314_1516_1718, 0x21),
        next_packet: 5,
        version: 2,
    };
    #[rustfmt::skip]
    let expected: [u8; 52] = [
        // SelfVirtualId: x1 = local id, x2 = node 1 << 32 | hint 0
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        // PeerVirtualId: x2 = node 2 << 32 | hint 0x21
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
        0x21, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
        // NextPacket = 5
        0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        // Version = 2
        0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        // CRC32C of bytes 0..48 = 0x00CA025C
        0x5C, 0x02, 0xCA, 0x00,
    ];
    assert_eq!(packet.encode(), expected);
    assert_eq!(InitialPacket::decode(&expected), Ok((packet, 52)));
}

#[test]
fn initial_packet_of_a_new_session() {
    let bytes = InitialPacket::new_session(ActorId::new(1, 0x5EED, 0)).encode();
    assert_eq!(&bytes[16..40], &[0; 24]); // no peer, NextPacket 0
    assert_eq!(&bytes[40..48], &2u64.to_le_bytes());
    assert_eq!(&bytes[48..], &0x1A2B_FCA9u32.to_le_bytes());
}

/// §2.3: the checksum covers the size field and the data, not itself.
#[test]
fn ex_block_bytes() {
    let block = ExBlock::new(vec![0x08, 0x02]);
    let expected = [0x06, 0x6F, 0x89, 0xF0, 0x02, 0x00, 0x00, 0x00, 0x08, 0x02];
    assert_eq!(block.encode(), expected);
    assert_eq!(ExBlock::decode(&expected), Ok((block, 10)));
}

/// §2.4: the 22-byte header; the checksum is CRC32C of the header with bytes 16..20 zeroed,
/// then the payload.
#[test]
fn packet_header_bytes() {
    let packet = Packet::data(3, 7, b"parts".to_vec());
    #[rustfmt::skip]
    let expected = [
        0x03, 0, 0, 0, 0, 0, 0, 0,  // Confirm = 3
        0x07, 0, 0, 0, 0, 0, 0, 0,  // Serial = 7
        0x3E, 0xE4, 0x7A, 0x60,     // Checksum = 0x607AE43E
        0x05, 0x00,                 // PayloadLength = 5
        b'p', b'a', b'r', b't', b's',
    ];
    assert_eq!(packet.encode(), expected);
    assert_eq!(Packet::decode(&expected), Ok((packet, 27)));
}

#[test]
fn aux_packet_bytes() {
    #[rustfmt::skip]
    let confirm = [
        0x09, 0, 0, 0, 0, 0, 0, 0,  // Confirm = 9
        0, 0, 0, 0, 0, 0, 0, 0,     // Serial = 0: pure confirm
        0xD3, 0x00, 0x12, 0x85,     // Checksum = 0x851200D3
        0x00, 0x00,
    ];
    assert_eq!(Packet::pure_confirm(9).encode(), confirm);
    assert_eq!(
        Packet::decode(&confirm).unwrap().0.kind(),
        PacketKind::Confirm
    );

    #[rustfmt::skip]
    let ping = [
        0x01, 0, 0, 0, 0, 0, 0, 0,
        0x34, 0x12, 0, 0, 0, 0, 0, 0x80, // Serial = 0x1234 | PingRequestMask
        0xFA, 0xD3, 0x30, 0x5A,          // Checksum = 0x5A30D3FA
        0x00, 0x00,
    ];
    assert_eq!(Packet::ping_request(1, 0x1234).encode(), ping);
    let (decoded, _) = Packet::decode(&ping).unwrap();
    assert_eq!(decoded.kind(), PacketKind::PingRequest { stamp: 0x1234 });

    let pong = Packet::ping_response(1, 0x1234).encode();
    assert_eq!(&pong[8..16], &[0x34, 0x12, 0, 0, 0, 0, 0, 0x40]);
    let clock = Packet::clock(1, 0x1234).encode();
    assert_eq!(&clock[8..16], &[0x34, 0x12, 0, 0, 0, 0, 0, 0x20]);
}

/// §2.5: channel & 0x0FFF, 0x8000 descriptor, 0x4000 XDC, then the u16 size.
#[test]
fn channel_part_heads() {
    assert_eq!(
        ChannelPart::inline(0x0123, b"hello".to_vec()).encode(),
        [0x23, 0x01, 0x05, 0x00, b'h', b'e', b'l', b'l', b'o']
    );
    let descriptor = ChannelPart::descriptor(0x0FFF, &EventDescriptor::default()).encode();
    assert_eq!(&descriptor[..4], &[0xFF, 0x8F, 0x50, 0x00]);
    assert_eq!(descriptor.len(), 84);
    let xdc = ChannelPart {
        channel: 2,
        flags: ChannelPart::XDC,
        bytes: vec![0xAA],
    };
    assert_eq!(xdc.encode(), [0x02, 0x40, 0x01, 0x00, 0xAA]);
    let (part, used) = ChannelPart::decode(&[0x02, 0x40, 0x01, 0x00, 0xAA, 0xFF]).unwrap();
    assert_eq!((part, used), (xdc, 5));
    assert_eq!(
        ChannelPart::decode(&[0x00, 0x80, 0x54, 0x00]),
        Err(WireError::BadDescriptorSize { size: 84 })
    );
}

/// §2.6, field by field.
#[test]
fn event_descriptor_80_bytes() {
    let mut trace_id = [0u8; 28];
    trace_id[0] = 0x11; // TraceId word 1
    trace_id[16] = 0x22; // SpanId
    trace_id[24] = 0x3F; // verbosity 15, time to live 3 (bits 4..16)
    let descriptor = EventDescriptor {
        event_type: 0x0001_0006,
        flags: 0x0030_0001, // TrackDelivery, channel 3
        recipient: ActorId::new(2, 0x0A0B, 0x0C),
        sender: ActorId::new(1, 0x0D0E, 0x0F),
        cookie: 0x0102_0304_0506_0708,
        trace_id,
        payload_checksum: crc32c(b"hello"),
    };
    #[rustfmt::skip]
    let expected: [u8; 80] = [
        0x06, 0x00, 0x01, 0x00,                         // 0: Type
        0x01, 0x00, 0x30, 0x00,                         // 4: Flags
        0x0B, 0x0A, 0, 0, 0, 0, 0, 0,                   // 8: Recipient x1
        0x0C, 0, 0, 0, 0x02, 0, 0, 0,                   // 16: Recipient x2
        0x0E, 0x0D, 0, 0, 0, 0, 0, 0,                   // 24: Sender x1
        0x0F, 0, 0, 0, 0x01, 0, 0, 0,                   // 32: Sender x2
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // 40: Cookie
        0x11, 0, 0, 0, 0, 0, 0, 0,                      // 48: TraceId
        0, 0, 0, 0, 0, 0, 0, 0,
        0x22, 0, 0, 0, 0, 0, 0, 0,                      // 64: SpanId
        0x3F, 0, 0, 0,                                  // 72: verbosity, TTL
        0x4C, 0xBB, 0x71, 0x9A,                         // 76: CRC32C("hello")
    ];
    assert_eq!(descriptor.encode(), expected);
    assert_eq!(EventDescriptor::decode(&expected), Ok((descriptor, 80)));
    assert_eq!(descriptor.verify_body(b"hello"), Ok(()));
    assert_eq!(descriptor.channel(), 3);
}

/// §1: proto2 field numbers and presence; a minimal request of a peer without TLS/XDC/XXH3.
#[test]
fn handshake_request_bytes() {
    let request = HandshakeRequest {
        protocol: 2,
        program_pid: 1,
        program_start_time: 2,
        serial: 3,
        receiver_node_id: 2,
        sender_actor_id: "[1:3:0]".into(),
        receiver_host_name: Some("h2".into()),
        request_modern_frame: Some(true),
        request_extended_trace_fmt: Some(true),
        request_xxhash: Some(false),
        ..Default::default()
    };
    #[rustfmt::skip]
    let expected = [
        0x08, 0x02, 0x10, 0x01, 0x18, 0x02, 0x20, 0x03, 0x28, 0x02, // fields 1..5
        0x32, 0x07, b'[', b'1', b':', b'3', b':', b'0', b']',      // 6 SenderActorId
        0x42, 0x02, b'h', b'2',                                    // 8 ReceiverHostName
        0x90, 0x01, 0x01,                                          // 18 = true
        0xA0, 0x01, 0x01,                                          // 20 = true
        0xC0, 0x01, 0x00,                                          // 24 = false, present
    ];
    assert_eq!(request.encode(), expected);
    assert_eq!(
        HandshakeRequest::decode(&expected),
        Ok((request, expected.len()))
    );
}

#[test]
fn handshake_reply_bytes() {
    let reply = HandshakeReply {
        success: Some(HandshakeSuccess {
            protocol: 2,
            program_pid: 1,
            program_start_time: 2,
            serial: 3,
            sender_actor_id: "[2:3:0]".into(),
            use_modern_frame: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    #[rustfmt::skip]
    let expected = [
        0x0A, 19,                                                  // 1 Success, 19 bytes
        0x08, 0x02, 0x10, 0x01, 0x18, 0x02, 0x20, 0x03,
        0x2A, 0x07, b'[', b'2', b':', b'3', b':', b'0', b']',      // 5 SenderActorId
        0x58, 0x01,                                                // 11 UseModernFrame
    ];
    assert_eq!(reply.encode(), expected);
    assert_eq!(
        HandshakeReply::decode(&expected),
        Ok((reply, expected.len()))
    );

    let refusal = HandshakeReply {
        error_explanation: Some("no".into()),
        ..Default::default()
    };
    assert_eq!(refusal.encode(), [0x12, 0x02, b'n', b'o']);
}
