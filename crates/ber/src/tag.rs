/// A BER identifier octet (class, constructed bit and a tag number below 31).
///
/// LDAP never uses the high-tag-number form, so one octet is the whole tag;
/// the reader refuses the long form as malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag(pub u8);

impl Tag {
    /// UNIVERSAL 1.
    pub const BOOLEAN: Tag = Tag(0x01);
    /// UNIVERSAL 2.
    pub const INTEGER: Tag = Tag(0x02);
    /// UNIVERSAL 4, primitive (RFC 4511 forbids the constructed form).
    pub const OCTET_STRING: Tag = Tag(0x04);
    /// UNIVERSAL 5.
    pub const NULL: Tag = Tag(0x05);
    /// UNIVERSAL 10.
    pub const ENUMERATED: Tag = Tag(0x0a);
    /// UNIVERSAL 16, constructed.
    pub const SEQUENCE: Tag = Tag(0x30);
    /// UNIVERSAL 17, constructed.
    pub const SET: Tag = Tag(0x31);

    const CONSTRUCTED: u8 = 0x20;
    const CLASS_APPLICATION: u8 = 0x40;
    const CLASS_CONTEXT: u8 = 0x80;

    /// `[APPLICATION n]`, primitive or constructed.
    pub const fn application(number: u8, constructed: bool) -> Tag {
        Tag(Self::CLASS_APPLICATION | Self::constructed_bit(constructed) | (number & 0x1f))
    }

    /// `[n]` (context-specific), primitive or constructed.
    pub const fn context(number: u8, constructed: bool) -> Tag {
        Tag(Self::CLASS_CONTEXT | Self::constructed_bit(constructed) | (number & 0x1f))
    }

    const fn constructed_bit(constructed: bool) -> u8 {
        if constructed { Self::CONSTRUCTED } else { 0 }
    }

    /// True for the constructed form (contents are TLVs).
    pub const fn is_constructed(self) -> bool {
        self.0 & Self::CONSTRUCTED != 0
    }

    /// The tag number (low five bits).
    pub const fn number(self) -> u8 {
        self.0 & 0x1f
    }
}
