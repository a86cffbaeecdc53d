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
}
