use meridian_ber::{Error, Result};

/// Limits applied while decoding, before any work is spent on a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted LDAPMessage, header included.
    pub max_pdu_bytes: usize,
    /// Deepest accepted nesting of constructed values inside a message
    /// (filters are where hostile depth hides).
    pub max_depth: usize,
}

impl DecodeLimits {
    /// 4 MiB: room for entries with photos or certificates, while one
    /// connection can never pin more than that in its read buffer.
    /// (389 DS defaults to 2 MiB, slapd to 4 MiB for authenticated peers.)
    pub const DEFAULT_MAX_PDU_BYTES: usize = 4 << 20;
    /// 64 levels: a real filter rarely nests more than a handful of levels,
    /// and decoding recursion stays far from the stack limit.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_pdu_bytes: Self::DEFAULT_MAX_PDU_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
        }
    }
}

/// The nesting budget left at some point of decoding.
#[derive(Debug, Clone, Copy)]
pub struct Depth {
    remaining: usize,
    max: usize,
}

impl Depth {
    /// A fresh budget of `max` levels.
    pub fn new(max: usize) -> Self {
        Depth {
            remaining: max,
            max,
        }
    }

    /// One level deeper, or `TooDeep` if the budget is spent.
    pub fn descend(self) -> Result<Depth> {
        match self.remaining.checked_sub(1) {
            Some(remaining) => Ok(Depth {
                remaining,
                max: self.max,
            }),
            None => Err(Error::TooDeep { max: self.max }),
        }
    }
}
