//! Unit tests of event types, spaces, flags and the system events, against YDB's numbers.

use super::*;

#[test]
fn event_spaces_begin_at_space_times_65536() {
    assert_eq!(event_space_begin(0), 0);
    assert_eq!(event_space_begin(ES_SYSTEM), 0x0001_0000);
    assert_eq!(event_space_begin(ES_INTERCONNECT), 0x0002_0000);
    assert_eq!(event_space_begin(ES_INTERCONNECT_TCP), 0x0008_0000);
    assert_eq!(event_space_begin(ES_USERSPACE), 0x1000_0000);
    assert_eq!(event_space_begin(ES_PRIVATE), 0x7FF0_0000);
    assert_eq!(event_space_begin(u16::MAX), 0xFFFF_0000);
    assert_eq!(
        (
            ES_SYSTEM,
            ES_INTERCONNECT,
            ES_INTERCONNECT_TCP,
            ES_USERSPACE,
            ES_PRIVATE
        ),
        (1, 2, 8, 4096, 32752)
    );
}

#[test]
fn event_space_is_the_high_half() {
    assert_eq!(event_space(EV_BOOTSTRAP), ES_SYSTEM);
    assert_eq!(event_space(EV_NODE_DISCONNECTED), ES_INTERCONNECT);
    assert_eq!(
        event_space(event_space_begin(ES_USERSPACE) + 0xFFFF),
        ES_USERSPACE
    );
    assert_eq!(event_space(u32::MAX), u16::MAX);
}

#[test]
fn system_event_types_are_ydbs() {
    assert_eq!(EV_BOOTSTRAP, 0x10001);
    assert_eq!(EV_WAKEUP, 0x10002);
    assert_eq!(EV_SUBSCRIBE, 0x10003);
    assert_eq!(EV_UNSUBSCRIBE, 0x10004);
    assert_eq!(EV_UNDELIVERED, 0x10006);
    assert_eq!(EV_POISON, 0x10007);
    assert_eq!(EV_GONE, 0x1000D);
    assert_eq!(EV_NODE_CONNECTED, 0x20005);
    assert_eq!(EV_NODE_DISCONNECTED, 0x20006);
}

#[test]
fn system_event_structs_carry_their_types() {
    fn type_of<E: Event>(_: &E) -> EventType {
        E::EVENT_TYPE
    }
    assert_eq!(type_of(&Bootstrap), 0x10001);
    assert_eq!(type_of(&Wakeup { tag: 5 }), 0x10002);
    assert_eq!(type_of(&Poison), 0x10007);
    assert_eq!(type_of(&Gone), 0x1000D);
    let undelivered = Undelivered {
        source_type: 1,
        reason: UndeliveredReason::Unknown,
        unsure: false,
    };
    assert_eq!(type_of(&undelivered), 0x10006);
    assert_eq!(Wakeup::default(), Wakeup { tag: 0 });
}

#[test]
fn user_events_declare_their_own_type() {
    struct Ping;
    impl Event for Ping {
        const EVENT_TYPE: EventType = event_space_begin(ES_USERSPACE) + 1;
    }
    assert_eq!(Ping::EVENT_TYPE, 0x1000_0001);
}

#[test]
fn flag_bits_are_ydbs() {
    assert_eq!(EventFlags::TRACK_DELIVERY.bits(), 0x01);
    assert_eq!(EventFlags::FORWARD_ON_NONDELIVERY.bits(), 0x02);
    assert_eq!(EventFlags::SUBSCRIBE_ON_SESSION.bits(), 0x04);
    assert_eq!(EventFlags::USE_SUB_CHANNEL.bits(), 0x08);
    assert_eq!(EventFlags::GENERATE_UNSURE_UNDELIVERED.bits(), 0x10);
    assert_eq!(EventFlags::EXTENDED_FORMAT.bits(), 0x20);
    assert_eq!(EventFlags::FLAG_MASK, 0x000F_FFFF);
    assert_eq!(EventFlags::default(), EventFlags::empty());
    assert_eq!(EventFlags::empty().bits(), 0);
}

#[test]
fn channel_is_bits_20_to_31() {
    let f = (EventFlags::TRACK_DELIVERY | EventFlags::USE_SUB_CHANNEL).with_channel(3);
    assert_eq!(f.bits(), 0x0030_0009);
    assert_eq!(f.channel(), 3);
    assert_eq!(EventFlags::empty().with_channel(4095).bits(), 0xFFF0_0000);
    // A new channel replaces the old one.
    assert_eq!(f.with_channel(1).bits(), 0x0010_0009);
    assert_eq!(f.with_channel(0).bits(), 0x0000_0009);
    assert_eq!(EventFlags::from_bits(0xABC0_0000).channel(), 0xABC);
}

#[test]
fn oversized_channel_never_touches_flag_bits() {
    let all_flags = EventFlags::from_bits(EventFlags::FLAG_MASK);
    for channel in [4096, 4096 + 7, 0x8FFF, u16::MAX] {
        let f = all_flags.with_channel(channel);
        assert_eq!(f.bits() & EventFlags::FLAG_MASK, EventFlags::FLAG_MASK);
        assert_eq!(f.channel(), channel & 0x0FFF);
        assert_eq!(
            all_flags.try_with_channel(channel),
            Err(ChannelOutOfRange(channel))
        );
    }
    assert_eq!(
        EventFlags::TRACK_DELIVERY.try_with_channel(4095),
        Ok(EventFlags::from_bits(0xFFF0_0001))
    );
    assert_eq!(
        ChannelOutOfRange(4096).to_string(),
        "channel 4096 does not fit in 12 bits (max 4095)"
    );
}

