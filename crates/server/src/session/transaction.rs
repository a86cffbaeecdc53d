//! LDAP transactions (RFC 5805), as slapd serves them: Start Transaction
//! opens one per connection (a second is `busy`); each update carrying
//! the transaction specification control is checked as any update is
//! (syntax, schema, rights), held by the session and answered success at
//! once; End Transaction with commit hands the held updates to the store
//! as one command, applied all or none in one store transaction (and one
//! Raft log entry in a cluster), answered once durable; an update that
//! fails there fails the whole, and the response names its message ID.
//!
//! Bounded: `server.max_transaction_updates` and
//! `server.max_transaction_bytes` per transaction (one more is refused,
//! the transaction goes on without it), one transaction per connection,
//! and `server.transaction_timeout_secs`, past which it is aborted and
//! the next request naming it gets an Aborted Transaction notice.
//!
//! A transaction runs as the identity that started it (proxied
//! authorization goes with Start Transaction, RFC 5805 section 4.4); a
//! bind aborts it (section 3.5).
//!
//! As in slapd: no pre-read or post-read control in a transaction
//! (unwillingToPerform), no transaction across naming contexts
//! (affectsMultipleDSAs), and an unknown identifier is `txnIdInvalid`
//! (16673, OpenLDAP's code).

use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian_proto::extended::{
    EndTransactionRequest, encode_end_transaction_failure, oid as extended_oid,
};
use meridian_proto::{ExtendedRequest, LdapMessage, LdapResult, ProtocolOp, ResultCode};
use meridian_store::Command;

use super::reply::Reply;
use super::writes::Pending;
use super::{Action, Session};
use crate::outbound::{Outbound, ResponseBatch};

/// `server.max_transaction_*` and `server.transaction_timeout_secs`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransactionLimits {
    pub(crate) max_updates: usize,
    pub(crate) max_bytes: usize,
    pub(crate) timeout: Duration,
}

/// A connection's open transaction.
#[derive(Debug)]
pub(super) struct Transaction {
    /// What Start Transaction answered; End Transaction and each update
    /// name it.
    id: Vec<u8>,
    opened: Instant,
    /// Who started it (under proxied authorization, the identity the
    /// control named): its updates are checked as this identity.
    identity: meridian_directory::Identity,
    /// The held updates with the message IDs they came in.
    updates: Vec<(i32, Command)>,
    /// Their DNs' and values' bytes (`server.max_transaction_bytes`).
    bytes: usize,
}

impl Session {
    /// Start Transaction: a new identifier, unless one is open already.
    pub(super) fn start_transaction(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
    ) -> Action {
        if ext.value.is_some() {
            return reply.extended(
                ResultCode::PROTOCOL_ERROR,
                b"a Start Transaction request has no value",
                None,
            );
        }
        if self.transaction.is_some() {
            return reply.extended(
                ResultCode::BUSY,
                b"a transaction is already open on this connection (one at a time): end it first",
                None,
            );
        }
        self.transactions_started += 1;
        let id = self.transactions_started.to_string().into_bytes();
        let opened = reply.started;
        let answer = reply.extended(ResultCode::SUCCESS, b"", Some(&id));
        self.transaction = Some(Transaction {
            id,
            identity: self.identity.clone(),
            opened,
            updates: Vec::new(),
            bytes: 0,
        });
        answer
    }

    /// The identity the open transaction `id` runs as, if it is open.
    pub(super) fn transaction_identity(&self, id: &[u8]) -> Option<meridian_directory::Identity> {
        self.transaction
            .as_ref()
            .filter(|t| t.id == id)
            .map(|t| t.identity.clone())
    }

    /// An update with the transaction specification control naming `id`,
    /// prepared (`command`): held, and answered success.
    pub(super) fn hold_in_transaction(
        &mut self,
        id: &[u8],
        command: Command,
        dn: &[u8],
        reply: Reply<'_>,
    ) -> Action {
        let limits = reply.ctx.transactions;
        let transaction = match self.open_transaction(id, limits, reply.batch) {
            Ok(transaction) => transaction,
            Err((code, message)) => return reply.result(dn, code, message.as_bytes()),
        };
        if let Some((_, first)) = transaction.updates.first()
            && !reply.ctx.directory.same_context(first, &command)
        {
            return reply.result(
                dn,
                ResultCode::AFFECTS_MULTIPLE_DSAS,
                b"a transaction cannot span naming contexts: each is its own database",
            );
        }
        if transaction.updates.len() >= limits.max_updates {
            let message = format!(
                "the transaction holds {} updates, its most (server.max_transaction_updates); this one was not added",
                limits.max_updates
            );
            return reply.result(dn, ResultCode::ADMIN_LIMIT_EXCEEDED, message.as_bytes());
        }
        let bytes = command_bytes(&command);
        if transaction.bytes + bytes > limits.max_bytes {
            let message = format!(
                "the transaction would hold more than {} bytes of updates (server.max_transaction_bytes); this one was not added",
                limits.max_bytes
            );
            return reply.result(dn, ResultCode::ADMIN_LIMIT_EXCEEDED, message.as_bytes());
        }
        transaction.bytes += bytes;
        transaction.updates.push((reply.id, command));
        reply.result(dn, ResultCode::SUCCESS, b"")
    }

