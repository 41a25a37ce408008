//! Unit tests of the binary frames: layouts, round trips and every error variant. The
//! handshake protobufs are tested in `tests_handshake.rs`, the byte vectors derived from
//! YDB_WIRE.md in `tests/interconnect_wire.rs`.

use super::*;
use crate::ActorId;

/// A bitwise CRC-32C, independent of the `crc32c` crate, to cross-check it.
fn crc32c_reference(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

mod crc {
    use super::*;

    #[test]
    fn check_values_of_ydb() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        // YDB's crc32c_ut: Crc32c("abc") and Crc32cExtend(1, "abc").
        assert_eq!(crc32c(b"abc"), 910_901_175);
        assert_eq!(crc32c_extend(1, b"abc"), 2_466_950_601);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn extend_is_crc_of_the_concatenation() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for split in [0, 1, 7, 500, 999, 1000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_extend(crc32c(a), b), crc32c(&data));
        }
        assert_eq!(crc32c_extend(0, &data), crc32c(&data));
    }

    #[test]
    fn crate_agrees_with_the_bitwise_reference() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 31 + i / 7) as u8).collect();
        for len in [0, 1, 3, 8, 15, 16, 17, 63, 64, 65, 1000, 4096] {
            assert_eq!(
                crc32c(&data[..len]),
                crc32c_reference(&data[..len]),
                "len {len}"
            );
        }
    }
}

mod initial {
    use super::*;

    #[test]
    fn round_trip_and_trailing_bytes_left_alone() {
        let p = InitialPacket::resume(ActorId::new(1, 2, 3), ActorId::new(4, 5, 6), 77);
        let mut bytes = p.encode();
        assert_eq!(bytes.len(), InitialPacket::LEN);
        bytes.extend_from_slice(b"next frame");
        assert_eq!(InitialPacket::decode(&bytes), Ok((p, 52)));
    }

    #[test]
    fn checksum_covers_bytes_0_to_48() {
        let bytes = InitialPacket::new_session(ActorId::new(9, 9, 9)).encode();
        assert_eq!(&bytes[48..], &crc32c(&bytes[..48]).to_le_bytes());
        for i in 0..52 {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                matches!(
                    InitialPacket::decode(&bad),
                    Err(WireError::BadChecksum { .. })
                ),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn errors() {
        let good = InitialPacket::empty_reply().encode();
        assert_eq!(
            InitialPacket::decode(&good[..51]),
            Err(WireError::Truncated { need: 52, have: 51 })
        );
        let mut bad = good.clone();
        bad[0] = 1;
        assert_eq!(
            InitialPacket::decode(&bad),
            Err(WireError::BadChecksum {
                expected: crc32c(&good[..48]),
                actual: crc32c(&bad[..48]),
            })
        );
        for version in [0, 1, 5, u64::MAX] {
            let p = InitialPacket {
                version,
                ..InitialPacket::empty_reply()
            };
            assert_eq!(
                InitialPacket::decode(&p.encode()),
                Err(WireError::BadVersion { version })
            );
        }
        for version in [2, 3, 4] {
            let p = InitialPacket {
                version,
                ..InitialPacket::empty_reply()
            };
            assert_eq!(InitialPacket::decode(&p.encode()), Ok((p, 52)));
        }
    }

    #[test]
    fn constructors() {
        let me = ActorId::new(1, 10, 0);
        let peer = ActorId::new(2, 20, 0);
        let fresh = InitialPacket::new_session(me);
        assert_eq!(
            (fresh.peer_virtual_id, fresh.next_packet, fresh.version),
            (ActorId::EMPTY, 0, 2)
        );
        let resume = InitialPacket::resume(me, peer, 5);
        assert_eq!((resume.peer_virtual_id, resume.next_packet), (peer, 5));
        assert_eq!(InitialPacket::empty_reply().encode()[..40], [0; 40][..]);
        assert_eq!(InitialPacket::empty_reply().encode()[40], 2);
    }
}

mod exblock {
    use super::*;

    #[test]
    fn round_trips_empty_and_largest() {
        for payload in [vec![], vec![1, 2, 3], vec![0xAB; ExBlock::MAX_SIZE]] {
            let block = ExBlock::new(payload);
            let bytes = block.encode();
            assert_eq!(&bytes[4..8], &(block.payload.len() as u32).to_le_bytes());
            assert_eq!(&bytes[..4], &crc32c(&bytes[4..]).to_le_bytes());
            assert_eq!(ExBlock::decode(&bytes), Ok((block, bytes.len())));
        }
    }

    #[test]
    fn errors() {
        let good = ExBlock::new(vec![7; 10]).encode();
        assert_eq!(
            ExBlock::decode(&good[..3]),
            Err(WireError::Truncated { need: 8, have: 3 })
        );
        assert_eq!(
            ExBlock::decode(&good[..17]),
            Err(WireError::Truncated { need: 18, have: 17 })
        );
        let mut bad = good.clone();
        bad[17] ^= 1;
        assert!(matches!(
            ExBlock::decode(&bad),
            Err(WireError::BadChecksum { .. })
        ));
        // The checksum field itself is not covered: changing it only changes `expected`.
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert_eq!(
            ExBlock::decode(&bad),
            Err(WireError::BadChecksum {
                expected: crc32c(&good[4..]) ^ 1,
                actual: crc32c(&good[4..]),
            })
        );
        // An oversized size is refused from the header alone.
        let mut huge = vec![0; 8];
        huge[4..8].copy_from_slice(&(ExBlock::MAX_SIZE as u32 + 1).to_le_bytes());
        assert_eq!(
            ExBlock::decode(&huge),
            Err(WireError::TooLarge {
                size: ExBlock::MAX_SIZE + 1,
                max: ExBlock::MAX_SIZE
            })
        );
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            ExBlock::decode(&huge),
            Err(WireError::TooLarge { .. })
        ));
        assert_eq!(
            ExBlock::new(vec![0; ExBlock::MAX_SIZE + 1]).try_encode(),
            Err(WireError::TooLarge {
                size: ExBlock::MAX_SIZE + 1,
                max: ExBlock::MAX_SIZE
            })
        );
    }

