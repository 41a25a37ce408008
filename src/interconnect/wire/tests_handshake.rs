//! Unit tests of the handshake protobufs (proto2 presence, required fields, unknown fields)
//! and of `WireError` itself.

use super::*;

mod handshake {
    use super::*;

    fn request() -> HandshakeRequest {
        HandshakeRequest {
            protocol: 2,
            program_pid: 100,
            program_start_time: 0,
            serial: 4660,
            receiver_node_id: 2,
            sender_actor_id: "[1:4660:0]".into(),
            request_modern_frame: Some(true),
            request_extended_trace_fmt: Some(true),
            ..Default::default()
        }
    }

    fn success() -> HandshakeSuccess {
        HandshakeSuccess {
            protocol: 2,
            program_pid: 1,
            program_start_time: 2,
            serial: 3,
            sender_actor_id: "[2:3:0]".into(),
            use_modern_frame: Some(true),
            use_extended_trace_fmt: Some(true),
            ..Default::default()
        }
    }

    #[test]
    fn request_bytes() {
        let bytes = request().encode();
        #[rustfmt::skip]
        let expected = [
            0x08, 0x02,             // 1 Protocol = 2
            0x10, 0x64,             // 2 ProgramPID = 100
            0x18, 0x00,             // 3 ProgramStartTime = 0: required, so present
            0x20, 0xB4, 0x24,       // 4 Serial = 4660
            0x28, 0x02,             // 5 ReceiverNodeId = 2
            0x32, 10, b'[', b'1', b':', b'4', b'6', b'6', b'0', b':', b'0', b']',
            0x90, 0x01, 0x01,       // 18 RequestModernFrame = true
            0xA0, 0x01, 0x01,       // 20 RequestExtendedTraceFmt = true
        ];
        assert_eq!(bytes, expected);
    }

    #[test]
    fn presence_of_optional_fields() {
        // An optional field set to its default is encoded; an absent one is not.
        let mut r = request();
        r.require_encryption = Some(false);
        let with = r.encode();
        let without = request().encode();
        assert_eq!(with.len(), without.len() + 2);
        assert!(with.windows(2).any(|w| w == [0x70, 0x00]));
        assert_eq!(HandshakeRequest::decode(&with).unwrap().0, r);
        assert_eq!(
            HandshakeRequest::decode(&without)
                .unwrap()
                .0
                .require_encryption,
            None
        );
    }

    #[test]
    fn every_field_round_trips() {
        let r = HandshakeRequest {
            sender_host_name: Some("a".into()),
            receiver_host_name: Some("b".into()),
            uuid: Some("u".into()),
            ballast: Some(vec![0; 3]),
            version_tag: Some("v".into()),
            accepted_version_tags: vec!["x".into(), "y".into()],
            cluster_uuids: Some(ClusterUuids {
                cluster_uuid: Some("c".into()),
                accept_uuid: vec!["c".into(), "d".into()],
            }),
            require_encryption: Some(true),
            client_scope_id: Some(ScopeId {
                x1: Some(1),
                x2: Some(u64::MAX),
            }),
            cookie: Some("k".into()),
            do_check_cookie: Some(false),
            request_auth_only: Some(false),
            request_external_data_channel: Some(false),
            compatibility_info: Some(vec![1]),
            handshake_id: Some(vec![7; 32]),
            request_xxhash: Some(false),
            request_xdc_shuffle: Some(true),
            params: vec![KeyValuePair {
                key: Some("hmac".into()),
                value: Some(vec![1, 2]),
            }],
            rdma_handshake: Some(RdmaHandshake {
                qp_num: 1,
                subnet_prefix: 2,
                interface_id: 3,
                mtu_index: 4,
                read: Some(RdmaCred {
                    address: 5,
                    size: 6,
                    rkey: 7,
                }),
                rdma_checksum: Some(true),
            }),
            ..request()
        };
        let bytes = r.encode();
        assert_eq!(HandshakeRequest::decode(&bytes), Ok((r, bytes.len())));

        let s = HandshakeSuccess {
            version_tag: Some("v".into()),
            accepted_version_tags: vec!["t".into()],
            cluster_uuids: Some(ClusterUuids::default()),
            start_encryption: Some(false),
            server_scope_id: Some(ScopeId::default()),
            auth_only: Some(false),
            use_external_data_channel: Some(false),
            compatibility_info: Some(vec![]),
            use_xxhash: Some(false),
            use_xdc_shuffle: Some(false),
            params: vec![KeyValuePair::default()],
            rdma: Some(SuccessRdma::RdmaErr("not ready".into())),
            ..success()
        };
        let bytes = s.encode();
        assert_eq!(
            HandshakeSuccess::decode(&bytes),
            Ok((s.clone(), bytes.len()))
        );

        let reply = HandshakeReply {
            success: Some(s),
            error_explanation: Some("e".into()),
            cookie_check_result: Some(true),
            params: vec![KeyValuePair::default()],
        };
        let bytes = reply.encode();
        assert_eq!(HandshakeReply::decode(&bytes), Ok((reply, bytes.len())));

        let xdc = XdcParams {
            handshake_id: Some(vec![1; 32]),
        };
        let bytes = xdc.encode();
        assert_eq!(bytes[..2], [0x0A, 32]);
        assert_eq!(XdcParams::decode(&bytes), Ok((xdc, 34)));
    }

