//! One LDAP session's state and the dispatch of its requests (here); the
//! operations live beside it: `bind`, `search`, `writes`, `extended`,
//! `controls`, and `reply` for the final responses.
//!
//! `handle` answers what it can at once straight into the connection's
//! batch: reads (compare, the first step of a search, the root DSE and
//! cn=Subschema), refusals, and the extended operations that need no
//! store. The rest leaves the reader as an [`Action`]:
//! - a simple bind hands its password check back to the connection
//!   ([`Action::VerifyUser`], [`Action::VerifyAdmin`]), which runs it in
//!   the password pool under bind protection, processing nothing else
//!   meanwhile (RFC 4511 4.2.1);
//! - a write is prepared here and queued with the connection's write
//!   sequencer (`sequence_writes`), which hashes passwords in the pool and
//!   submits to the store in the order the writes were read; each answer
//!   is pushed when its batch is durable ([`Action::Spawned`]);
//! - a search larger than one step continues as a `StreamedSearch` on its
//!   own task, in steps that wait for the client to read and yield to
//!   other work ([`Action::Spawned`]).

mod bind;
mod compare;
mod controls;
mod extended;
mod follow;
mod reply;
mod search;
mod transaction;
mod writes;

pub(crate) use self::bind::BindAnswer;
pub(crate) use self::transaction::TransactionLimits;

use std::sync::Arc;
use std::time::Instant;

use meridian_directory::Identity;
use meridian_model::dn::Dn;
use meridian_proto::extended::oid as extended_oid;
use meridian_proto::{LdapMessage, ProtocolOp, ResultCode};

use self::controls::{RequestControls, SUPPORTED_CONTROLS, referral_answer};
use self::reply::{Detail, Reply, log_access, op_description, op_dn, response_tag};
use self::writes::{Pending, SpawnedWrite, read_back_request};
use crate::ServerContext;
use crate::inflight::{Kind, Running, Stop};
use crate::outbound::{Outbound, ResponseBatch};

/// The OIDs of the request controls served: the root DSE's
/// `supportedControl`, from the one table ([`SUPPORTED_CONTROLS`]).
pub(crate) fn supported_control_oids() -> Vec<&'static [u8]> {
    SUPPORTED_CONTROLS.iter().map(|c| c.oid).collect()
}

/// What the connection must do after [`Session::handle`].
#[derive(Debug)]
pub(crate) enum Action {
    /// The operation's final response is in the batch.
    Responded,
    /// The request needs no response (abandon).
    NoResponse,
    /// Verify `password` for the administrator, then call
    /// [`Session::finish_admin_bind`].
    VerifyAdmin {
        message_id: i32,
        password: Vec<u8>,
        started: Instant,
    },
    /// Verify `password` against a user's stored values, then call
    /// [`Session::finish_user_bind`].
    VerifyUser {
        message_id: i32,
        dn: Dn,
        /// Its passwords and password policy state.
        target: Box<meridian_directory::policy::BindTarget>,
        password: Vec<u8>,
        started: Instant,
        /// The bind asked for the password policy response control.
        wants_policy: bool,
    },
    /// A write was handed to a task; it answers through the outbound
    /// buffer itself and returns its permit then.
    Spawned,
    /// The client ended the session.
    Unbind,
    /// The client broke the protocol: Notice of Disconnection and close.
    Disconnect(&'static str),
    /// StartTLS, allowed so far: the connection checks that nothing else
    /// is outstanding, then calls [`Session::finish_start_tls`] and, on
    /// success, starts the handshake.
    StartTls { message_id: i32, started: Instant },
}

/// Per-connection LDAP state.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) conn_id: u64,
    /// Who the client is (RFC 4513 authorization identity).
    identity: Identity,
    /// The bound user's password was reset and must be changed before
    /// anything else ([`Session::reset_restriction`]).
    must_change_password: bool,
    /// The connection's write sequencer, started at its first write.
    writes: Option<tokio::sync::mpsc::UnboundedSender<(SpawnedWrite, Pending)>>,
    /// Streamed searches and writes still running, for Abandon and Cancel.
    running: Running,
    /// The connection is under TLS (`ldaps://`, or after StartTLS).
    pub(crate) tls: bool,
    /// Who the kernel says the client is, on an `ldapi://` connection.
    pub(crate) peer_credentials: Option<crate::ldapi::PeerCredentials>,
    /// The client certificate the TLS handshake verified, if any.
    pub(crate) client_certificate: Option<meridian_directory::certificate::ClientCertificate>,
    /// The open LDAP transaction (RFC 5805), if any.
    transaction: Option<transaction::Transaction>,
    /// Transactions started on this connection: the next one's identifier.
    transactions_started: u64,
    /// Searches following changes on this connection
    /// (`server.max_followers_per_connection`), counted by their tasks.
    following: Arc<std::sync::atomic::AtomicUsize>,
}

