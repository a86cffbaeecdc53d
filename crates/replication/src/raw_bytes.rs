//! Byte strings as serde *bytes*, not sequences of `u8`.
//!
//! serde treats a `Vec<u8>` field as a sequence: postcard then writes and
//! reads it one element call at a time, which for a batch of commands
//! (kilobytes per log entry, read by every follower) and for snapshot
//! chunks (a mebibyte each) is a call per byte. As bytes it is one copy.
//! postcard writes both the same way (a varint length, then the bytes),
//! so logs and peers of either kind read each other.
//!
//! Use with `#[serde(with = "crate::raw_bytes")]`.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    deserializer.deserialize_byte_buf(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    /// Formats without a bytes type hand over a sequence.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        // The hint comes from the input: trust it only so far.
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64 * 1024));
        while let Some(byte) = seq.next_element()? {
            bytes.push(byte);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct AsSequence {
        n: u64,
        data: Vec<u8>,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct AsBytes {
        n: u64,
        #[serde(with = "crate::raw_bytes")]
        data: Vec<u8>,
    }

    /// Logs written before the change, and peers not yet upgraded, read
    /// the same: postcard encodes both forms alike.
    #[test]
    fn postcard_writes_bytes_as_it_wrote_the_sequence() {
        for len in [0usize, 1, 127, 128, 300, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let old = postcard::to_stdvec(&AsSequence {
                n: 5,
                data: data.clone(),
            })
            .unwrap();
            let new = postcard::to_stdvec(&AsBytes {
                n: 5,
                data: data.clone(),
            })
            .unwrap();
            assert_eq!(old, new, "length {len}");
            let back: AsBytes = postcard::from_bytes(&old).unwrap();
            assert_eq!(back.data, data);
            let back: AsSequence = postcard::from_bytes(&new).unwrap();
            assert_eq!(back.data, data);
        }
    }

    #[test]
    fn a_length_past_the_input_is_an_error() {
        // Length 200 (varint c8 01), two bytes of data.
        let input = [5u8, 0xc8, 0x01, 1, 2];
        assert!(postcard::from_bytes::<AsBytes>(&input).is_err());
    }
}
