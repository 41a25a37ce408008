//! Unit tests of `ActorId`: layout vectors computed by hand from YDB's rules, round trips,
//! the text form with YDB's parse quirks, the two orders, serde.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};

use super::{ActorId, ActorIdError, ActorIdField, OrderedActorId, ParseActorIdError};

/// `"namesvc"` little-endian in `x1`.
const NAMESVC_X1: u64 = 0x0063_7673_656d_616e;
/// `"ICProxy@"` little-endian in `x1`.
const ICPROXY_X1: u64 = 0x4079_786f_7250_4349;
/// `"abcdefgh"` little-endian.
const ABCDEFGH: u64 = 0x6867_6665_6463_6261;
/// The service flag in `x2`.
const SERVICE_X2: u64 = 0x8000_0000_0000_0000;

fn parse(s: &str) -> Result<ActorId, ParseActorIdError> {
    s.parse()
}

#[test]
fn plain_id_layout() {
    let id = ActorId::new(1, 2, 3);
    assert_eq!(id.raw(), (2, 0x0000_0001_0000_0003));
    assert_eq!(
        (id.node_id(), id.pool_id(), id.local_id(), id.hint()),
        (1, 0, 2, 3)
    );
    assert!(!id.is_service() && !id.is_empty());
    assert_eq!(id.service_name(), None);
    assert_eq!(
        id.to_le_bytes(),
        [2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0]
    );
}

#[test]
fn pool_id_sits_above_the_node_id() {
    let id = ActorId::with_pool(5, 3, 100, 7);
    assert_eq!(id.raw(), (100, 0x0030_0005_0000_0007));
    assert_eq!(
        (id.node_id(), id.pool_id(), id.local_id(), id.hint()),
        (5, 3, 100, 7)
    );
    assert_eq!(
        id.to_le_bytes(),
        [100, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5, 0, 0x30, 0]
    );
}

#[test]
fn largest_fields_fill_all_but_the_service_bit() {
    let id = ActorId::with_pool(
        ActorId::MAX_NODE_ID,
        ActorId::MAX_POOL_ID,
        u64::MAX,
        u32::MAX,
    );
    assert_eq!(id.raw(), (u64::MAX, 0x7FFF_FFFF_FFFF_FFFF));
    assert_eq!((id.node_id(), id.pool_id()), (1_048_575, 2047));
    assert!(!id.is_service());
    assert_eq!(
        ActorId::try_with_pool(0xF_FFFF, 0x7FF, u64::MAX, u32::MAX),
        Ok(id)
    );
}

#[test]
fn oversized_node_and_pool_are_masked_by_the_plain_constructors() {
    assert_eq!(
        ActorId::new(0x0010_0001, 9, 0).raw(),
        (9, 0x0000_0001_0000_0000)
    );
    assert_eq!(
        ActorId::with_pool(2, 0x800 | 5, 0, 0).raw(),
        (0, 0x0050_0002_0000_0000)
    );
    let all = ActorId::with_pool(u32::MAX, u32::MAX, 0, 0);
    assert_eq!(all.raw(), (0, 0x7FFF_FFFF_0000_0000));
    assert!(!all.is_service(), "masking never sets the service flag");
}

#[test]
fn oversized_node_and_pool_are_refused_by_the_checked_constructors() {
    assert_eq!(
        ActorId::try_new(0x0010_0000, 1, 1),
        Err(ActorIdError::NodeIdTooLarge(0x0010_0000))
    );
    assert_eq!(
        ActorId::try_with_pool(1, 0x800, 1, 1),
        Err(ActorIdError::PoolIdTooLarge(0x800))
    );
    assert_eq!(ActorId::try_new(7, 8, 9), Ok(ActorId::new(7, 8, 9)));
    assert_eq!(
        ActorIdError::NodeIdTooLarge(0x0010_0000).to_string(),
        "node id 1048576 does not fit in 20 bits (max 1048575)"
    );
}

#[test]
fn empty_id_is_all_zero_and_the_default() {
    assert_eq!(ActorId::EMPTY.raw(), (0, 0));
    assert_eq!(ActorId::default(), ActorId::EMPTY);
    assert!(ActorId::EMPTY.is_empty());
    assert_eq!(ActorId::new(0, 0, 0), ActorId::EMPTY);
    assert!(!ActorId::new(0, 0, 1).is_empty());
    assert!(!ActorId::from_raw(0, 1 << 63).is_empty());
}

