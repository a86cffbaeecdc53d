//! Writes: each one prepared by the session runs on its own task; the
//! connection's write sequencer hashes passwords in the password pool and
//! submits commands in the order they were read; pre-read and post-read
//! controls (RFC 4527) are answered from the write's own transaction.

use std::sync::Arc;
use std::time::Instant;

use meridian_ber::Tag;
use meridian_directory::{Directory, Identity, Outcome};
use meridian_proto::controls::oid as control_oid;
use meridian_proto::{ProtocolOp, ResultCode};

use super::controls::RequestControls;
use super::reply::{
    Reply, ResponseControl, encode_response, log_access, op_dn, policy_refusal_control,
};
use super::{Action, Session};
use crate::ServerContext;
use crate::inflight::{InFlight, Kind};
use crate::outbound::{Outbound, ResponseBatch};

impl Session {
    /// The write answering `reply`'s request on the entry `dn`, tracked
    /// for Abandon and Cancel from now on.
    pub(super) fn spawned_write(
        &mut self,
        reply: &Reply<'_>,
        out: &Arc<Outbound>,
        dn: &[u8],
    ) -> SpawnedWrite {
        SpawnedWrite {
            directory: Arc::clone(&reply.ctx.directory),
            outbound: Arc::clone(out),
            access_log: reply.ctx.access_log,
            conn: self.conn_id,
            id: reply.id,
            tag: reply.tag,
            op_name: reply.op_name,
            dn: dn.to_vec(),
            identity: self.identity.clone(),
            read_back: None,
            success_value: None,
            transaction: None,
            guard_failure: None,
            policy_control: reply.policy_control,
            in_flight: self.running.start(reply.id, Kind::Write),
            started: reply.started,
        }
    }

    /// Hands a write to the connection's write sequencer, which applies a
    /// connection's writes in the order they were read.
    pub(super) fn queue_pending(
        &mut self,
        ctx: &ServerContext,
        spawned: SpawnedWrite,
        pending: Pending,
    ) -> Action {
        let queue = self.writes.get_or_insert_with(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let first_wins = ctx.cluster_hooks.as_ref().is_some_and(|h| h.0.first_wins());
            tokio::spawn(sequence_writes(rx, ctx.password_pool.clone(), first_wins));
            tx
        });
        if let Err(failed) = queue.send((spawned, pending)) {
            let (spawned, _) = failed.0;
            spawned.respond(Outcome::new(
                ResultCode::UNAVAILABLE,
                "the connection is closing",
            ));
        }
        Action::Spawned
    }
}

/// A write running on its own task.
pub(super) struct SpawnedWrite {
    pub(super) directory: Arc<Directory>,
    pub(super) outbound: Arc<Outbound>,
    pub(super) access_log: bool,
    pub(super) conn: u64,
    pub(super) id: i32,
    pub(super) tag: Tag,
    pub(super) op_name: &'static str,
    pub(super) dn: Vec<u8>,
    /// Who asked: a noSuchObject's matchedDN is cut to what they may see.
    pub(super) identity: Identity,
    /// The pre-read and post-read controls asked for, if any.
    pub(super) read_back: Option<ReadBackRequest>,
    /// For an extended operation: the responseValue sent on success.
    pub(super) success_value: Option<Vec<u8>>,
    /// For End Transaction: the message IDs of the transaction's updates,
    /// in order (a failure's response names the one that failed).
    pub(super) transaction: Option<Vec<i32>>,
    /// The answer instead of assertionFailed when the write's own guard
    /// fails (Password Modify's, not a client's assertion control).
    pub(super) guard_failure: Option<Outcome>,
    /// The request carried the password policy control.
    pub(super) policy_control: bool,
    /// Marked finished once the response is queued.
    pub(super) in_flight: Arc<InFlight>,
    pub(super) started: Instant,
}

impl SpawnedWrite {
    /// Sends the write's response and logs it.
    pub(super) fn respond(self, outcome: Outcome) {
        self.respond_with(outcome, Vec::new());
    }

    /// The pre-read and post-read response controls: `(OID, value)`.
    pub(super) fn read_back_controls(
        &self,
        pre: Option<Box<meridian_model::entry::Entry>>,
        post: Option<Box<meridian_model::entry::Entry>>,
    ) -> Vec<ResponseControl> {
        let Some(request) = &self.read_back else {
            return Vec::new();
        };
        let mut controls = Vec::new();
        for (oid, wanted, entry) in [
            (control_oid::PRE_READ, &request.pre, pre),
            (control_oid::POST_READ, &request.post, post),
        ] {
            if let (Some(attributes), Some(entry)) = (wanted, entry) {
                let value = self.directory.read_entry_value(
                    &self.identity,
                    &entry,
                    attributes.iter().map(Vec::as_slice),
                );
                controls.push((oid, value));
            }
        }
        controls
    }