    #[test]
    #[should_panic(expected = "ExBlock::encode")]
    fn encode_panics_when_oversized() {
        let _ = ExBlock::new(vec![0; ExBlock::MAX_SIZE + 1]).encode();
    }
}

mod packet {
    use super::*;

    #[test]
    fn header_layout_and_checksum() {
        let p = Packet::data(
            0x0102_0304_0506_0708,
            0x1112_1314_1516_1718,
            vec![0xEE; 300],
        );
        let bytes = p.encode();
        assert_eq!(bytes.len(), 22 + 300);
        assert_eq!(&bytes[0..8], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[8..16], &0x1112_1314_1516_1718u64.to_le_bytes());
        assert_eq!(&bytes[20..22], &300u16.to_le_bytes());
        let mut zeroed = bytes.clone();
        zeroed[16..20].fill(0);
        assert_eq!(&bytes[16..20], &crc32c(&zeroed).to_le_bytes());
        assert_eq!(
            Packet::checksum(p.confirm, p.serial, &p.payload),
            crc32c(&zeroed)
        );
        assert_eq!(Packet::decode(&bytes), Ok((p, 322)));
    }

    /// Small packets are hashed in one go, larger ones by the streaming hasher: the same
    /// digest of the same bytes on both sides of the cut and of XXH3's own size classes.
    #[test]
    fn xxh3_in_one_go_and_streamed_agree_at_every_size() {
        use std::hash::Hasher as _;
        let payload: Vec<u8> = (0..1100u32).map(|i| (i * 13 + 5) as u8).collect();
        for len in 0..=payload.len() {
            let p = &payload[..len];
            let mut h = twox_hash::XxHash3_64::new();
            let mut header = Vec::new();
            header.extend_from_slice(&9u64.to_le_bytes());
            header.extend_from_slice(&10u64.to_le_bytes());
            header.extend_from_slice(&0u32.to_le_bytes());
            header.extend_from_slice(&(len as u16).to_le_bytes());
            h.write(&header);
            h.write(p);
            assert_eq!(
                PacketChecksum::Xxh3.compute(9, 10, p),
                h.finish() as u32,
                "{len}"
            );
        }
    }