#[test]
fn service_ids_from_names_of_0_7_8_and_12_bytes() {
    let empty = ActorId::service(0, b"").unwrap();
    assert_eq!(empty.raw(), (0, SERVICE_X2));
    assert!(empty.is_service() && !empty.is_empty());
    assert_eq!(empty.service_name(), Some([0; 12]));

    let seven = ActorId::service(3, b"abcdefg").unwrap();
    assert_eq!(seven.raw(), (0x0067_6665_6463_6261, 0x8000_0003_0000_0000));
    assert_eq!(seven.service_name(), Some(*b"abcdefg\0\0\0\0\0"));

    let eight = ActorId::service(0, b"abcdefgh").unwrap();
    assert_eq!(eight.raw(), (ABCDEFGH, SERVICE_X2));

    let twelve = ActorId::service(0xF_FFFF, b"abcdefghijkl").unwrap();
    assert_eq!(twelve.raw(), (ABCDEFGH, 0x800F_FFFF_6C6B_6A69));
    assert_eq!(
        (twelve.node_id(), twelve.pool_id(), twelve.hint()),
        (0xF_FFFF, 0, 0x6c6b_6a69)
    );
    assert_eq!(twelve.service_name(), Some(*b"abcdefghijkl"));
    assert_eq!(&twelve.to_le_bytes()[..12], b"abcdefghijkl");
}

#[test]
fn service_name_longer_than_12_bytes_or_wide_node_is_refused() {
    assert_eq!(
        ActorId::service(0, b"abcdefghijklm"),
        Err(ActorIdError::ServiceNameTooLong(13))
    );
    assert_eq!(
        ActorId::service(0x0010_0000, b"x"),
        Err(ActorIdError::NodeIdTooLarge(0x0010_0000))
    );
}

#[test]
fn service_lookup_key_includes_the_node() {
    let local = ActorId::service(0, b"namesvc").unwrap();
    let remote = ActorId::service(5, b"namesvc").unwrap();
    assert_ne!(local, remote);
    assert_eq!(remote.raw(), (NAMESVC_X1, 0x8000_0005_0000_0000));
}

#[test]
fn well_known_ids() {
    let ns = ActorId::name_service();
    assert_eq!(ns.raw(), (NAMESVC_X1, SERVICE_X2));
    assert_eq!(ns, ActorId::service(0, b"namesvc").unwrap());
    assert_eq!(
        ns.to_le_bytes(),
        [b'n', b'a', b'm', b'e', b's', b'v', b'c', 0, 0, 0, 0, 0, 0, 0, 0, 0x80]
    );

    let ic1 = ActorId::interconnect_proxy(1);
    assert_eq!(ic1.raw(), (ICPROXY_X1, 0x8000_0000_0000_0001));
    assert_eq!(ic1, ActorId::service(0, b"ICProxy@\x01\0\0\0").unwrap());
    assert_eq!(ic1.node_id(), 0, "the proxy lives on the local node");
    assert_eq!(
        ActorId::interconnect_proxy(0x0102_0304).raw(),
        (ICPROXY_X1, 0x8000_0000_0102_0304)
    );
    assert_eq!(
        ActorId::interconnect_proxy(u32::MAX).raw(),
        (ICPROXY_X1, 0x8000_0000_FFFF_FFFF)
    );
    assert_ne!(
        ActorId::interconnect_proxy(1),
        ActorId::interconnect_proxy(2)
    );
}

#[test]
fn raw_and_le_bytes_round_trip_every_id() {
    let ids = [
        ActorId::EMPTY,
        ActorId::new(1, 2, 3),
        ActorId::with_pool(5, 3, 100, 7),
        ActorId::name_service(),
        ActorId::interconnect_proxy(42),
        ActorId::from_raw(u64::MAX, u64::MAX),
        ActorId::from_raw(0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210),
    ];
    for id in ids {
        let (x1, x2) = id.raw();
        assert_eq!(ActorId::from_raw(x1, x2), id);
        assert_eq!(ActorId::from_le_bytes(id.to_le_bytes()), id);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&x1.to_le_bytes());
        bytes[8..].copy_from_slice(&x2.to_le_bytes());
        assert_eq!(id.to_le_bytes(), bytes, "x1 then x2, little-endian");
    }
    let raw = ActorId::from_raw(0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210);
    assert_eq!(
        (raw.local_id(), raw.hint(), raw.node_id(), raw.pool_id()),
        (0x0123_4567_89AB_CDEF, 0x7654_3210, 0xC_BA98, 0x7ED)
    );
    assert!(raw.is_service());
}