#[test]
fn contains_and_without_look_at_flag_bits_only() {
    let f = (EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION).with_channel(7);
    assert!(f.contains(EventFlags::TRACK_DELIVERY));
    assert!(f.contains(EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION));
    assert!(!f.contains(EventFlags::TRACK_DELIVERY | EventFlags::FORWARD_ON_NONDELIVERY));
    assert!(
        f.contains(EventFlags::TRACK_DELIVERY.with_channel(9)),
        "other channel ignored"
    );
    assert!(f.contains(EventFlags::empty()));

    let cleared = f.without(
        EventFlags::TRACK_DELIVERY
            | EventFlags::SUBSCRIBE_ON_SESSION
            | EventFlags::GENERATE_UNSURE_UNDELIVERED,
    );
    assert_eq!(cleared.bits(), 0x0070_0000, "channel kept");
    assert!(cleared.has_no_flags());
    assert!(!f.has_no_flags());
    // `without` never clears the channel, even if `other` has one.
    assert_eq!(f.without(EventFlags::empty().with_channel(7)), f);
    // Unassigned bits are kept as they are.
    let odd = EventFlags::from_bits(0x0008_0401);
    assert_eq!(odd.without(EventFlags::TRACK_DELIVERY).bits(), 0x0008_0400);
}

#[test]
fn or_combines_whole_words() {
    let mut f = EventFlags::TRACK_DELIVERY;
    f |= EventFlags::EXTENDED_FORMAT;
    assert_eq!(f.bits(), 0x21);
    let g = EventFlags::empty().with_channel(1) | EventFlags::empty().with_channel(2);
    assert_eq!(g.channel(), 3, "channels OR like YDB's plain u32");
}

#[test]
fn flags_debug_names_the_flags() {
    let f = (EventFlags::TRACK_DELIVERY | EventFlags::USE_SUB_CHANNEL).with_channel(3);
    assert_eq!(
        format!("{f:?}"),
        "EventFlags(TRACK_DELIVERY | USE_SUB_CHANNEL, channel 3)"
    );
    assert_eq!(
        format!("{:?}", EventFlags::empty()),
        "EventFlags(empty, channel 0)"
    );
    assert_eq!(
        format!("{:?}", EventFlags::from_bits(0x0010_0402)),
        "EventFlags(FORWARD_ON_NONDELIVERY | 0x400, channel 1)"
    );
    assert_eq!(
        format!("{:?}", EventFlags::from_bits(0x0008_0000)),
        "EventFlags(0x80000, channel 0)"
    );
}

#[test]
fn undelivered_reasons_are_numbered_as_ydb() {
    assert_eq!(UndeliveredReason::Unknown.as_u32(), 0);
    assert_eq!(UndeliveredReason::ActorUnknown.as_u32(), 1);
    assert_eq!(UndeliveredReason::Disconnected.as_u32(), 2);
    for reason in [
        UndeliveredReason::Unknown,
        UndeliveredReason::ActorUnknown,
        UndeliveredReason::Disconnected,
    ] {
        assert_eq!(UndeliveredReason::try_from(reason.as_u32()), Ok(reason));
    }
    assert_eq!(
        UndeliveredReason::try_from(3),
        Err(UnknownUndeliveredReason(3))
    );
}

#[test]
fn undelivered_wire_form_is_type_then_reason_le() {
    let ev = Undelivered {
        source_type: 0x1000_0001,
        reason: UndeliveredReason::Disconnected,
        unsure: false,
    };
    assert_eq!(
        ev.to_bytes(),
        [0x01, 0x00, 0x00, 0x10, 0x02, 0x00, 0x00, 0x00]
    );
    assert_eq!(Undelivered::from_bytes(&ev.to_bytes()), Ok(ev));

    let actor_unknown = Undelivered {
        source_type: EV_POISON,
        reason: UndeliveredReason::ActorUnknown,
        unsure: false,
    };
    assert_eq!(
        actor_unknown.to_bytes(),
        [0x07, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00]
    );
    assert_eq!(Undelivered::WIRE_LEN, 8);
}

#[test]
fn undelivered_unsure_is_local_only() {
    let unsure = Undelivered {
        source_type: 5,
        reason: UndeliveredReason::Disconnected,
        unsure: true,
    };
    let back = Undelivered::from_bytes(&unsure.to_bytes()).unwrap();
    assert_eq!(
        back,
        Undelivered {
            unsure: false,
            ..unsure
        }
    );
}

#[test]
fn undelivered_decode_errors_are_typed() {
    for len in [0, 1, 7, 9, 16] {
        let bytes = vec![0u8; len];
        assert_eq!(
            Undelivered::from_bytes(&bytes),
            Err(UndeliveredDecodeError::BadLength(len))
        );
    }
    assert_eq!(
        Undelivered::from_bytes(&[1, 0, 0, 0, 3, 0, 0, 0]),
        Err(UndeliveredDecodeError::UnknownReason(
            UnknownUndeliveredReason(3)
        ))
    );
    assert_eq!(
        Undelivered::from_bytes(&[1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]),
        Err(UndeliveredDecodeError::UnknownReason(
            UnknownUndeliveredReason(u32::MAX)
        ))
    );
    assert_eq!(
        UndeliveredDecodeError::BadLength(7).to_string(),
        "an Undelivered event is 8 bytes, got 7"
    );
}
