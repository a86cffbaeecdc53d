//! Attribute descriptions as a record writes them, without an allocation
//! for the short ones.
//!
//! A bulk load reads millions of records of a handful of lines each, and
//! every line names an attribute: a `String` per line was a seventh of
//! the allocations of an import, each a likely cache miss. Descriptions
//! are nearly always short (`objectClass`, `cn;lang-de`), so they are
//! kept inline up to [`INLINE`] bytes.

use std::fmt;
use std::ops::Deref;

/// Bytes kept inline: with the length byte and the tag, the type is as
/// large as a `String`.
const INLINE: usize = 22;

/// An attribute description's text: inline when short, boxed otherwise.
#[derive(Clone)]
pub struct DescriptionText(Repr);

#[derive(Clone)]
enum Repr {
    /// `len` bytes of `bytes`, valid UTF-8 (copied from a `str`).
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Boxed(Box<str>),
}

impl DescriptionText {
    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                let text = bytes.get(..usize::from(*len)).unwrap_or_default();
                // SAFETY: `Inline` is built only by `from`, which copies
                // a whole `str` (so valid UTF-8) and records its length;
                // nothing writes the bytes afterwards. Checking again
                // here cost as much as the allocation it replaces.
                #[allow(unsafe_code)]
                unsafe {
                    std::str::from_utf8_unchecked(text)
                }
            }
            Repr::Boxed(text) => text,
        }
    }

    /// The text as an owned `String`.
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Boxed(text) => text.into_string(),
            Repr::Inline { .. } => self.as_str().to_owned(),
        }
    }
}

impl From<&str> for DescriptionText {
    fn from(text: &str) -> Self {
        let mut bytes = [0u8; INLINE];
        match bytes.get_mut(..text.len()) {
            Some(inline) => {
                inline.copy_from_slice(text.as_bytes());
                DescriptionText(Repr::Inline {
                    // At most INLINE (22): fits.
                    len: text.len() as u8,
                    bytes,
                })
            }
            None => DescriptionText(Repr::Boxed(text.into())),
        }
    }
}

impl Deref for DescriptionText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for DescriptionText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for DescriptionText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for DescriptionText {}

impl PartialEq<str> for DescriptionText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DescriptionText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for DescriptionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for DescriptionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_texts_read_back_whole() {
        let long = "x".repeat(INLINE + 1);
        for text in [
            "",
            "cn",
            "description;lang-de",
            &"y".repeat(INLINE),
            &long,
            "é;lang-fr",
        ] {
            let kept = DescriptionText::from(text);
            assert_eq!(kept.as_str(), text);
            assert_eq!(kept, text);
            assert_eq!(kept.clone().into_string(), text);
            assert_eq!(format!("{kept}"), text);
        }
        assert!(matches!(DescriptionText::from("cn").0, Repr::Inline { .. }));
        assert!(matches!(
            DescriptionText::from(long.as_str()).0,
            Repr::Boxed(_)
        ));
        assert_eq!(
            std::mem::size_of::<DescriptionText>(),
            std::mem::size_of::<String>()
        );
    }
}