#[test]
fn display_is_ydb_text_form() {
    assert_eq!(ActorId::new(1, 2, 3).to_string(), "[1:2:3]");
    assert_eq!(ActorId::EMPTY.to_string(), "[0:0:0]");
    assert_eq!(
        ActorId::with_pool(ActorId::MAX_NODE_ID, 7, u64::MAX, u32::MAX).to_string(),
        "[1048575:18446744073709551615:4294967295]"
    );
    // Neither the pool nor the service flag is printed.
    assert_eq!(ActorId::with_pool(5, 3, 100, 7).to_string(), "[5:100:7]");
    assert_eq!(
        ActorId::name_service().to_string(),
        "[0:27996260689338734:0]"
    );
}

#[test]
fn debug_shows_pool_and_service_name() {
    assert_eq!(format!("{:?}", ActorId::new(1, 2, 3)), "ActorId[1:2:3]");
    assert_eq!(
        format!("{:?}", ActorId::with_pool(5, 3, 100, 7)),
        "ActorId[5:100:7]@pool3"
    );
    assert_eq!(
        format!("{:?}", ActorId::name_service()),
        "ActorId(service \"namesvc\" on node 0)"
    );
    assert_eq!(
        format!("{:?}", ActorId::interconnect_proxy(1)),
        "ActorId(service \"ICProxy@\\x01\" on node 0)"
    );
}

#[test]
fn text_round_trips_ids_without_pool_or_service_bits() {
    let ids = [
        ActorId::EMPTY,
        ActorId::new(1, 2, 3),
        ActorId::new(ActorId::MAX_NODE_ID, u64::MAX, u32::MAX),
        ActorId::new(13, 0x0000_6555_0000_0001, 0),
    ];
    for id in ids {
        assert_eq!(parse(&id.to_string()), Ok(id), "{id}");
    }
    // With a pool, the text loses it: the parse gives the same id on pool 0.
    let pooled = ActorId::with_pool(5, 3, 100, 7);
    assert_eq!(parse(&pooled.to_string()), Ok(ActorId::new(5, 100, 7)));
}

#[test]
fn parse_accepts_ydb_integer_forms() {
    assert_eq!(parse("[+1:+2:+3]"), Ok(ActorId::new(1, 2, 3)));
    assert_eq!(parse("[007:0010:00]"), Ok(ActorId::new(7, 10, 0)));
    assert_eq!(parse("[0:0:0]"), Ok(ActorId::EMPTY));
    assert_eq!(
        parse("[0:18446744073709551615:4294967295]"),
        Ok(ActorId::from_raw(u64::MAX, 0xFFFF_FFFF))
    );
}

#[test]
fn parse_reads_the_node_into_the_raw_node_word_unmasked() {
    // 1048577 = 0x100001: node 1 on pool 1, printed as node 1.
    let id = parse("[1048577:2:3]").unwrap();
    assert_eq!(id.raw(), (2, 0x0010_0001_0000_0003));
    assert_eq!((id.node_id(), id.pool_id()), (1, 1));
    assert_eq!(id.to_string(), "[1:2:3]");

    let all = parse("[4294967295:1:2]").unwrap();
    assert_eq!(all.raw(), (1, 0xFFFF_FFFF_0000_0002));
    assert!(all.is_service());
    assert_eq!((all.node_id(), all.pool_id()), (0xF_FFFF, 0x7FF));

    // The service flag alone: the empty-named service of node 0.
    assert_eq!(
        parse("[2147483648:0:0]"),
        Ok(ActorId::service(0, b"").unwrap())
    );

    // The raw node word round-trips through the text.
    for word in [0u32, 1, 0x0010_0000, 0x7FFF_FFFF, 0x8000_0001, u32::MAX] {
        let text = format!("[{word}:77:88]");
        assert_eq!(
            parse(&text),
            Ok(ActorId::from_raw(77, (u64::from(word) << 32) | 88))
        );
    }
}

#[test]
fn parse_failures_of_the_frame() {
    use ParseActorIdError::*;
    assert_eq!(parse(""), Err(TooShort { len: 0 }));
    assert_eq!(parse("[1]"), Err(TooShort { len: 3 }));
    assert_eq!(parse("[:]"), Err(TooShort { len: 3 }));
    for text in [
        "1:2:3]",
        "[1:2:3",
        "(1:2:3)",
        " [1:2:3]",
        "[1:2:3] ",
        "[1:2:3]\n",
        "abcd",
    ] {
        assert_eq!(parse(text), Err(MissingBrackets), "{text:?}");
    }
    for text in ["[1:2]", "[123]", "[1:]", "[:12]", "[1234567]"] {
        assert_eq!(parse(text), Err(MissingSeparator), "{text:?}");
    }
}