impl Session {
    pub(crate) fn new(conn_id: u64) -> Self {
        Session {
            conn_id,
            identity: Identity::Anonymous,
            must_change_password: false,
            writes: None,
            running: Running::default(),
            tls: false,
            client_certificate: None,
            peer_credentials: None,
            transaction: None,
            transactions_started: 0,
            following: Arc::default(),
        }
    }

    /// Whether a search on this connection follows changes: the
    /// connection is not idle, however long it sends no request.
    pub(crate) fn is_following(&self) -> bool {
        self.following.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// Whether what the client sends stays private: under TLS, or on
    /// `ldapi://`, which never leaves the host (`security.require_tls`
    /// asks no more of it, as slapd gives ldapi a local security strength).
    fn confidential(&self) -> bool {
        self.tls || self.peer_credentials.is_some()
    }

    /// Abandons the searches still running: the connection ends.
    pub(crate) fn abandon_searches(&self) {
        self.running.abandon_searches();
    }

    /// Under `security.require_tls`, why `op` is refused on this
    /// connection (confidentialityRequired): a write, or a Password
    /// Modify, without TLS. Binds are checked in [`Session::bind`].
    fn needs_tls(&self, ctx: &ServerContext, op: &ProtocolOp<'_>) -> Option<&'static str> {
        if self.confidential() || !ctx.require_tls {
            return None;
        }
        match op {
            ProtocolOp::AddRequest(_)
            | ProtocolOp::DelRequest(_)
            | ProtocolOp::ModifyRequest(_)
            | ProtocolOp::ModifyDnRequest(_) => {
                Some("security.require_tls: writes need TLS (StartTLS or ldaps://)")
            }
            ProtocolOp::ExtendedRequest(ext) if ext.name == extended_oid::PASSWORD_MODIFY => {
                Some("security.require_tls: password changes need TLS (StartTLS or ldaps://)")
            }
            _ => None,
        }
    }

    /// True once a bind has proved an identity (larger PDUs are allowed).
    pub(crate) fn is_bound(&self) -> bool {
        !matches!(self.identity, Identity::Anonymous)
    }

    /// Dispatches one decoded request: its controls parsed once
    /// ([`RequestControls`]); under the proxied authorization control
    /// (RFC 4370) it runs as the identity the control names.
    pub(crate) fn handle(
        &mut self,
        ctx: &ServerContext,
        out: &Arc<Outbound>,
        msg: &LdapMessage<'_>,
        batch: &mut ResponseBatch,
        started: Instant,
    ) -> Action {
        if msg.message_id == 0 {
            return Action::Disconnect("messageID 0 is reserved for unsolicited notifications");
        }
        let Some(tag) = response_tag(&msg.op) else {
            return self.without_response(ctx, msg, started);
        };
        let op = &msg.op;
        let mut reply = Reply {
            ctx,
            session_conn: self.conn_id,
            batch,
            id: msg.message_id,
            tag,
            op_name: op.name(),
            started,
            detail: Detail::of(op),
            policy_control: false,
        };
        let depth = meridian_proto::Depth::new(ctx.limits.max_depth);
        let controls = match RequestControls::parse(msg, depth) {
            Ok(controls) => controls,
            Err((code, message)) => return reply.result(op_dn(op), code, message.as_bytes()),
        };
        reply.batch.bundle += controls.queue_length;
        reply.policy_control = controls.password_policy;
        // The bound user's restriction, before any proxied identity: a
        // user who must change a reset password may not act as another
        // either (slapd checks the connection's DN too).
        if self.must_change_password
            && let Some(refusal) = self.reset_restriction(ctx, op)
        {
            return reply.outcome(op_dn(op), &refusal);
        }
        let ends_transaction = matches!(op, ProtocolOp::ExtendedRequest(ext) if ext.name == extended_oid::END_TRANSACTION);
        if ends_transaction && controls.proxied_authz.is_some() {
            return reply.result(
                op_dn(op),
                ResultCode::PROTOCOL_ERROR,
                b"proxied authorization goes with Start Transaction, not End Transaction (RFC 5805 section 4.4)",
            );
        }
        if let Some(id) = controls.transaction {
            // RFC 5805 section 4.4: a transaction's updates run as the
            // identity it was started with, never one of their own.
            if controls.proxied_authz.is_some() {
                return reply.result(
                    op_dn(op),
                    ResultCode::PROTOCOL_ERROR,
                    b"proxied authorization goes with Start Transaction, not with an update of the transaction (RFC 5805 section 4.4)",
                );
            }
            if let Some(started_as) = self.transaction_identity(id) {
                let own = std::mem::replace(&mut self.identity, started_as);
                let action = self.handle_op(ctx, out, msg, &controls, reply);
                self.identity = own;
                return action;
            }
        }
        let Some((_, authz_id)) = controls.proxied_authz else {
            return self.handle_op(ctx, out, msg, &controls, reply);
        };
        let proxied = match ctx.directory.proxied_identity(&self.identity, authz_id) {
            Ok(identity) => identity,
            Err(outcome) => {
                return reply.result(op_dn(op), outcome.code, outcome.message.as_bytes());
            }
        };
        // For this operation only: writes and streamed searches take their
        // own copy of the identity before `handle_op` returns.
        let own = std::mem::replace(&mut self.identity, proxied);
        let action = self.handle_op(ctx, out, msg, &controls, reply);
        self.identity = own;
        action
    }

    /// Unbind and Abandon, which have no response (and any response PDU
    /// a client sends, which ends the session).
    fn without_response(
        &mut self,
        ctx: &ServerContext,
        msg: &LdapMessage<'_>,
        started: Instant,
    ) -> Action {
        let id = msg.message_id;
        match &msg.op {
            ProtocolOp::UnbindRequest => {
                self.log(ctx, id, "UNBIND", b"", None, started);
                Action::Unbind
            }
            ProtocolOp::AbandonRequest(target) => {
                // Only a streamed search can still be stopped (other reads
                // complete before the next request is read; a submitted
                // write runs to its end). RFC 4511 section 4.11: no
                // response either way.
                let stopped = self
                    .running
                    .get(*target)
                    .is_some_and(|op| op.kind() == Kind::Search && op.request_stop(Stop::Abandon));
                tracing::debug!(conn = self.conn_id, msgid = id, target, stopped, "abandon");
                Action::NoResponse
            }
            _ => Action::Disconnect("clients must not send response PDUs"),
        }
    }

    fn handle_op(
        &mut self,
        ctx: &ServerContext,
        out: &Arc<Outbound>,
        msg: &LdapMessage<'_>,
        controls: &RequestControls<'_>,
        reply: Reply<'_>,
    ) -> Action {
        let op = &msg.op;
        if let Some(why) = self.needs_tls(ctx, op) {
            return reply.result(
                op_dn(op),
                ResultCode::CONFIDENTIALITY_REQUIRED,
                why.as_bytes(),
            );
        }
        let assertion = controls.assertion.as_ref().map(|(filter, _)| filter);
        let manage_dsa_it = controls.manage_dsa_it;
        if let Some(action) = referral_answer(op, manage_dsa_it, &ctx.directory) {
            return match action {
                Ok(outcome) | Err(outcome) => reply.outcome(op_dn(op), &outcome),
            };
        }
        let prepared = match op {
            ProtocolOp::BindRequest(bind) => {
                return self.bind(bind, controls.password_policy, reply);
            }
            ProtocolOp::SearchRequest(search) => {
                if let Some(filter) = &assertion
                    && let Err(outcome) =
                        ctx.directory
                            .check_assertion(&self.identity, search.base, filter)
                {
                    return reply.outcome(search.base, &outcome);
                }
                return self.search_request(search, controls, reply, out);
            }
            ProtocolOp::ExtendedRequest(ext) => return self.extended(ext, reply, out),
            ProtocolOp::CompareRequest(cmp) => {
                let assertion = controls
                    .assertion
                    .as_ref()
                    .map(|(filter, encoded)| (filter, *encoded));
                return self.compare_request(cmp, assertion, reply, out);
            }
            ProtocolOp::AddRequest(add) if controls.relax => {
                ctx.directory.prepare_add_relaxed(&self.identity, add)
            }
            ProtocolOp::AddRequest(add) => ctx.directory.prepare_add(&self.identity, add),
            ProtocolOp::DelRequest(dn) => {
                ctx.directory
                    .prepare_delete(&self.identity, dn, controls.subtree_delete)
            }
            ProtocolOp::ModifyRequest(m) if controls.relax => {
                ctx.directory
                    .prepare_modify_relaxed(&self.identity, m, controls.permissive_modify)
            }
            ProtocolOp::ModifyRequest(m) => {
                ctx.directory
                    .prepare_modify(&self.identity, m, controls.permissive_modify)
            }
            ProtocolOp::ModifyDnRequest(m) => ctx.directory.prepare_modify_dn(&self.identity, m),
            _ => {
                let message = format!("{} is not supported", op_description(op));
                return reply.result(
                    op_dn(op),
                    ResultCode::UNWILLING_TO_PERFORM,
                    message.as_bytes(),
                );
            }
        };
        let prepared = match (prepared, &controls.assertion) {
            (Ok(command), Some((filter, encoded))) => ctx
                .directory
                .check_assertion_access(&self.identity, op_dn(op), filter)
                .map(|()| meridian_store::Command::Guarded {
                    assertion: encoded.to_vec(),
                    command: Box::new(command),
                }),
            (other, _) => other,
        };
        let read_back = match read_back_request(controls, op, &self.identity, &ctx.directory) {
            Ok(read_back) => read_back,
            Err((code, message)) => return reply.result(op_dn(op), code, message.as_bytes()),
        };
        if let Some(id) = controls.transaction {
            if read_back.is_some() {
                return reply.result(
                    op_dn(op),
                    ResultCode::UNWILLING_TO_PERFORM,
                    b"cannot perform pre-read or post-read in a transaction",
                );
            }
            return match prepared {
                Err(outcome) => reply.outcome(op_dn(op), &outcome),
                Ok(command) => self.hold_in_transaction(id, command, op_dn(op), reply),
            };
        }
        let prepared = prepared.map(|command| match &read_back {
            Some(r) => meridian_store::Command::ReadBack {
                pre: r.pre.is_some(),
                post: r.post.is_some(),
                command: Box::new(command),
            },
            None => command,
        });
        match prepared {
            Err(outcome) => reply.outcome(op_dn(op), &outcome),
            Ok(command) => {
                // The write runs on its own task so the connection keeps
                // reading (pipelining); its answer goes straight to the
                // outbound buffer, possibly out of order.
                let mut spawned = self.spawned_write(&reply, out, op_dn(op));
                spawned.read_back = read_back;
                self.queue_pending(reply.ctx, spawned, Pending::Ready(command))
            }
        }
    }

    fn log(
        &self,
        ctx: &ServerContext,
        id: i32,
        op: &str,
        dn: &[u8],
        code: Option<ResultCode>,
        started: Instant,
    ) {
        log_access(ctx.access_log, self.conn_id, id, op, dn, code, started);
    }
}
