// The property every decoder of `agentbox::interconnect::wire` must keep, whatever the
// bytes: no panic, a consumed count within the input, and, where the frame has one exact
// encoding, a successful decode that re-encodes to exactly the bytes it consumed. Shared by
// the cargo-fuzz target (`fuzz_targets/wire_decoders.rs`) and the fixed-count test
// `tests/interconnect_wire_fuzz.rs`.

use agentbox::interconnect::wire::{
    parts, ChannelPart, EventDescriptor, ExBlock, HandshakeReply, HandshakeRequest,
    HandshakeSuccess, InitialPacket, Packet, WireError, XdcParams,
};

/// The decoders, in the order of [`check`]'s result.
pub const DECODERS: [&str; 10] = [
    "InitialPacket",
    "ExBlock",
    "Packet",
    "ChannelPart",
    "parts",
    "EventDescriptor",
    "HandshakeRequest",
    "HandshakeReply",
    "HandshakeSuccess",
    "XdcParams",
];

/// Runs `data` through every decoder and checks the property; returns which decoders
/// accepted it. Panics (with the decoder's name) only when the property is broken.
pub fn check(data: &[u8]) -> [bool; DECODERS.len()] {
    let mut ok = [false; DECODERS.len()];
    ok[0] = exact(
        data,
        "InitialPacket",
        InitialPacket::decode,
        InitialPacket::encode,
    );
    ok[1] = exact(data, "ExBlock", ExBlock::decode, ExBlock::encode);
    ok[2] = exact(data, "Packet", Packet::decode, Packet::encode);
    ok[3] = exact(
        data,
        "ChannelPart",
        ChannelPart::decode,
        ChannelPart::encode,
    );
    ok[4] = all_parts(data);
    ok[5] = exact(
        data,
        "EventDescriptor",
        EventDescriptor::decode,
        EventDescriptor::encode,
    );
    ok[6] = proto(
        data,
        "HandshakeRequest",
        HandshakeRequest::decode,
        HandshakeRequest::encode,
    );
    ok[7] = proto(
        data,
        "HandshakeReply",
        HandshakeReply::decode,
        HandshakeReply::encode,
    );
    ok[8] = proto(
        data,
        "HandshakeSuccess",
        HandshakeSuccess::decode,
        HandshakeSuccess::encode,
    );
    ok[9] = proto(data, "XdcParams", XdcParams::decode, XdcParams::encode);

    // The helpers that look at decoded values must not panic either.
    if let Ok((packet, _)) = Packet::decode(data) {
        let _ = packet.kind();
        let _ = Packet::checksum(packet.confirm, packet.serial, &packet.payload);
    }
    if let Ok((descriptor, used)) = EventDescriptor::decode(data) {
        let _ = descriptor.verify_body(&data[used..]);
        let _ = (descriptor.channel(), descriptor.is_traced());
    }
    ok
}

/// A decoder of the wire codec.
type Decode<T> = fn(&[u8]) -> Result<(T, usize), WireError>;

/// A frame with one exact encoding: what was consumed is what re-encodes.
fn exact<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    name: &str,
    decode: Decode<T>,
    encode: fn(&T) -> Vec<u8>,
) -> bool {
    match decode(data) {
        Ok((value, used)) => {
            assert!(
                used <= data.len(),
                "{name}: consumed {used} of {}",
                data.len()
            );
            assert_eq!(encode(&value), &data[..used], "{name}: re-encoding differs");
            true
        }
        Err(e) => {
            truncation_is_consistent(data, name, &e);
            false
        }
    }
}

/// A protobuf message has many encodings of one value (field order, unknown fields,
/// overlong varints): its re-encoding must decode to the same value.
fn proto<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    name: &str,
    decode: Decode<T>,
    encode: fn(&T) -> Vec<u8>,
) -> bool {
    match decode(data) {
        Ok((value, used)) => {
            assert_eq!(
                used,
                data.len(),
                "{name}: a message consumes its whole input"
            );
            let again = encode(&value);
            let len = again.len();
            assert_eq!(
                decode(&again),
                Ok((value, len)),
                "{name}: re-decoding differs"
            );
            true
        }
        Err(_) => false,
    }
}

/// A payload split into parts: the parts re-encode to the whole payload.
fn all_parts(data: &[u8]) -> bool {
    let mut out = Vec::with_capacity(data.len());
    for part in parts(data) {
        match part {
            Ok(part) => part
                .encode_into(&mut out)
                .expect("parts: a decoded part re-encodes"),
            Err(_) => return false,
        }
    }
    assert_eq!(out, data, "parts: re-encoding differs");
    true
}

/// A `Truncated` error names more bytes than were given.
fn truncation_is_consistent(data: &[u8], name: &str, e: &WireError) {
    if let WireError::Truncated { need, have } = *e {
        assert_eq!(have, data.len(), "{name}: Truncated.have");
        assert!(need > have, "{name}: Truncated needs {need}, has {have}");
    }
}