    /// End Transaction: commit (the held updates to the store, answered
    /// once durable) or abort (dropped).
    pub(super) fn end_transaction(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let request = match EndTransactionRequest::decode(ext.value) {
            Ok(request) => request,
            Err(e) => {
                let message = format!(
                    "End Transaction: {e}; the value is SEQUENCE {{ commit BOOLEAN DEFAULT TRUE, identifier OCTET STRING }}"
                );
                return reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None);
            }
        };
        let limits = reply.ctx.transactions;
        if let Err((code, message)) = self.open_transaction(request.identifier, limits, reply.batch)
        {
            return reply.extended(code, message.as_bytes(), None);
        }
        let Some(transaction) = self.transaction.take() else {
            return reply.extended(ResultCode::OTHER, b"the transaction vanished", None);
        };
        if !request.commit {
            return reply.extended(ResultCode::SUCCESS, b"transaction aborted", None);
        }
        if transaction.updates.is_empty() {
            return reply.extended(ResultCode::OPERATIONS_ERROR, b"no updates to commit", None);
        }
        let (ids, commands): (Vec<i32>, Vec<Command>) = transaction.updates.into_iter().unzip();
        let mut spawned = self.spawned_write(&reply, out, b"");
        spawned.transaction = Some(ids);
        self.queue_pending(
            reply.ctx,
            spawned,
            Pending::Ready(Command::Transaction { commands }),
        )
    }

    /// The open transaction named `id`; `Err`: why the request naming it
    /// is refused. A transaction past its time is aborted here, and the
    /// client told so by an Aborted Transaction notice before the
    /// refusal.
    fn open_transaction(
        &mut self,
        id: &[u8],
        limits: TransactionLimits,
        batch: &mut ResponseBatch,
    ) -> Result<&mut Transaction, (ResultCode, String)> {
        let Some(transaction) = self.transaction.take_if(|t| t.id == id) else {
            return Err((
                ResultCode::TXN_ID_INVALID,
                "invalid transaction identifier: no such transaction is open on this connection"
                    .to_owned(),
            ));
        };
        // A session's time-out, not data: the clock read directly.
        #[allow(clippy::disallowed_methods)]
        let expired = transaction.opened.elapsed() > limits.timeout;
        if expired {
            let why = format!(
                "the transaction was open longer than {} s (server.transaction_timeout_secs) and was aborted",
                limits.timeout.as_secs()
            );
            encode_aborted_notice(&mut batch.bytes, &transaction.id, &why);
            return Err((ResultCode::TXN_ID_INVALID, why));
        }
        Ok(self.transaction.insert(transaction))
    }
}

/// The Aborted Transaction notice (RFC 5805 section 2.4): an unsolicited
/// notification, message ID 0, whose value is the identifier.
fn encode_aborted_notice(buf: &mut Vec<u8>, id: &[u8], why: &str) {
    LdapMessage {
        message_id: 0,
        op: ProtocolOp::ExtendedResponse(meridian_proto::ExtendedResponse {
            result: LdapResult::new(ResultCode::ADMIN_LIMIT_EXCEEDED, why.as_bytes()),
            name: Some(extended_oid::ABORTED_TRANSACTION),
            value: Some(id),
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(buf);
}

/// The End Transaction response's value when the update with message ID
/// `ids[at]` failed the transaction.
pub(super) fn failure_value(ids: &[i32], at: usize) -> Option<Vec<u8>> {
    let id = *ids.get(at)?;
    let mut value = Vec::new();
    encode_end_transaction_failure(&mut value, id);
    Some(value)
}

/// What an update held in a transaction costs: its DN and values.
fn command_bytes(command: &Command) -> usize {
    let values = |values: &[Vec<u8>]| values.iter().map(Vec::len).sum::<usize>();
    let dn = command.target().map_or(0, |dn| dn.original().len());
    dn + match command {
        Command::Add { entry, .. } => entry.attributes.iter().map(|a| values(&a.values)).sum(),
        Command::Modify { changes, .. } => changes.iter().map(|c| values(&c.values)).sum(),
        Command::Guarded { assertion, command } => assertion.len() + command_bytes(command),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_value_names_the_failed_updates_message_id() {
        let value = failure_value(&[7, 9, 12], 1).unwrap();
        assert_eq!(
            meridian_proto::extended::decode_end_transaction_response(&value).unwrap(),
            Some(9)
        );
        assert_eq!(failure_value(&[7], 3), None);
    }
}
