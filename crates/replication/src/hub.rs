//! One peer listener for every Raft group a node runs.
//!
//! A node runs one Raft group per partition (a naming context; the first
//! is group 0), and every group's peers reach it at its one peer address:
//! one port to open, one link per pair of sites for the WAN emulator to
//! shape. The hub accepts each connection, checks the secret, and hands
//! the connection to the group its handshake names (`wire.rs`); each
//! group serves its own connections (`peer_server.rs`). Stopping a group
//! ends its connections and refuses new ones by name; stopping the last
//! closes the listener.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::wire::{Link, PeerStream};
use crate::{ClusterError, Options, io_error};

/// How long a connecting peer has to prove the secret.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most proven connections waiting for their group to take them.
const WAITING_PER_GROUP: usize = 64;

/// A connection that proved the secret, for one group.
pub(crate) struct Accepted {
    pub(crate) stream: PeerStream,
    pub(crate) from: Option<SocketAddr>,
}

type Groups = Arc<Mutex<BTreeMap<u16, mpsc::Sender<Accepted>>>>;

/// A node's peer listener, shared by its Raft groups.
pub struct PeerHub {
    /// The link every group's is made from ([`Link::for_group`]).
    link: Link,
    groups: Groups,
    accepting: Mutex<Option<JoinHandle<()>>>,
    local_addr: Option<SocketAddr>,
}

impl PeerHub {
    /// Binds this node's peer address (`cluster.peer_listen`, else its
    /// member `peer`).
    pub async fn bind(options: &Options) -> Result<Arc<PeerHub>, ClusterError> {
        let me = options.node_id;
        let listen = match options.peer_listen.as_deref() {
            Some(listen) => listen.to_owned(),
            None => options
                .members
                .iter()
                .chain(&options.learners)
                .find(|m| m.id == me)
                .map(|m| m.peer.clone())
                .ok_or(ClusterError::NotAMember(me))?,
        };
        let listener = TcpListener::bind(&listen)
            .await
            .map_err(io_error(format!("listening for peers on {listen}")))?;
        PeerHub::on(listener, options)
    }

    /// A hub on a listener the caller bound (one on port 0, whose port
    /// the caller read back: the in-process tests).
    pub fn on(listener: TcpListener, options: &Options) -> Result<Arc<PeerHub>, ClusterError> {
        let link = crate::peer_link(options)?;
        let groups = Groups::default();
        let local_addr = listener.local_addr().ok();
        let accepting = tokio::spawn(accept(listener, link.clone(), Arc::clone(&groups)));
        Ok(Arc::new(PeerHub {
            link,
            groups,
            accepting: Mutex::new(Some(accepting)),
            local_addr,
        }))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The link of `group`'s connections.
    pub(crate) fn link(&self, group: u16) -> Link {
        self.link.for_group(group)
    }

    /// Takes `group`'s connections from now on; `None` if a group of that
    /// number runs here already.
    pub(crate) fn register(&self, group: u16) -> Option<mpsc::Receiver<Accepted>> {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        if groups.contains_key(&group) {
            return None;
        }
        let (sender, receiver) = mpsc::channel(WAITING_PER_GROUP);
        groups.insert(group, sender);
        Some(receiver)
    }

    /// Stops handing `group` connections; once no group is left, stops
    /// listening, as a node alone stopped did.
    pub(crate) fn deregister(&self, group: u16) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.remove(&group);
        if groups.is_empty() {
            self.stop();
        }
    }

    fn stop(&self) {
        let task = self
            .accepting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }
}

impl Drop for PeerHub {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts peers until aborted; dropping the task also ends every
/// handshake in progress (they live in its `JoinSet`).
async fn accept(listener: TcpListener, link: Link, groups: Groups) {
    let mut handshakes = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // Reap finished handshakes as they end.
            Some(_) = handshakes.join_next(), if !handshakes.is_empty() => continue,
        };
        let (tcp, from) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("accepting a peer connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let link = link.clone();
        let groups = Arc::clone(&groups);
        handshakes.spawn(async move {
            let serves = |group| {
                groups
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains_key(&group)
            };
            let (stream, group) = match link.accept(tcp, HANDSHAKE_TIMEOUT, serves).await {
                Ok(Some(accepted)) => accepted,
                Ok(None) => {
                    tracing::warn!(
                        %from,
                        "a peer connection did not prove the cluster secret for this node: closed"
                    );
                    return;
                }
                // A group starting or stopping: the peer tries again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::debug!(%from, "{e}");
                    return;
                }
                Err(e) => {
                    tracing::warn!(%from, "a peer connection was refused: {e}");
                    return;
                }
            };
            let sender = groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&group)
                .cloned();
            if let Some(sender) = sender {
                // A group that stopped meanwhile drops the connection.
                let _ = sender
                    .send(Accepted {
                        stream,
                        from: Some(from),
                    })
                    .await;
            }
        });
    }
}
