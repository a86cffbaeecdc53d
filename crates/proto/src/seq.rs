//! Lazy, borrowed lists: the heart of zero-copy decoding.
//!
//! A decoded `SEQUENCE OF`/`SET OF` is kept as the encoded bytes of its
//! elements and decoded one element at a time when iterated. The bytes were
//! fully validated when the enclosing message was decoded, so iteration
//! cannot fail. The same type also wraps a plain slice, so messages built by
//! a client or the server use the very same types as decoded ones.

use std::fmt;
use std::marker::PhantomData;

use meridian_ber::{Reader, Result, Writer};

use crate::limits::Depth;

/// A value that can be an element of a [`Seq`].
pub trait Element<'a>: Copy + Sized {
    /// Decodes one element from its TLV. Nested lists are *not* looked
    /// into here (that is [`Element::validate`]'s job), which keeps
    /// iteration over already-validated bytes cheap.
    fn decode(reader: &mut Reader<'a>) -> Result<Self>;

    /// Checks nested parts that [`Element::decode`] left encoded.
    fn validate(&self, _depth: Depth) -> Result<()> {
        Ok(())
    }

    /// Appends the element's encoding.
    fn encode(&self, w: &mut Writer<'_>);
}

#[derive(Clone, Copy)]
enum Repr<'a, T> {
    /// Validated encoded elements (the contents of the SEQUENCE/SET).
    Encoded(&'a [u8]),
    /// Elements supplied by the caller.
    Items(&'a [T]),
}

/// A list of `T`, either borrowed encoded bytes or a borrowed slice.
#[derive(Clone, Copy)]
pub struct Seq<'a, T>(Repr<'a, T>);

impl<'a, T: Element<'a>> Seq<'a, T> {
    /// A list of caller-supplied items (for encoding).
    pub const fn from_items(items: &'a [T]) -> Self {
        Seq(Repr::Items(items))
    }

    /// The empty list.
    pub const fn empty() -> Self {
        Seq(Repr::Items(&[]))
    }

    /// Validates the contents of a SEQUENCE OF / SET OF and wraps them.
    pub(crate) fn decode_contents(contents: &'a [u8], depth: Depth) -> Result<Self> {
        let seq = Self::from_encoded_unchecked(contents);
        seq.validate_all(depth)?;
        Ok(seq)
    }

    /// Wraps encoded elements that the caller validates (with
    /// [`Seq::validate_all`]) before anyone iterates them.
    pub(crate) const fn from_encoded_unchecked(contents: &'a [u8]) -> Self {
        Seq(Repr::Encoded(contents))
    }

    /// Checks every element, decoding encoded ones.
    pub(crate) fn validate_all(&self, depth: Depth) -> Result<()> {
        match self.0 {
            Repr::Encoded(bytes) => {
                let mut r = Reader::new(bytes);
                while !r.is_empty() {
                    T::decode(&mut r)?.validate(depth)?;
                }
            }
            Repr::Items(items) => {
                for item in items {
                    item.validate(depth)?;
                }
            }
        }
        Ok(())
    }

    /// Iterates over the elements.
    pub fn iter(&self) -> SeqIter<'a, T> {
        match self.0 {
            Repr::Encoded(bytes) => SeqIter::Encoded(Reader::new(bytes), PhantomData),
            Repr::Items(items) => SeqIter::Items(items.iter()),
        }
    }

    /// True when the list has no element.
    pub fn is_empty(&self) -> bool {
        match self.0 {
            Repr::Encoded(bytes) => bytes.is_empty(),
            Repr::Items(items) => items.is_empty(),
        }
    }

    /// Number of elements (counts by walking encoded bytes).
    pub fn len(&self) -> usize {
        match self.0 {
            Repr::Encoded(_) => self.iter().count(),
            Repr::Items(items) => items.len(),
        }
    }

    /// Appends the elements' encodings (not the enclosing tag).
    pub fn encode_elements(&self, w: &mut Writer<'_>) {
        match self.0 {
            // Already encoded and validated: copy verbatim.
            Repr::Encoded(bytes) => w.raw(bytes),
            Repr::Items(items) => items.iter().for_each(|item| item.encode(w)),
        }
    }
}

impl<'a, T: Element<'a>> Default for Seq<'a, T> {
    fn default() -> Self {
        Self::empty()
    }
}

/// Iterator over a [`Seq`].
pub enum SeqIter<'a, T> {
    #[doc(hidden)]
    Encoded(Reader<'a>, PhantomData<T>),
    #[doc(hidden)]
    Items(std::slice::Iter<'a, T>),
}

impl<'a, T: Element<'a>> Iterator for SeqIter<'a, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            // Validated at construction; an error here would be a bug, and
            // ending the iteration is the safe answer to it.
            SeqIter::Encoded(r, _) if !r.is_empty() => {
                let item = T::decode(r);
                debug_assert!(item.is_ok(), "validated list failed to decode");
                item.ok()
            }
            SeqIter::Encoded(..) => None,
            SeqIter::Items(it) => it.next().copied(),
        }
    }
}

impl<'a, T: Element<'a>> IntoIterator for Seq<'a, T> {
    type Item = T;
    type IntoIter = SeqIter<'a, T>;
    fn into_iter(self) -> SeqIter<'a, T> {
        self.iter()
    }
}

impl<'a, T: Element<'a> + PartialEq> PartialEq for Seq<'a, T> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<'a, T: Element<'a> + fmt::Debug> fmt::Debug for Seq<'a, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// OCTET STRING elements (attribute values, attribute names, URIs).
impl<'a> Element<'a> for &'a [u8] {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        reader.expect(meridian_ber::Tag::OCTET_STRING, "expected an OCTET STRING")
    }

    fn encode(&self, w: &mut Writer<'_>) {
        w.octets(meridian_ber::Tag::OCTET_STRING, self);
    }
}
