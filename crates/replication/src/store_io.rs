//! The store's errors across openraft's storage traits, which speak
//! `io::Error`: the typed [`StoreError`] rides along as the source, so
//! whoever reads the error (openraft's `StorageError`, the log, a test)
//! can still tell a full disk from a corrupt page.

use std::io;

use meridian_store::StoreError;

/// A store operation that failed: what replication was doing, and the
/// store's own error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub(crate) struct StoreStep {
    what: &'static str,
    #[source]
    source: StoreError,
}

/// Wraps a [`StoreError`] met while doing `what` into the `io::Error`
/// openraft's traits return, keeping it as the source.
pub(crate) fn store_failed(what: &'static str) -> impl FnOnce(StoreError) -> io::Error {
    move |source| io::Error::other(StoreStep { what, source })
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn the_store_error_stays_the_source() {
        let error = store_failed("applying committed log entries")(StoreError::NoSuchObject {
            dn: "cn=x".into(),
            matched: String::new(),
        });
        assert!(
            error
                .to_string()
                .starts_with("applying committed log entries: ")
        );
        let step = error.get_ref().and_then(|e| e.downcast_ref::<StoreStep>());
        let source = step.and_then(|s| s.source());
        assert!(
            source.is_some_and(|s| s.downcast_ref::<StoreError>().is_some()),
            "{error:?}"
        );
    }
}
