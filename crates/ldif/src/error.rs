//! Errors name the input and the line, as a compiler's do.

use std::sync::Arc;

/// A syntax or I/O error in an LDIF input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input}:{line}: {message}")]
pub struct LdifError {
    /// The input's name (a file name, `-` for standard input).
    pub input: Arc<str>,
    /// The 1-based line the problem is on (or, for a whole record, starts on).
    pub line: u64,
    /// What is wrong, for a person.
    pub message: String,
}

impl LdifError {
    pub(crate) fn new(input: &Arc<str>, line: u64, message: impl Into<String>) -> LdifError {
        LdifError {
            input: Arc::clone(input),
            line,
            message: message.into(),
        }
    }
}
