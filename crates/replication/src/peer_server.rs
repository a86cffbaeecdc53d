//! The accepting side of a group's peer links: each connection the hub
//! handed this group (`hub.rs`: it proved the cluster secret) is served
//! one request at a time, in order.

use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::hub::Accepted;
use crate::snapshot::{SnapshotFile, Snapshots};
use crate::types::{Meridian, Raft};
use crate::wire::{Link, Request, Response, Submitted};

/// How long the leader waits for every voter before it answers no.
const ALL_ACK_WAIT: Duration = Duration::from_secs(2);

/// What serving a peer needs.
pub(crate) struct PeerService {
    pub(crate) me: crate::types::NodeId,
    pub(crate) raft: Raft,
    pub(crate) link: Link,
    pub(crate) snapshots: Arc<Snapshots>,
    pub(crate) addresses: crate::admin::Addresses,
    /// How long a membership change may take (`cluster.write_timeout_ms`).
    pub(crate) patience: Duration,
    /// The leader's AppendEntries as they arrive (`cluster.reads = "local"`).
    /// Kept only under `cluster.reads = "local"`, which reads them.
    pub(crate) contacts: Option<Arc<crate::reads::Contacts>>,
    /// Whether this node may vote yet (`rejoin.rs`).
    pub(crate) votes: Arc<crate::rejoin::VoteGuard>,
    /// Whether the leader took this node out (`removal.rs`).
    pub(crate) removal: Arc<crate::removal::Removal>,
    /// Whether, leading, it may append now (`lease.rs`).
    pub(crate) lease: crate::lease::Lease,
}

/// Serves the connections the hub hands this group until the task is
/// dropped; dropping it also ends every connection it serves (they live
/// in its `JoinSet`), so a group stopped in a process that goes on (the
/// in-process tests, a node's other groups) leaves no handler answering
/// for it.
pub(crate) async fn serve(mut incoming: mpsc::Receiver<Accepted>, service: Arc<PeerService>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = incoming.recv() => accepted,
            // Reap finished connections as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Some(Accepted { stream, from }) = accepted else {
            return;
        };
        let service = Arc::clone(&service);
        connections.spawn(async move {
            if let Err(e) = serve_connection(stream, &service).await {
                tracing::debug!(?from, "peer connection ended: {e}");
            }
        });
    }
}