    #[test]
    fn unknown_fields_and_any_order_accepted() {
        // Fields in reverse order, plus unknown fields 99 (varint), 100 (length-delimited),
        // 101 (fixed32) and 102 (fixed64).
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&[0x32, 7, b'[', b'1', b':', b'2', b':', b'3', b']']);
        bytes.extend_from_slice(&[0x28, 0x05, 0x20, 0x01, 0x18, 0x00, 0x10, 0x00, 0x08, 0x02]);
        bytes.extend_from_slice(&[0x98, 0x06, 0x2A]);
        bytes.extend_from_slice(&[0xA2, 0x06, 2, 0xFF, 0xFF]);
        bytes.extend_from_slice(&[0xAD, 0x06, 1, 2, 3, 4]);
        bytes.extend_from_slice(&[0xB1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]);
        let (r, used) = HandshakeRequest::decode(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            (
                r.protocol,
                r.serial,
                r.receiver_node_id,
                r.sender_actor_id.as_str()
            ),
            (2, 1, 5, "[1:2:3]")
        );

        // A newer YDB's success: fields 18 and 20 as the ones we know, and a field 21.
        let mut s = success().encode();
        s.extend_from_slice(&[0xA2, 0x01, 3, b'n', b'/', b'a']); // 20 RdmaErr = "n/a"
        s.extend_from_slice(&[0xA8, 0x01, 0x01]); // 21: unknown
        let (s, _) = HandshakeSuccess::decode(&s).unwrap();
        assert_eq!(s.rdma, Some(SuccessRdma::RdmaErr("n/a".into())));
    }

    #[test]
    fn missing_required_fields() {
        // Only fields 1..=6: single-byte keys, each followed by a varint or a length.
        let full = HandshakeRequest {
            request_modern_frame: None,
            request_extended_trace_fmt: None,
            ..request()
        };
        let drop_field = |tag: u8| -> Vec<u8> {
            let bytes = full.encode();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                let key = bytes[i];
                let len = match key & 7 {
                    0 => {
                        let mut j = i + 1;
                        while bytes[j] & 0x80 != 0 {
                            j += 1;
                        }
                        j + 1 - i
                    }
                    2 => 2 + bytes[i + 1] as usize,
                    _ => unreachable!(),
                };
                if key >> 3 != tag {
                    out.extend_from_slice(&bytes[i..i + len]);
                }
                i += len;
            }
            out
        };
        let names = [
            "Protocol",
            "ProgramPID",
            "ProgramStartTime",
            "Serial",
            "ReceiverNodeId",
            "SenderActorId",
        ];
        for (tag, field) in (1..=6).zip(names) {
            assert_eq!(
                HandshakeRequest::decode(&drop_field(tag)),
                Err(WireError::MissingField {
                    message: "THandshakeRequest",
                    field
                })
            );
        }
        assert_eq!(
            HandshakeSuccess::decode(&[]),
            Err(WireError::MissingField {
                message: "THandshakeSuccess",
                field: "Protocol"
            })
        );
        // A reply may be empty, but a success inside it must be whole.
        assert_eq!(
            HandshakeReply::decode(&[]),
            Ok((HandshakeReply::default(), 0))
        );
        assert_eq!(
            HandshakeReply::decode(&[0x0A, 2, 0x08, 0x02]),
            Err(WireError::MissingField {
                message: "THandshakeSuccess",
                field: "ProgramPID"
            })
        );
    }

    #[test]
    fn malformed_protobuf() {
        let cases: [&[u8]; 5] = [
            &[0x08], // varint cut short
            &[
                0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
            ], // too long
            &[0x32, 5, b'a'], // length past the end
            &[0x0A, 0x01, 0x01], // field 1 with the wrong wire type
            &[0x32, 2, 0xC3, 0x28], // SenderActorId not UTF-8
        ];
        for bytes in cases {
            assert!(
                matches!(HandshakeRequest::decode(bytes), Err(WireError::Protobuf(_))),
                "{bytes:x?}"
            );
        }
    }
}

mod errors {
    use super::*;

    #[test]
    fn messages_and_traits() {
        fn pinned<T: std::error::Error + Send + Sync + Clone + Eq + 'static>() {}
        pinned::<WireError>();
        let e = WireError::Truncated { need: 52, have: 3 };
        assert!(e.is_truncated());
        assert_eq!(
            e.to_string(),
            "truncated frame: 52 bytes needed, 3 available"
        );
        let e = WireError::BadChecksum {
            expected: 1,
            actual: 0xABCD,
        };
        assert!(!e.is_truncated());
        assert_eq!(
            e.to_string(),
            "checksum mismatch: the frame says 0x00000001, the bytes give 0x0000abcd"
        );
        let e = WireError::MissingField {
            message: "THandshakeRequest",
            field: "Serial",
        };
        assert_eq!(
            e.to_string(),
            "required field THandshakeRequest.Serial is absent"
        );
    }
}