#[test]
fn parse_failures_of_the_fields() {
    use ActorIdField::*;
    use ParseActorIdError::*;
    let cases: &[(&str, ParseActorIdError)] = &[
        (
            "[1:2:3:4]",
            InvalidDigit {
                field: Hint,
                position: 6,
            },
        ),
        ("[::]", EmptyField { field: Node }),
        ("[1::3]", EmptyField { field: LocalId }),
        ("[1:2:]", EmptyField { field: Hint }),
        ("[+:2:3]", SignWithoutDigits { field: Node }),
        ("[1:+:3]", SignWithoutDigits { field: LocalId }),
        ("[1:2:+]", SignWithoutDigits { field: Hint }),
        (
            "[-1:2:3]",
            InvalidDigit {
                field: Node,
                position: 1,
            },
        ),
        (
            "[1:-2:3]",
            InvalidDigit {
                field: LocalId,
                position: 3,
            },
        ),
        (
            "[1:2:-0]",
            InvalidDigit {
                field: Hint,
                position: 5,
            },
        ),
        (
            "[++1:2:3]",
            InvalidDigit {
                field: Node,
                position: 2,
            },
        ),
        (
            "[1+:2:3]",
            InvalidDigit {
                field: Node,
                position: 2,
            },
        ),
        (
            "[ 1:2:3]",
            InvalidDigit {
                field: Node,
                position: 1,
            },
        ),
        (
            "[1 :2:3]",
            InvalidDigit {
                field: Node,
                position: 2,
            },
        ),
        (
            "[1: 2:3]",
            InvalidDigit {
                field: LocalId,
                position: 3,
            },
        ),
        (
            "[1:2:3 ]",
            InvalidDigit {
                field: Hint,
                position: 6,
            },
        ),
        (
            "[1:2:0x3]",
            InvalidDigit {
                field: Hint,
                position: 6,
            },
        ),
        (
            "[1:2:3]]",
            InvalidDigit {
                field: Hint,
                position: 6,
            },
        ),
        (
            "[[1:2:3]",
            InvalidDigit {
                field: Node,
                position: 1,
            },
        ),
        (
            "[1.5:2:3]",
            InvalidDigit {
                field: Node,
                position: 2,
            },
        ),
        (
            "[1:2:\u{e9}]",
            InvalidDigit {
                field: Hint,
                position: 5,
            },
        ),
        (
            "[1:2:\u{663}]",
            InvalidDigit {
                field: Hint,
                position: 5,
            },
        ),
        ("[4294967296:0:0]", Overflow { field: Node }),
        ("[0:18446744073709551616:0]", Overflow { field: LocalId }),
        ("[0:0:4294967296]", Overflow { field: Hint }),
        ("[99999999999999999999999999:0:0]", Overflow { field: Node }),
        // The first failing field is reported, and within a field the first problem.
        (
            "[x:99999999999999999999999:0]",
            InvalidDigit {
                field: Node,
                position: 1,
            },
        ),
        ("[4294967296:x:0]", Overflow { field: Node }),
        ("[99999999999x:0:0]", Overflow { field: Node }),
        (
            "[1x99999999999:0:0]",
            InvalidDigit {
                field: Node,
                position: 2,
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text), Err(*want), "{text:?}");
    }
}

#[test]
fn parse_errors_read_well() {
    assert_eq!(
        parse("[1:2:3:4]").unwrap_err().to_string(),
        "the hint of an actor id has a non-digit at byte 6"
    );
    assert_eq!(
        parse("[0:18446744073709551616:0]").unwrap_err().to_string(),
        "the local id of an actor id overflows its integer type"
    );
}