    /// XXH3 vectors computed independently, with the reference C library (libxxhash 0.8.1,
    /// `XXH3_64bits`) over the 22 header bytes with the checksum zeroed, then the payload.
    #[test]
    fn xxh3_checksums_match_the_reference_library() {
        // The published XXH3-64 of empty input, for the hasher itself.
        use std::hash::Hasher as _;
        let empty = twox_hash::XxHash3_64::new();
        assert_eq!(empty.finish(), 0x2D06_8005_38D3_94C2);
        // A data packet: XXH3-64 = 0xC773EE2BE05D3161, its low half goes on the wire.
        assert_eq!(PacketChecksum::Xxh3.compute(3, 7, b"parts"), 0xE05D_3161);
        // A ping request (no payload): 0x96949CA36BF634D1.
        let ping = Packet::ping_request(0, 12345);
        assert_eq!(
            PacketChecksum::Xxh3.compute(0, ping.serial, &[]),
            0x6BF6_34D1
        );
        // 1000 payload bytes (XXH3's long-input path): 0x11BDAA04F2F6FA95.
        let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 1) as u8).collect();
        assert_eq!(PacketChecksum::Xxh3.compute(41, 42, &payload), 0xF2F6_FA95);
        let p = Packet::data(41, 42, payload);
        let bytes = p.encode_with(PacketChecksum::Xxh3).unwrap();
        assert_eq!(&bytes[16..20], &0xF2F6_FA95u32.to_le_bytes());
        assert_eq!(
            Packet::decode_with(&bytes, PacketChecksum::Xxh3),
            Ok((p, 1022))
        );
        assert!(matches!(
            Packet::decode(&bytes),
            Err(WireError::BadChecksum { .. })
        ));
        assert_eq!(PacketChecksum::negotiated(Some(true)), PacketChecksum::Xxh3);
        for off in [None, Some(false)] {
            assert_eq!(PacketChecksum::negotiated(off), PacketChecksum::Crc32c);
        }
    }

    /// YDB's rule under TLS: the field is 0 and a receiver checks nothing.
    #[test]
    fn under_tls_the_checksum_field_is_zero_and_not_checked() {
        let p = Packet::data(3, 7, b"parts".to_vec());
        let bytes = p.encode_with(PacketChecksum::Tls).unwrap();
        assert_eq!(&bytes[16..20], &[0; 4]);
        assert_eq!(
            Packet::decode_with(&bytes, PacketChecksum::Tls),
            Ok((p.clone(), bytes.len()))
        );
        let crc = p.encode();
        assert_eq!(
            Packet::decode_with(&crc, PacketChecksum::Tls),
            Ok((p, crc.len()))
        );
        assert!(Packet::decode(&bytes).is_err());
    }

    #[test]
    fn every_bit_is_covered() {
        let bytes = Packet::data(5, 6, b"xyz".to_vec()).encode();
        for i in 0..bytes.len() {
            if i == 20 || i == 21 {
                continue; // the length: a flip there truncates or lengthens instead
            }
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                matches!(Packet::decode(&bad), Err(WireError::BadChecksum { .. })),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn aux_packets() {
        let confirm = Packet::pure_confirm(12);
        assert_eq!((confirm.serial, confirm.kind()), (0, PacketKind::Confirm));
        let ping = Packet::ping_request(1, 0xABCD);
        assert_eq!(ping.serial, 0x8000_0000_0000_ABCD);
        assert_eq!(ping.kind(), PacketKind::PingRequest { stamp: 0xABCD });
        let pong = Packet::ping_response(1, 0xABCD);
        assert_eq!(pong.serial, 0x4000_0000_0000_ABCD);
        assert_eq!(pong.kind(), PacketKind::PingResponse { stamp: 0xABCD });
        // The answer to a request never carries bit 63, whatever the stamp given.
        assert_eq!(Packet::ping_response(1, ping.serial).serial, pong.serial);
        let clock = Packet::clock(1, 1_700_000_000_000_000);
        assert_eq!(clock.serial, 1_700_000_000_000_000 | 1 << 61);
        assert_eq!(
            clock.kind(),
            PacketKind::Clock {
                unix_micros: 1_700_000_000_000_000
            }
        );
        for p in [confirm, ping, pong, clock] {
            assert!(!p.is_data());
            let bytes = p.encode();
            assert_eq!(bytes.len(), 22);
            assert_eq!(Packet::decode(&bytes), Ok((p, 22)));
        }
    }

    #[test]
    fn kind_tests_bits_in_ydb_order() {
        let empty = |serial| Packet::data(0, serial, vec![]).kind();
        assert_eq!(
            empty(u64::MAX),
            PacketKind::PingRequest {
                stamp: u64::MAX >> 1
            }
        );
        assert_eq!(
            empty(0x6000_0000_0000_0001),
            PacketKind::PingResponse {
                stamp: 0x2000_0000_0000_0001
            }
        );
        assert_eq!(empty(42), PacketKind::Confirm);
        // A payload makes a data packet, whatever the serial's bits.
        assert_eq!(
            Packet::data(0, 1 << 63, vec![1]).kind(),
            PacketKind::Data { serial: 1 << 63 }
        );
    }

    #[test]
    fn errors() {
        let good = Packet::data(1, 2, vec![9; 50]).encode();
        assert_eq!(
            Packet::decode(&good[..21]),
            Err(WireError::Truncated { need: 22, have: 21 })
        );
        assert_eq!(
            Packet::decode(&good[..22]),
            Err(WireError::Truncated { need: 72, have: 22 })
        );
        assert_eq!(
            Packet::data(0, 1, vec![0; 65_536]).try_encode(),
            Err(WireError::TooLarge {
                size: 65_536,
                max: 65_535
            })
        );
        let largest = Packet::data(0, 1, vec![3; 65_535]);
        assert_eq!(
            Packet::decode(&largest.encode()),
            Ok((largest.clone(), 22 + 65_535))
        );
        assert_eq!(Packet::SENDER_PAYLOAD, 8074);
    }

    #[test]
    #[should_panic(expected = "Packet::encode")]
    fn encode_panics_when_oversized() {
        let _ = Packet::data(0, 1, vec![0; 65_536]).encode();
    }
}

mod channel_parts {
    use super::*;

    #[test]
    fn head_layout() {
        let inline = ChannelPart::inline(0x0ABC, vec![1, 2, 3]);
        assert_eq!(inline.encode(), [0xBC, 0x0A, 3, 0, 1, 2, 3]);
        let xdc = ChannelPart {
            channel: 0x0FFF,
            flags: ChannelPart::XDC,
            bytes: vec![],
        };
        assert_eq!(xdc.encode(), [0xFF, 0x4F, 0, 0]);
        let d = ChannelPart::descriptor(1, &EventDescriptor::default());
        assert_eq!(&d.encode()[..4], &[0x01, 0x80, 80, 0]);
        assert!(d.is_descriptor() && !d.is_xdc());
        assert!(xdc.is_xdc() && !xdc.is_descriptor());
        for p in [inline, xdc, d] {
            let bytes = p.encode();
            assert_eq!(ChannelPart::decode(&bytes), Ok((p, bytes.len())));
        }
    }

    #[test]
    fn head_splits_channel_and_flags() {
        // Bits 12 and 13 mean nothing and are kept as they came.
        let bytes = [0x34, 0x32, 1, 0, 0xAA];
        let (part, used) = ChannelPart::decode(&bytes).unwrap();
        assert_eq!((part.channel, part.flags, used), (0x0234, 0x3000, 5));
        assert_eq!(part.encode(), bytes);
    }

    #[test]
    fn parts_of_a_payload() {
        let descr = EventDescriptor {
            event_type: 5,
            ..Default::default()
        };
        let list = [
            ChannelPart::inline(1, b"ab".to_vec()),
            ChannelPart::inline(2, b"cd".to_vec()),
            ChannelPart::descriptor(1, &descr),
            ChannelPart::descriptor(2, &descr),
        ];
        let payload: Vec<u8> = list.iter().flat_map(|p| p.encode()).collect();
        let got: Vec<ChannelPart> = parts(&payload).map(|p| p.unwrap().to_part()).collect();
        assert_eq!(got, list);
        assert_eq!(parts(&[]).count(), 0);
    }

    #[test]
    fn errors() {
        assert_eq!(
            ChannelPart::decode(&[1, 0, 5]),
            Err(WireError::Truncated { need: 4, have: 3 })
        );
        assert_eq!(
            ChannelPart::decode(&[1, 0, 5, 0, 1]),
            Err(WireError::Truncated { need: 9, have: 5 })
        );
        for size in [0u16, 79, 81, 84, u16::MAX] {
            let mut bytes = vec![0x00, 0x80];
            bytes.extend_from_slice(&size.to_le_bytes());
            bytes.resize(4 + usize::from(size), 0);
            assert_eq!(
                ChannelPart::decode(&bytes),
                Err(WireError::BadDescriptorSize { size })
            );
        }
        let bad = |channel, flags| ChannelPart {
            channel,
            flags,
            bytes: vec![],
        };
        assert_eq!(
            bad(0x1000, 0).try_encode(),
            Err(WireError::BadPartHead {
                channel: 0x1000,
                flags: 0
            })
        );
        assert_eq!(
            bad(0, 0x0001).try_encode(),
            Err(WireError::BadPartHead {
                channel: 0,
                flags: 1
            })
        );
        assert_eq!(
            ChannelPart::inline(0, vec![0; 65_536]).try_encode(),
            Err(WireError::TooLarge {
                size: 65_536,
                max: 65_535
            })
        );
        let mut out = vec![9];
        assert!(bad(0x1000, 0).as_part_ref().encode_into(&mut out).is_err());
        assert_eq!(out, [9], "nothing appended on error");
        // The iterator yields the error once, then ends.
        let mut it = parts(&[0, 0x80, 1, 0, 0]);
        assert_eq!(
            it.next(),
            Some(Err(WireError::BadDescriptorSize { size: 1 }))
        );
        assert_eq!(it.next(), None);
    }

    #[test]
    #[should_panic(expected = "ChannelPart::encode")]
    fn encode_panics_on_a_bad_channel() {
        let _ = ChannelPart::inline(0x1000, vec![]).encode();
    }
}

mod descriptor {
    use super::*;

    fn sample() -> EventDescriptor {
        let mut trace_id = [0u8; 28];
        for (i, b) in trace_id.iter_mut().enumerate() {
            *b = 0xC0 + i as u8;
        }
        EventDescriptor {
            event_type: 0x0001_0006,
            flags: 0x21 | 7 << 20,
            recipient: ActorId::with_pool(3, 2, 0x1122_3344_5566_7788, 0x99AA_BBCC),
            sender: ActorId::service(4, b"svc").unwrap(),
            cookie: 0xDEAD_BEEF_0BAD_F00D,
            trace_id,
            payload_checksum: 0xFEED_FACE,
        }
    }

    #[test]
    fn layout_field_by_field() {
        let d = sample();
        let b = d.encode();
        assert_eq!(b.len(), 80);
        assert_eq!(&b[0..4], &0x0001_0006u32.to_le_bytes());
        assert_eq!(&b[4..8], &(0x21u32 | 7 << 20).to_le_bytes());
        assert_eq!(&b[8..24], &d.recipient.to_le_bytes());
        assert_eq!(&b[24..40], &d.sender.to_le_bytes());
        assert_eq!(&b[40..48], &0xDEAD_BEEF_0BAD_F00Du64.to_le_bytes());
        assert_eq!(&b[48..76], &d.trace_id);
        assert_eq!(&b[76..80], &0xFEED_FACEu32.to_le_bytes());
        assert_eq!(EventDescriptor::decode(&b), Ok((d, 80)));
        assert_eq!(d.channel(), 7);
        assert!(d.is_traced());
        assert!(!EventDescriptor::default().is_traced());
    }

    #[test]
    fn body_checksum_zero_means_unchecked() {
        let mut d = EventDescriptor::default();
        assert_eq!(d.verify_body(b"anything"), Ok(()));
        d.payload_checksum = EventDescriptor::body_checksum(b"body");
        assert_eq!(d.verify_body(b"body"), Ok(()));
        assert_eq!(
            d.verify_body(b"bodY"),
            Err(WireError::BadChecksum {
                expected: crc32c(b"body"),
                actual: crc32c(b"bodY")
            })
        );
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EventDescriptor::decode(&[0; 79]),
            Err(WireError::Truncated { need: 80, have: 79 })
        );
    }
}
