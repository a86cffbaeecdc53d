//! The hook through which a cluster node is administered over LDAP: the
//! cluster administration extended operation
//! ([`meridian_proto::extended::oid::CLUSTER_ADMIN`]), served to the
//! administrator only, when the binary runs a cluster node.
//!
//! The server knows nothing of replication: it checks who asks and hands
//! the request value to the hook, which answers in its own time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use meridian_proto::ResultCode;

/// What a cluster administration request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAnswer {
    /// The LDAP result code.
    pub code: ResultCode,
    /// The diagnostic message (empty on success).
    pub message: String,
    /// The response value (the answer's text on success).
    pub value: Option<Vec<u8>>,
}

/// Carries out cluster administration requests.
pub trait ClusterAdmin: Send + Sync {
    /// Answers `request`, the extended request's value.
    fn administer(&self, request: &[u8]) -> Pin<Box<dyn Future<Output = ClusterAnswer> + Send>>;
}

/// The hook in the server context.
#[derive(Clone)]
pub(crate) struct ClusterAdminHook(pub(crate) Arc<dyn ClusterAdmin>);

impl std::fmt::Debug for ClusterAdminHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterAdminHook")
    }
}