async fn serve_connection(
    mut stream: crate::wire::PeerStream,
    service: &PeerService,
) -> std::io::Result<()> {
    // A snapshot transfer in progress on this connection.
    let mut receiving: Option<(u64, std::fs::File, std::path::PathBuf)> = None;
    // Once one submitted batch was refused, every later one on this
    // connection is too: the submitter sends them all again, in order,
    // and none may reach the log ahead of the refused one (as it would
    // if this node became leader between the two).
    let mut refusing_submits = false;
    while let Some(request) = service.link.receive::<Request>(&mut stream).await? {
        let response = match request {
            Request::Append(rpc) => {
                let leader_commit = rpc.leader_commit.as_ref().map_or(0, |id| id.index);
                match service.raft.append_entries(rpc).await {
                    Ok(response) => {
                        if let Some(contacts) = &service.contacts
                            && response.is_success()
                        {
                            contacts.record(leader_commit);
                        }
                        Response::Append(response)
                    }
                    Err(e) => Response::Failed(e.to_string()),
                }
            }
            Request::ReadIndex => Response::ReadIndex(if service.raft.is_leader() {
                crate::reads::leader_read_index(&service.raft).await
            } else {
                Err(format!("node {} does not lead now", service.me))
            }),
            Request::Vote(rpc) => match service.votes.refusal(&service.raft, service.me) {
                Some(refusal) => Response::Failed(refusal),
                None => match service.raft.vote(rpc).await {
                    Ok(response) => Response::Vote(response),
                    Err(e) => Response::Failed(e.to_string()),
                },
            },
            Request::PreVote(rpc) => match service.votes.refusal(&service.raft, service.me) {
                Some(refusal) => Response::Failed(refusal),
                None => match service.raft.pre_vote(rpc).await {
                    Ok(response) => Response::Vote(response),
                    Err(e) => Response::Failed(e.to_string()),
                },
            },
            Request::StartedEmpty(_) => crate::rejoin::answer(&service.raft),
            Request::Removed => {
                tracing::warn!(
                    node = service.me,
                    "the leader took this node out of the cluster: it refuses reads; stop it"
                );
                service.removal.told(&service.raft);
                Response::Noted
            }
            Request::TransferLeader(rpc) => match service.raft.handle_transfer_leader(rpc).await {
                Ok(response) => Response::TransferLeader(response),
                Err(e) => Response::Failed(e.to_string()),
            },
            Request::Submit(batch) => {
                let response = if refusing_submits {
                    Response::Submitted(Submitted::NotLeader(None))
                } else {
                    submit(service, batch).await
                };
                refusing_submits = !matches!(response, Response::Submitted(Submitted::Accepted));
                response
            }
            Request::EveryVoterHolds(index) => Response::EveryVoterHolds(
                crate::ack::every_voter_holds(&service.raft, service.me, index, ALL_ACK_WAIT).await,
            ),
            Request::Admin(command) => Response::Admin(if service.raft.is_leader() {
                crate::admin::execute(
                    &service.raft,
                    &service.addresses,
                    &service.link,
                    command,
                    service.patience,
                )
                .await
            } else {
                Err(crate::admin::AdminError::Unavailable(format!(
                    "node {} was asked as the leader but does not lead now; try again",
                    service.me
                )))
            }),
            Request::SnapshotChunk {
                transfer,
                offset,
                data,
                crc,
                done,
            } => match take_chunk(service, &mut receiving, transfer, offset, &data, crc) {
                Err(e) => {
                    receiving = None;
                    Response::Failed(format!("a snapshot chunk was refused: {e}"))
                }
                Ok(()) => match done {
                    None => Response::Snapshot(None),
                    Some((vote, meta)) => {
                        let Some((_, file, path)) = receiving.take() else {
                            return Ok(());
                        };
                        file.sync_all()?;
                        drop(file);
                        let snapshot = openraft::alias::SnapshotOf::<Meridian, SnapshotFile> {
                            meta,
                            snapshot: SnapshotFile { path },
                        };
                        match service.raft.install_full_snapshot(vote, snapshot).await {
                            Ok(response) => Response::Snapshot(Some(response)),
                            Err(e) => Response::Failed(e.to_string()),
                        }
                    }
                },
            },
        };
        service.link.send(&mut stream, &response).await?;
    }
    Ok(())
}

/// Writes one chunk to the transfer's file, starting it at offset 0.
fn take_chunk(
    service: &PeerService,
    receiving: &mut Option<(u64, std::fs::File, std::path::PathBuf)>,
    transfer: u64,
    offset: u64,
    data: &[u8],
    crc: u32,
) -> std::io::Result<()> {
    if crc32c::crc32c(data) != crc {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "its checksum does not match",
        ));
    }
    if receiving.as_ref().is_none_or(|(t, _, _)| *t != transfer) {
        if offset != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a transfer must start at offset 0",
            ));
        }
        if let Some((_, _, old)) = receiving.take() {
            let _ = std::fs::remove_file(old);
        }
        let path = service.snapshots.receiving_path(transfer);
        let file = meridian_store::private::create_file(&path)?;
        *receiving = Some((transfer, file, path));
    }
    let Some((_, file, _)) = receiving.as_mut() else {
        return Ok(());
    };
    let at = file.seek(SeekFrom::End(0))?;
    if at != offset {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a chunk for offset {offset} came at {at}"),
        ));
    }
    file.write_all(data)
}

/// The leader's part of a submitted batch: into the log, after every
/// batch this connection submitted before it (requests on a connection
/// are served in order). The answer does not wait for the commit: the
/// submitting node learns of it by applying the batch.
async fn submit(service: &PeerService, batch: crate::types::Batch) -> Response {
    use openraft::async_runtime::watch::WatchReceiver as _;
    let raft = &service.raft;
    let leader = raft.metrics().borrow_watched().current_leader;
    if leader != Some(service.me) {
        return Response::Submitted(Submitted::NotLeader(leader));
    }
    if !service.lease.holds(raft) {
        return Response::Failed(format!(
            "node {} leads but no majority has confirmed it lately (the leader lease): send again",
            service.me
        ));
    }
    // No responder: should this node have stepped down meanwhile, the
    // batch is dropped, and the submitter sends it again to the next
    // leader when its batches stop being applied.
    match raft.client_write_ff(batch, None).await {
        Ok(()) => Response::Submitted(Submitted::Accepted),
        Err(e) => Response::Failed(e.to_string()),
    }
}
