//! Writing LDIF: values that are not SAFE-STRINGs (RFC 2849 section 2:
//! non-ASCII, control characters, a leading space, colon or `<`, or a
//! trailing space) as base64; lines folded at 76 bytes.

use crate::base64;

/// Longest line written, before its newline.
const WIDTH: usize = 76;

/// The `version: 1` line and the blank line after it.
pub fn version(out: &mut Vec<u8>) {
    out.extend_from_slice(b"version: 1\n\n");
}

/// True if `value` may be written as it is after `description: `.
pub fn is_safe(value: &[u8]) -> bool {
    let Some((&first, _)) = value.split_first() else {
        return true;
    };
    !matches!(first, b' ' | b':' | b'<')
        && value.last() != Some(&b' ')
        && value
            .iter()
            .all(|&b| b != 0 && b != b'\n' && b != b'\r' && b < 0x80)
}

/// One `description: value` line (or `description:: base64`), folded.
pub fn attr_value(out: &mut Vec<u8>, description: &str, value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(description.as_bytes());
    out.push(b':');
    if is_safe(value) {
        if !value.is_empty() {
            out.push(b' ');
            out.extend_from_slice(value);
        }
    } else {
        out.extend_from_slice(b": ");
        base64::encode_into_bytes(value, out);
    }
    if out.len() - start > WIDTH {
        // Rare (long values): fold the line just written.
        let line = out.split_off(start);
        fold(out, &line);
    } else {
        out.push(b'\n');
    }
}

/// Writes `line` folded: the first `WIDTH` bytes, then continuation
/// lines of a space and `WIDTH - 1` bytes. Lines are ASCII here, so a
/// fold never splits a character.
fn fold(out: &mut Vec<u8>, line: &[u8]) {
    let (head, mut rest) = line.split_at(line.len().min(WIDTH));
    out.extend_from_slice(head);
    out.push(b'\n');
    while !rest.is_empty() {
        let (part, tail) = rest.split_at(rest.len().min(WIDTH - 1));
        out.push(b' ');
        out.extend_from_slice(part);
        out.push(b'\n');
        rest = tail;
    }
}

/// A whole content record: the DN, the attributes in the order given,
/// and the blank line that ends it.
pub fn entry<'a>(
    out: &mut Vec<u8>,
    dn: &[u8],
    attributes: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) {
    attr_value(out, "dn", dn);
    for (description, value) in attributes {
        attr_value(out, description, value);
    }
    out.push(b'\n');
}
