//! What the server asks of the cluster node it fronts, when the binary
//! runs one: cluster administration (Meridian's extended operation,
//! [`meridian_proto::extended::oid::CLUSTER_ADMIN`], served to the
//! administrator only), and the wait a read owes `cluster.reads`.
//!
//! The server knows nothing of replication: it checks who asks, hands
//! the request on, and answers when the node has.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use meridian_proto::ResultCode;

/// What a cluster administration request came to, or why a read is not
/// served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAnswer {
    /// The LDAP result code.
    pub code: ResultCode,
    /// The diagnostic message (empty on success).
    pub message: String,
    /// The response value (the answer's text on success).
    pub value: Option<Vec<u8>>,
}

/// A wait before a read is served; an error answers the read.
pub type ReadWait = Pin<Box<dyn Future<Output = Result<(), ClusterAnswer>> + Send>>;

/// The cluster node behind the server.
pub trait ClusterHooks: Send + Sync {
    /// Answers a cluster administration request (`request` is the
    /// extended request's value).
    fn administer(&self, request: &[u8]) -> Pin<Box<dyn Future<Output = ClusterAnswer> + Send>>;

    /// Before a search or compare: `Ok(None)` to serve it now, a wait,
    /// or the answer that refuses it.
    fn before_read(&self) -> Result<Option<ReadWait>, ClusterAnswer>;

    /// Whether a modify, delete or rename is refused when another write
    /// to its entry committed after it was prepared (`cluster.conflicts =
    /// "first-wins"`), rather than both applied, the later last.
    fn first_wins(&self) -> bool {
        false
    }
}

/// The hooks in the server context.
#[derive(Clone)]
pub(crate) struct ClusterHook(pub(crate) Arc<dyn ClusterHooks>);

impl std::fmt::Debug for ClusterHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterHook")
    }
}
