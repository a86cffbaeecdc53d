/// Why bytes could not be decoded.
///
/// The split matters to the server: [`Error::Incomplete`] means "keep reading
/// from the socket", every other variant means "this peer sent something we
/// will never accept", which LDAP answers with protocolError and a Notice of
/// Disconnection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer ends before the value does; at least `needed` more bytes
    /// are required before decoding can make progress.
    #[error("incomplete: {needed} more bytes needed")]
    Incomplete {
        /// Lower bound on the number of bytes still missing.
        needed: usize,
    },
    /// The bytes are not valid BER, or not valid for the type expected here.
    #[error("malformed BER: {0}")]
    Malformed(&'static str),
    /// A length field announces more bytes than the configured limit allows.
    #[error("PDU of {length} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced length (header included).
        length: u64,
        /// The configured maximum.
        max: usize,
    },
    /// Values are nested deeper than the configured limit allows.
    #[error("values nested deeper than the limit of {max} levels")]
    TooDeep {
        /// The configured maximum depth.
        max: usize,
    },
}

impl Error {
    /// True when more input could make decoding succeed.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, Error::Incomplete { .. })
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