    /// Sends the write's response, with `controls` (`(OID, value)`; and
    /// the password policy's when it refused the write and was asked
    /// for), and logs it.
    pub(super) fn respond_with(self, outcome: Outcome, controls: Vec<ResponseControl>) {
        self.respond_fully(outcome, controls, None);
    }

    /// Sends the response to a store error: for End Transaction, naming
    /// the update that failed the transaction.
    fn respond_to_error(self, error: meridian_store::StoreError) {
        let failed = match (&self.transaction, &error) {
            (Some(ids), meridian_store::StoreError::InTransaction { at, .. }) => {
                super::transaction::failure_value(ids, *at)
            }
            _ => None,
        };
        let outcome: Outcome = error.into();
        let outcome = match &self.guard_failure {
            Some(instead) if outcome.code == ResultCode::ASSERTION_FAILED => instead.clone(),
            _ => outcome,
        };
        self.respond_fully(outcome, Vec::new(), failed);
    }

    /// [`SpawnedWrite::respond_with`], with `failed_value` as the
    /// responseValue of a failure.
    fn respond_fully(
        self,
        outcome: Outcome,
        mut controls: Vec<ResponseControl>,
        failed_value: Option<Vec<u8>>,
    ) {
        let outcome = self.directory.disclose(&self.identity, outcome);
        let mut batch = ResponseBatch::default();
        controls.extend(policy_refusal_control(self.policy_control, &outcome));
        let value = match outcome.code {
            ResultCode::SUCCESS => self.success_value.as_deref(),
            _ => failed_value.as_deref(),
        };
        encode_response(
            &mut batch.bytes,
            self.id,
            self.tag,
            &outcome,
            value,
            &controls,
        );
        batch.completed = 1;
        self.outbound.push(&mut batch);
        self.in_flight.finish();
        log_access(
            self.access_log,
            self.conn,
            self.id,
            self.op_name,
            &self.dn,
            Some(outcome.code),
            self.started,
        );
    }
}

/// The attribute selections of the pre-read and post-read controls
/// (RFC 4527) of one update; `None` for a control not asked for (or not
/// critical and not applicable).
#[derive(Debug, Default)]
pub(super) struct ReadBackRequest {
    pub(super) pre: Option<Vec<Vec<u8>>>,
    pub(super) post: Option<Vec<Vec<u8>>>,
}

/// The pre-read and post-read controls of an update (their values
/// checked and the operations they apply to decided by the control
/// table): a control asking for an entry the caller may not read is
/// ignored when not critical (RFC 4511 section 4.1.11), and refuses the
/// operation when critical (insufficientAccessRights).
pub(super) fn read_back_request(
    controls: &RequestControls<'_>,
    op: &ProtocolOp<'_>,
    who: &Identity,
    directory: &Directory,
) -> Result<Option<ReadBackRequest>, (ResultCode, String)> {
    let mut request = ReadBackRequest::default();
    for (slot, name, control) in [
        (&mut request.pre, "pre-read", controls.pre_read),
        (&mut request.post, "post-read", controls.post_read),
    ] {
        let Some(control) = control else {
            continue;
        };
        if !directory.may_read(who, op_dn(op)) {
            if control.critical {
                return Err((
                    ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
                    format!("the {name} control needs read access to the entry"),
                ));
            }
            continue;
        }
        *slot = Some(control.attributes.iter().map(<[u8]>::to_vec).collect());
    }
    Ok((request.pre.is_some() || request.post.is_some()).then_some(request))
}

/// A connection's writes, taken in the order they were read: password
/// hashing (blocking pool) and submission to the store happen one write
/// at a time, so the store applies them in that order (a pipelined parent
/// is added before its children); waiting for each commit happens on its
/// own task, so answers still leave as soon as their batch commits.
/// A write's command, or the slow work that makes it (run in the write's
/// turn on the blocking pool).
pub(super) enum Pending {
    Ready(meridian_store::Command),
    Blocking(MakeCommand),
    /// Like `Blocking`, but it reads what the connection's earlier
    /// writes wrote: it runs once they have committed.
    AfterEarlier(MakeCommand),
}

pub(super) type MakeCommand = Box<dyn FnOnce() -> Result<meridian_store::Command, Outcome> + Send>;

