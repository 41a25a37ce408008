//! Parsing an [`ActorId`] from its text form `[node:local:hint]`, exactly as YDB does.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use super::id::ActorId;

/// Why a text is not an [`ActorId`].
///
/// The parse follows YDB's `TActorId::Parse` step by step; each step's failure is a variant:
///
/// 1. The text is at least 4 bytes ([`TooShort`](Self::TooShort)), starts with `[` and ends
///    with `]` ([`MissingBrackets`](Self::MissingBrackets)).
/// 2. The first `:` after the `[` and the next `:` after it split the fields
///    ([`MissingSeparator`](Self::MissingSeparator) if either is missing). The hint is
///    everything from the second `:` to the final `]`, so `[1:2:3:4]` fails on the hint's
///    `:` and `[1:2]` lacks a separator.
/// 3. Each field is a strict decimal integer, read left to right: no spaces, no `-`,
///    an optional single leading `+` (YDB's integer parser takes one, so `[+1:+2:+3]` is
///    `[1:2:3]`), leading zeros allowed, at least one digit
///    ([`EmptyField`](Self::EmptyField), [`SignWithoutDigits`](Self::SignWithoutDigits),
///    [`InvalidDigit`](Self::InvalidDigit), [`Overflow`](Self::Overflow)). The node and the
///    hint are u32, the local id u64; the first failing field, node first, is reported.
///
/// The node is read as a whole u32 **into the raw node word, unmasked** (YDB's quirk): its
/// bits above the 20 node bits become the pool id and the service flag. So
/// `"[1048577:2:3]"` parses to node 1 on pool 1, which prints as `[1:2:3]`.
///
/// # Examples
///
/// ```
/// use agentbox::actors::{ActorIdField, ParseActorIdError};
/// use agentbox::ActorId;
///
/// assert_eq!("[1:2:3]".parse::<ActorId>(), Ok(ActorId::new(1, 2, 3)));
/// assert_eq!(
///     "[1:2:3:4]".parse::<ActorId>(),
///     Err(ParseActorIdError::InvalidDigit { field: ActorIdField::Hint, position: 6 })
/// );
/// assert_eq!("[1:2]".parse::<ActorId>(), Err(ParseActorIdError::MissingSeparator));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ParseActorIdError {
    /// Shorter than 4 bytes, the least YDB looks at.
    #[error("actor id text of {len} bytes is too short for `[node:local:hint]`")]
    TooShort {
        /// The text's length in bytes.
        len: usize,
    },
    /// The text does not start with `[` or does not end with `]`.
    #[error("actor id text must be `[node:local:hint]`: missing `[` or `]`")]
    MissingBrackets,
    /// Fewer than two `:` between the brackets.
    #[error("actor id text must be `[node:local:hint]`: fewer than two `:`")]
    MissingSeparator,
    /// A field has no characters.
    #[error("the {field} of an actor id is empty")]
    EmptyField {
        /// Which field.
        field: ActorIdField,
    },
    /// A field is a lone `+`.
    #[error("the {field} of an actor id is a `+` without digits")]
    SignWithoutDigits {
        /// Which field.
        field: ActorIdField,
    },
    /// A field has a byte that is not a decimal digit (a space, a `-`, a second `+`, a
    /// `:`...).
    #[error("the {field} of an actor id has a non-digit at byte {position}")]
    InvalidDigit {
        /// Which field.
        field: ActorIdField,
        /// The offending byte's offset in the whole text.
        position: usize,
    },
    /// A field's value does not fit its type (u32 for the node and the hint, u64 for the
    /// local id).
    #[error("the {field} of an actor id overflows its integer type")]
    Overflow {
        /// Which field.
        field: ActorIdField,
    },
}

/// A field of an actor id's text form, named by [`ParseActorIdError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActorIdField {
    /// The first field: the node word (u32).
    Node,
    /// The second field: the local id (u64).
    LocalId,
    /// The third field: the hint (u32).
    Hint,
}

impl fmt::Display for ActorIdField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActorIdField::Node => "node",
            ActorIdField::LocalId => "local id",
            ActorIdField::Hint => "hint",
        })
    }
}

impl FromStr for ActorId {
    type Err = ParseActorIdError;

    /// Parses `[node:local:hint]` as YDB's `TActorId::Parse`; see [`ParseActorIdError`].
    fn from_str(s: &str) -> Result<ActorId, ParseActorIdError> {
        let text = s.as_bytes();
        if text.len() < 4 {
            return Err(ParseActorIdError::TooShort { len: text.len() });
        }
        let [b'[', inner @ .., b']'] = text else {
            return Err(ParseActorIdError::MissingBrackets);
        };
        let first = find_colon(inner, 0).ok_or(ParseActorIdError::MissingSeparator)?;
        let second = find_colon(inner, first + 1).ok_or(ParseActorIdError::MissingSeparator)?;
        // Offsets in `inner` are one less than in `text` (the `[`).
        let node = parse_field(&inner[..first], 1, ActorIdField::Node, u32::MAX.into())?;
        let local = parse_field(
            &inner[first + 1..second],
            first + 2,
            ActorIdField::LocalId,
            u64::MAX,
        )?;
        let hint = parse_field(
            &inner[second + 1..],
            second + 2,
            ActorIdField::Hint,
            u32::MAX.into(),
        )?;
        // `node` and `hint` are at most u32::MAX: checked by `parse_field`.
        Ok(ActorId::from_raw(local, (node << 32) | hint))
    }
}

fn find_colon(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    rest.iter().position(|&b| b == b':').map(|i| i + from)
}

/// A strict unsigned decimal, as YDB's `TryFromString` for unsigned types: an optional
/// single `+`, then one or more ASCII digits, value at most `max`. `offset` is the field's
/// position in the whole text, for the error.
fn parse_field(
    field_text: &[u8],
    offset: usize,
    field: ActorIdField,
    max: u64,
) -> Result<u64, ParseActorIdError> {
    let (digits, digits_at) = match field_text {
        [] => return Err(ParseActorIdError::EmptyField { field }),
        [b'+'] => return Err(ParseActorIdError::SignWithoutDigits { field }),
        [b'+', rest @ ..] => (rest, offset + 1),
        _ => (field_text, offset),
    };
    let mut value: u64 = 0;
    for (i, &b) in digits.iter().enumerate() {
        if !b.is_ascii_digit() {
            return Err(ParseActorIdError::InvalidDigit {
                field,
                position: digits_at + i,
            });
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .filter(|&v| v <= max)
            .ok_or(ParseActorIdError::Overflow { field })?;
    }
    Ok(value)
}
