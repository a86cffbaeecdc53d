//! Base64 (RFC 4648, standard alphabet, padded), as LDIF uses it.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes base64. `None` for a character outside the alphabet, data
/// after padding, more than two padding characters, or a length that is
/// not a whole number of bytes. Padding may be omitted (some writers do).
pub fn decode(input: &[u8]) -> Option<Vec<u8>> {
    let data_len = input.iter().take_while(|c| **c != b'=').count();
    let (data, padding) = input.split_at(data_len);
    if padding.len() > 2 || padding.iter().any(|c| *c != b'=') {
        return None;
    }
    // One leftover character holds only 6 bits: never a whole byte.
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in data {
        acc = (acc << 6) | sextet(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Encodes with padding.
pub fn encode(input: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(input.len().div_ceil(3) * 4);
    encode_into_bytes(input, &mut bytes);
    // The alphabet and padding are ASCII.
    bytes.iter().map(|b| char::from(*b)).collect()
}

/// Appends the encoding of `input` to a byte buffer.
pub fn encode_into_bytes(input: &[u8], out: &mut Vec<u8>) {
    let symbol = |n: u32| ALPHABET.get((n & 63) as usize).copied().unwrap_or(b'A');
    out.reserve(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        out.push(symbol(n >> 18));
        out.push(symbol(n >> 12));
        out.push(if chunk.len() > 1 {
            symbol(n >> 6)
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 { symbol(n) } else { b'=' });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_test_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded.as_bytes()).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn unpadded_input_and_bad_input() {
        assert_eq!(decode(b"Zm9vYg").unwrap(), b"foob");
        assert!(decode(b"Zm9v$").is_none());
        assert!(decode(b"Zm9=v").is_none());
        assert!(decode(b"Z===").is_none());
        assert!(decode(b"Zm9vY").is_none());
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        for len in 0..all.len() {
            assert_eq!(decode(encode(&all[..len]).as_bytes()).unwrap(), &all[..len]);
        }
    }
}