pub(super) async fn sequence_writes(
    mut queue: tokio::sync::mpsc::UnboundedReceiver<(SpawnedWrite, Pending)>,
    password_pool: crate::password_pool::PasswordPool,
    first_wins: bool,
) {
    // Under first-wins: the entryCSN each entry will have once this
    // connection's writes to it still on their way have applied.
    let mut ours = OwnWrites::default();
    // The tasks waiting for submitted writes to commit. Finished ones
    // are dropped whenever the list has doubled since the last sweep: a
    // sweep per write made each write pay for every other in flight.
    let mut committing: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let mut sweep_at = 64;
    while let Some((write, pending)) = queue.recv().await {
        if committing.len() >= sweep_at {
            committing.retain(|task| !task.is_finished());
            sweep_at = (2 * committing.len()).max(64);
        }
        let pending = match pending {
            // Password hashing is deliberately slow: keep it off the workers.
            Pending::Ready(command) if write.directory.needs_hashing(&command) => {
                let directory = Arc::clone(&write.directory);
                let who = write.identity.clone();
                Pending::Blocking(Box::new(move || directory.hash_passwords(&who, command)))
            }
            other => other,
        };
        let make = match pending {
            Pending::Ready(command) => Ok(command),
            Pending::Blocking(make) => Err(make),
            Pending::AfterEarlier(make) => {
                for task in committing.drain(..) {
                    let _ = task.await;
                }
                Err(make)
            }
        };
        let command = match make {
            Ok(command) => command,
            Err(make) => match password_pool.run(make).await {
                Some(Ok(command)) => command,
                Some(Err(outcome)) => {
                    write.respond(outcome);
                    continue;
                }
                None => {
                    write.respond(Outcome::new(
                        ResultCode::OTHER,
                        "the write's password hashing failed",
                    ));
                    continue;
                }
            },
        };
        let (command, applied) = if first_wins {
            let target = command.target().map(|dn| dn.normalized().to_owned());
            let earlier = target.as_deref().and_then(|dn| ours.pending_csn(dn));
            match write.directory.first_wins(command, earlier) {
                Ok((command, writes)) => {
                    let applied = match (target, writes) {
                        (Some(dn), Some(csn)) => Some(ours.note(dn, csn)),
                        _ => None,
                    };
                    (command, applied)
                }
                Err(outcome) => {
                    write.respond(outcome);
                    continue;
                }
            }
        } else {
            (command, None)
        };
        match write.directory.submit(command).await {
            Ok(submitted) => {
                committing.push(tokio::spawn(async move {
                    let result = submitted.wait().await;
                    if let Some(applied) = applied {
                        applied.store(true, std::sync::atomic::Ordering::Release);
                    }
                    match result {
                        Ok(meridian_store::Effect::ReadBack { pre, post, .. }) => {
                            let controls = write.read_back_controls(pre, post);
                            write.respond_with(Outcome::success(), controls);
                        }
                        Ok(_) => write.respond(Outcome::success()),
                        Err(e) => write.respond_to_error(e),
                    }
                }));
            }
            Err(outcome) => write.respond(outcome),
        }
    }
}

/// Under first-wins, a connection's writes still on their way, by the
/// entry they write: the entryCSN each will leave, so the connection's
/// next write to that entry is prepared against it rather than against
/// what the store shows now (the earlier write may not have applied yet).
#[derive(Default)]
struct OwnWrites {
    by_dn: std::collections::HashMap<String, (Vec<u8>, Arc<std::sync::atomic::AtomicBool>)>,
    /// The size at which finished writes are next dropped (doubling, as
    /// the sequencer's own sweep: not a pass over the map per write).
    sweep_at: usize,
}

impl OwnWrites {
    /// The entryCSN this connection's last write to `dn` will leave, if
    /// that write has not finished.
    fn pending_csn(&self, dn: &str) -> Option<Vec<u8>> {
        self.by_dn
            .get(dn)
            .filter(|(_, done)| !done.load(std::sync::atomic::Ordering::Acquire))
            .map(|(csn, _)| csn.clone())
    }

    /// Notes a write to `dn` leaving `csn`; the flag is set once it has
    /// finished. Finished entries are dropped as the map grows.
    fn note(&mut self, dn: String, csn: Vec<u8>) -> Arc<std::sync::atomic::AtomicBool> {
        if self.by_dn.len() >= self.sweep_at.max(64) {
            self.by_dn
                .retain(|_, (_, done)| !done.load(std::sync::atomic::Ordering::Acquire));
            self.sweep_at = (2 * self.by_dn.len()).max(64);
        }
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        self.by_dn.insert(dn, (csn, Arc::clone(&done)));
        done
    }
}
