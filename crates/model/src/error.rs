use meridian_proto::ResultCode;

/// A model-level failure: the LDAP result code the client gets and a
/// message that names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// The RFC 4511 result code.
    pub code: ResultCode,
    /// Diagnostic message for the client.
    pub message: String,
}

impl ModelError {
    /// A new error.
    pub fn new(code: ResultCode, message: impl Into<String>) -> Self {
        ModelError {
            code,
            message: message.into(),
        }
    }

    /// A rule of our own code broken: a path that cannot be taken unless
    /// Meridian has a bug (a schema ID that names no type, an index past
    /// a list's end). Debug builds, and so the tests and the fuzzers,
    /// stop at once; release builds log `context` at error level and
    /// answer the client `other` (80) with a message that says it is
    /// ours, never a panic.
    #[track_caller]
    pub fn internal(context: impl std::fmt::Display) -> Self {
        let at = std::panic::Location::caller();
        debug_assert!(false, "internal error at {at}: {context}");
        tracing::error!(%at, "internal error: {context}");
        ModelError {
            code: ResultCode::OTHER,
            message: format!("internal error ({context}): this is a bug in Meridian"),
        }
    }
}