#[test]
fn ord_is_local_id_first_then_x2() {
    // Local id decides before the node.
    assert!(ActorId::new(9, 1, 0) < ActorId::new(1, 2, 0));
    // Same local id: x2 decides (node, then hint; the service flag is the top bit).
    assert!(ActorId::new(1, 5, 0) < ActorId::new(2, 5, 0));
    assert!(ActorId::new(1, 5, 1) < ActorId::new(1, 5, 2));
    assert!(ActorId::new(1, 5, u32::MAX) < ActorId::new(2, 5, 0));
    assert!(ActorId::with_pool(0xF_FFFF, 0x7FF, 0, 0) < ActorId::service(0, b"").unwrap());

    let mut ids = [
        ActorId::new(2, 1, 0),
        ActorId::new(1, 3, 0),
        ActorId::new(1, 1, 5),
        ActorId::new(3, 2, 0),
        ActorId::new(1, 1, 4),
    ];
    ids.sort();
    let want = [(1, 1, 4), (1, 1, 5), (2, 1, 0), (3, 2, 0), (1, 3, 0)];
    let got: Vec<_> = ids
        .iter()
        .map(|i| (i.node_id(), i.local_id(), i.hint()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn ordered_comparison_is_node_first_then_local_id() {
    assert_eq!(
        ActorId::new(1, 9, 0).cmp_ordered(&ActorId::new(2, 1, 0)),
        Ordering::Less
    );
    assert_eq!(
        ActorId::new(2, 1, 0).cmp_ordered(&ActorId::new(1, 9, 0)),
        Ordering::Greater
    );
    assert_eq!(
        ActorId::new(2, 1, 9).cmp_ordered(&ActorId::new(2, 3, 0)),
        Ordering::Less
    );
    // Hint and pool are not compared: YDB's comparator treats these as equivalent.
    assert_eq!(
        ActorId::with_pool(1, 5, 3, 0).cmp_ordered(&ActorId::new(1, 3, 7)),
        Ordering::Equal
    );
    // Service ids compare by node and name bytes 0..8, without panicking.
    let a = ActorId::service(1, b"a").unwrap();
    let b = ActorId::service(1, b"b").unwrap();
    assert_eq!(a.cmp_ordered(&b), Ordering::Less);

    let mut ids = [
        ActorId::new(2, 1, 0),
        ActorId::new(1, 3, 0),
        ActorId::new(3, 2, 0),
        ActorId::new(1, 1, 4),
    ];
    ids.sort_by(ActorId::cmp_ordered);
    let got: Vec<_> = ids.iter().map(|i| (i.node_id(), i.local_id())).collect();
    assert_eq!(got, [(1, 1), (1, 3), (2, 1), (3, 2)]);
}

#[test]
fn ordered_key_scans_one_node_and_stays_consistent_with_eq() {
    let set: BTreeSet<OrderedActorId> = [
        ActorId::new(2, 5, 0),
        ActorId::new(1, 9, 0),
        ActorId::new(2, 1, 0),
        ActorId::with_pool(2, 4, 3, 0),
        ActorId::new(3, 0, 0),
        ActorId::new(2, 1, 1),
    ]
    .into_iter()
    .map(OrderedActorId::from)
    .collect();
    assert_eq!(
        set.len(),
        6,
        "ids equal by (node, local) but not by Eq are kept apart"
    );
    let node_2: Vec<(u64, u32)> = set
        .range(OrderedActorId(ActorId::new(2, 0, 0))..OrderedActorId(ActorId::new(3, 0, 0)))
        .map(|o| (o.0.local_id(), o.0.hint()))
        .collect();
    assert_eq!(node_2, [(1, 0), (1, 1), (3, 0), (5, 0)]);
    for x in &set {
        for y in &set {
            assert_eq!(x.cmp(y) == Ordering::Equal, x == y);
        }
    }
}

#[test]
fn equal_ids_hash_equal() {
    let set: HashSet<ActorId> = [
        ActorId::new(1, 2, 3),
        ActorId::from_raw(2, 0x0000_0001_0000_0003),
        ActorId::name_service(),
        ActorId::service(0, b"namesvc").unwrap(),
    ]
    .into_iter()
    .collect();
    assert_eq!(set.len(), 2);
}

#[test]
fn serde_form_is_the_two_raw_words() {
    let id = ActorId::new(1, 2, 3);
    let json = serde_json::to_string(&id).unwrap();
    assert_eq!(json, r#"{"raw_x1":2,"raw_x2":4294967299}"#);
    assert_eq!(serde_json::from_str::<ActorId>(&json).unwrap(), id);

    for id in [
        ActorId::EMPTY,
        ActorId::with_pool(5, 3, 100, 7),
        ActorId::name_service(),
        ActorId::interconnect_proxy(7),
        ActorId::from_raw(u64::MAX, u64::MAX),
    ] {
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(
            serde_json::from_str::<ActorId>(&json).unwrap(),
            id,
            "{json}"
        );
    }
    let max = serde_json::to_string(&ActorId::from_raw(u64::MAX, u64::MAX)).unwrap();
    assert_eq!(
        max,
        r#"{"raw_x1":18446744073709551615,"raw_x2":18446744073709551615}"#
    );
    assert!(serde_json::from_str::<ActorId>(r#"{"raw_x1":1}"#).is_err());
    assert!(serde_json::from_str::<ActorId>(r#"{"raw_x1":-1,"raw_x2":0}"#).is_err());
}
