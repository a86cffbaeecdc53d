//! Base64 (RFC 4648): the one implementation in the workspace. LDIF
//! uses the standard alphabet, padded; stored password hashes also use
//! the "adapted" alphabet of passlib and OpenLDAP's pw-pbkdf2 (`.` for
//! `+`), usually without padding.

/// The 64 symbols, in value order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alphabet {
    /// `A`-`Z`, `a`-`z`, `0`-`9`, `+`, `/` (RFC 4648 section 4).
    Standard,
    /// The standard alphabet with `.` for `+` (passlib's "ab64").
    Adapted,
}

impl Alphabet {
    /// The symbol for the low six bits of `n`.
    fn symbol(self, n: u32) -> u8 {
        let n = (n & 63) as u8;
        match n {
            0..=25 => b'A' + n,
            26..=51 => b'a' + (n - 26),
            52..=61 => b'0' + (n - 52),
            62 if self == Alphabet::Adapted => b'.',
            62 => b'+',
            _ => b'/',
        }
    }

    /// The value of the symbol `c`, if it is one.
    fn value(self, c: u8) -> Option<u32> {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' if self == Alphabet::Standard => 62,
            b'.' if self == Alphabet::Adapted => 62,
            b'/' => 63,
            _ => return None,
        };
        Some(u32::from(v))
    }
}

/// Decodes standard base64 ([`decode_with`]).
pub fn decode(input: &[u8]) -> Option<Vec<u8>> {
    decode_with(input, Alphabet::Standard)
}

/// Decodes base64 in `alphabet`. `None` for a character outside it,
/// data after padding, more than two padding characters, or a length
/// that is not a whole number of bytes. Padding may be omitted (some
/// writers do, and the adapted alphabet is mostly written without).
pub fn decode_with(input: &[u8], alphabet: Alphabet) -> Option<Vec<u8>> {
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
        acc = (acc << 6) | alphabet.value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Encodes in the standard alphabet, with padding.
pub fn encode(input: &[u8]) -> String {
    encode_with(input, Alphabet::Standard)
}

/// Encodes in `alphabet`, with padding.
pub fn encode_with(input: &[u8], alphabet: Alphabet) -> String {
    let mut bytes = Vec::with_capacity(input.len().div_ceil(3) * 4);
    encode_into(input, alphabet, &mut bytes);
    // The alphabets and padding are ASCII.
    bytes.iter().map(|b| char::from(*b)).collect()
}

/// Appends the standard encoding of `input` to a byte buffer.
pub fn encode_into_bytes(input: &[u8], out: &mut Vec<u8>) {
    encode_into(input, Alphabet::Standard, out);
}

fn encode_into(input: &[u8], alphabet: Alphabet, out: &mut Vec<u8>) {
    let symbol = |n: u32| alphabet.symbol(n);
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
            let adapted = encode_with(&all[..len], Alphabet::Adapted);
            assert!(!adapted.contains('+'));
            assert_eq!(
                decode_with(adapted.as_bytes(), Alphabet::Adapted).unwrap(),
                &all[..len]
            );
        }
    }

    #[test]
    fn the_adapted_alphabet_has_a_dot_for_a_plus() {
        // 0xfb 0xff: the symbols 62 and 63.
        assert_eq!(encode(&[0xfb, 0xff]), "+/8=");
        assert_eq!(encode_with(&[0xfb, 0xff], Alphabet::Adapted), "./8=");
        assert!(decode_with(b"+/8", Alphabet::Adapted).is_none());
        assert!(decode_with(b"./8", Alphabet::Standard).is_none());
    }
}
