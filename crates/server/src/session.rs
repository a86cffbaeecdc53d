//! One LDAP session's state and the dispatch of its requests.
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

use std::time::Instant;

use meridian_ber::Tag;
use std::sync::Arc;

use meridian_directory::{
    Directory, Identity, Outcome, PageRequest, SearchControls, SearchCursor, Step,
};
use meridian_model::dn::Dn;
use meridian_proto::controls::{
    PagedResults, QueueLength, decode_assertion, decode_proxied_authz, decode_read_entry_request,
    oid as control_oid,
};
use meridian_proto::extended::{
    PasswordModifyRequest, RefreshRequest, decode_cancel, encode_password_modify_response,
    encode_refresh_response, oid as extended_oid,
};
use meridian_proto::message::{encode_result, tags};
use meridian_proto::{
    Authentication, BindRequest, Control, ExtendedRequest, LdapMessage, LdapResult, ProtocolOp,
    ResultCode, Scope, SearchRequest,
};

use crate::ServerContext;
use crate::inflight::{InFlight, Kind, Running, Stop};
use crate::outbound::{Batch, Outbound};

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
        stored: Vec<Vec<u8>>,
        password: Vec<u8>,
        started: Instant,
    },
    /// A write was handed to a task; it answers through the outbound
    /// buffer itself and returns its permit then.
    Spawned,
    /// The client ended the session.
    Unbind,
    /// The client broke the protocol: Notice of Disconnection and close.
    Disconnect(&'static str),
}

/// Per-connection LDAP state.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) conn_id: u64,
    /// Who the client is (RFC 4513 authorization identity).
    identity: Identity,
    /// The connection's write sequencer, started at its first write.
    writes: Option<tokio::sync::mpsc::UnboundedSender<(SpawnedWrite, Pending)>>,
    /// Streamed searches and writes still running, for Abandon and Cancel.
    running: Running,
}

impl Session {
    pub(crate) fn new(conn_id: u64) -> Self {
        Session {
            conn_id,
            identity: Identity::Anonymous,
            writes: None,
            running: Running::default(),
        }
    }

    /// True once a bind has proved an identity (larger PDUs are allowed).
    pub(crate) fn is_bound(&self) -> bool {
        !matches!(self.identity, Identity::Anonymous)
    }

    /// Dispatches one decoded request; under the proxied authorization
    /// control (RFC 4370) it runs as the identity the control names.
    pub(crate) fn handle(
        &mut self,
        ctx: &ServerContext,
        out: &Arc<Outbound>,
        msg: &LdapMessage<'_>,
        batch: &mut Batch,
        started: Instant,
    ) -> Action {
        let proxy = msg
            .controls
            .iter()
            .find(|c| c.oid == control_oid::PROXIED_AUTHZ_V2);
        let (Some(control), Some(tag)) = (proxy, response_tag(&msg.op)) else {
            return self.handle_op(ctx, out, msg, batch, started);
        };
        let refuse = |batch: &mut Batch, code: ResultCode, message: String| {
            let reply = Reply {
                ctx,
                session_conn: self.conn_id,
                batch,
                id: msg.message_id,
                tag,
                op_name: msg.op.name(),
                started,
            };
            reply.result(op_dn(&msg.op), code, message.as_bytes())
        };
        if !control.critical {
            return refuse(
                batch,
                ResultCode::PROTOCOL_ERROR,
                "the proxied authorization control must be critical (RFC 4370)".into(),
            );
        }
        if matches!(msg.op, ProtocolOp::BindRequest(_)) {
            return refuse(
                batch,
                ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                "the proxied authorization control does not apply to bind".into(),
            );
        }
        let authz_id = match decode_proxied_authz(control.value) {
            Ok(id) => id,
            Err(e) => {
                return refuse(
                    batch,
                    ResultCode::PROTOCOL_ERROR,
                    format!("proxied authorization control: {e}"),
                );
            }
        };
        let proxied = match ctx.directory.proxied_identity(&self.identity, authz_id) {
            Ok(identity) => identity,
            Err(outcome) => return refuse(batch, outcome.code, outcome.message),
        };
        // For this operation only: writes and streamed searches take their
        // own copy of the identity before `handle_op` returns.
        let own = std::mem::replace(&mut self.identity, proxied);
        let action = self.handle_op(ctx, out, msg, batch, started);
        self.identity = own;
        action
    }

    fn handle_op(
        &mut self,
        ctx: &ServerContext,
        out: &Arc<Outbound>,
        msg: &LdapMessage<'_>,
        batch: &mut Batch,
        started: Instant,
    ) -> Action {
        if msg.message_id == 0 {
            return Action::Disconnect("messageID 0 is reserved for unsolicited notifications");
        }
        let id = msg.message_id;
        let op = &msg.op;
        let Some(response_tag) = response_tag(op) else {
            return match op {
                ProtocolOp::UnbindRequest => {
                    self.log(ctx, id, "UNBIND", b"", None, started);
                    Action::Unbind
                }
                ProtocolOp::AbandonRequest(target) => {
                    // Only a streamed search can still be stopped (other
                    // reads complete before the next request is read; a
                    // submitted write runs to its end). RFC 4511 section
                    // 4.11: no response either way.
                    let stopped = self.running.get(*target).is_some_and(|op| {
                        op.kind() == Kind::Search && op.request_stop(Stop::Abandon)
                    });
                    tracing::debug!(conn = self.conn_id, msgid = id, target, stopped, "abandon");
                    Action::NoResponse
                }
                _ => Action::Disconnect("clients must not send response PDUs"),
            };
        };
        let reply = Reply {
            ctx,
            session_conn: self.conn_id,
            batch,
            id,
            tag: response_tag,
            op_name: op.name(),
            started,
        };
        match check_controls(msg) {
            Ok(bundle) => reply.batch.bundle += bundle,
            Err((code, message)) => return reply.result(op_dn(op), code, message.as_bytes()),
        }
        let permissive = msg
            .controls
            .iter()
            .any(|c| c.oid == control_oid::PERMISSIVE_MODIFY);
        // The assertion control: decoded here, checked against the target
        // (inside the write's transaction for updates).
        let assertion_control = msg
            .controls
            .iter()
            .find(|c| c.oid == control_oid::ASSERTION);
        let assertion = match assertion_control
            .map(|c| decode_assertion(c.value, meridian_proto::Depth::new(ctx.limits.max_depth)))
        {
            None => None,
            Some(Ok(filter)) => Some(filter),
            Some(Err(e)) => {
                let message = format!("assertion control: {e}");
                return reply.result(op_dn(op), ResultCode::PROTOCOL_ERROR, message.as_bytes());
            }
        };
        let manage_dsa_it = msg
            .controls
            .iter()
            .any(|c| c.oid == control_oid::MANAGE_DSA_IT);
        if let Some(action) = referral_answer(op, manage_dsa_it, &ctx.directory) {
            return match action {
                Ok(outcome) | Err(outcome) => reply.outcome(op_dn(op), &outcome),
            };
        }
        let prepared = match op {
            ProtocolOp::BindRequest(bind) => return self.bind(bind, reply),
            ProtocolOp::SearchRequest(search) => {
                if let Some(filter) = &assertion {
                    if let Err(outcome) =
                        ctx.directory
                            .check_assertion(&self.identity, search.base, filter)
                    {
                        return reply.outcome(search.base, &outcome);
                    }
                }
                return self.search_request(search, &msg.controls, manage_dsa_it, reply, out);
            }
            ProtocolOp::ExtendedRequest(ext) => return self.extended(ext, reply, out),
            ProtocolOp::CompareRequest(cmp) => {
                if let Some(filter) = &assertion {
                    if let Err(outcome) =
                        ctx.directory
                            .check_assertion(&self.identity, cmp.dn, filter)
                    {
                        return reply.outcome(cmp.dn, &outcome);
                    }
                }
                let outcome = ctx.directory.compare(&self.identity, cmp);
                return reply.outcome(cmp.dn, &outcome);
            }
            ProtocolOp::AddRequest(add) => ctx.directory.prepare_add(&self.identity, add),
            ProtocolOp::DelRequest(dn) => {
                let subtree = msg
                    .controls
                    .iter()
                    .any(|c| c.oid == control_oid::SUBTREE_DELETE);
                ctx.directory.prepare_delete(&self.identity, dn, subtree)
            }
            ProtocolOp::ModifyRequest(m) => {
                ctx.directory.prepare_modify(&self.identity, m, permissive)
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
        let prepared = match (prepared, assertion_control, &assertion) {
            (Ok(command), Some(control), Some(filter)) => ctx
                .directory
                .check_assertion_access(&self.identity, op_dn(op), filter)
                .map(|()| meridian_store::Command::Guarded {
                    assertion: control.value.unwrap_or_default().to_vec(),
                    command: Box::new(command),
                }),
            (other, _, _) => other,
        };
        let read_back = match read_back_request(msg, op, &self.identity, &ctx.directory) {
            Ok(read_back) => read_back,
            Err((code, message)) => return reply.result(op_dn(op), code, message.as_bytes()),
        };
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

    /// The write answering `reply`'s request on the entry `dn`, tracked
    /// for Abandon and Cancel from now on.
    fn spawned_write(&mut self, reply: &Reply<'_>, out: &Arc<Outbound>, dn: &[u8]) -> SpawnedWrite {
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
            guard_failure: None,
            in_flight: self.running.start(reply.id, Kind::Write),
            started: reply.started,
        }
    }

    /// Hands a write to the connection's write sequencer, which applies a
    /// connection's writes in the order they were read.
    fn queue_pending(
        &mut self,
        ctx: &ServerContext,
        spawned: SpawnedWrite,
        pending: Pending,
    ) -> Action {
        let queue = self.writes.get_or_insert_with(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(sequence_writes(rx, ctx.password_pool.clone()));
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

    fn bind(&mut self, bind: &BindRequest<'_>, reply: Reply<'_>) -> Action {
        // RFC 4513 section 5: a bind, whatever its outcome, first drops the
        // current authorization.
        self.identity = Identity::Anonymous;
        if bind.version != 3 {
            return reply.result(
                bind.name,
                ResultCode::PROTOCOL_ERROR,
                b"only LDAP version 3 is supported",
            );
        }
        let password = match bind.auth {
            Authentication::Simple(password) => password,
            Authentication::Sasl { mechanism, .. } => {
                let message = format!(
                    "SASL mechanism {:?} is not supported (no SASL mechanisms are offered yet)",
                    String::from_utf8_lossy(mechanism)
                );
                return reply.result(
                    bind.name,
                    ResultCode::AUTH_METHOD_NOT_SUPPORTED,
                    message.as_bytes(),
                );
            }
        };
        match (bind.name.is_empty(), password.is_empty()) {
            (true, true) => return reply.result(b"", ResultCode::SUCCESS, b""),
            (true, false) => {
                return reply.result(
                    b"",
                    ResultCode::INVALID_CREDENTIALS,
                    b"a password was given without a DN",
                );
            }
            (false, true) => {
                // RFC 4513 section 5.1.2: unauthenticated binds are refused
                // by default, since they look like success to careless apps.
                return reply.result(
                    bind.name,
                    ResultCode::UNWILLING_TO_PERFORM,
                    b"unauthenticated bind (DN with an empty password) is not allowed",
                );
            }
            (false, false) => {}
        }
        let dn = match Dn::parse(bind.name, &reply.ctx.schema) {
            Ok(dn) => dn,
            Err(e) => {
                return reply.result(
                    bind.name,
                    ResultCode::INVALID_DN_SYNTAX,
                    e.message.as_bytes(),
                );
            }
        };
        if !reply.ctx.admin.is_admin_dn(&dn) {
            return match reply.ctx.directory.bind_passwords(&dn) {
                Ok(Some(stored)) if !stored.is_empty() => Action::VerifyUser {
                    message_id: reply.id,
                    dn,
                    stored,
                    password: password.to_vec(),
                    started: reply.started,
                },
                // Unknown DN or no password: the same answer as a wrong
                // password, so binds cannot enumerate entries; counted by
                // the bind protection like one (nothing matches nothing).
                Ok(_) => Action::VerifyUser {
                    message_id: reply.id,
                    dn,
                    stored: Vec::new(),
                    password: password.to_vec(),
                    started: reply.started,
                },
                Err(outcome) => reply.outcome(bind.name, &outcome),
            };
        }
        Action::VerifyAdmin {
            message_id: reply.id,
            password: password.to_vec(),
            started: reply.started,
        }
    }

    /// The reply to a bind whose password check ran elsewhere.
    fn bind_reply<'a>(
        &self,
        ctx: &'a ServerContext,
        message_id: i32,
        batch: &'a mut Batch,
        started: Instant,
    ) -> Reply<'a> {
        Reply {
            ctx,
            session_conn: self.conn_id,
            batch,
            id: message_id,
            tag: tags::BIND_RESPONSE,
            op_name: "BIND",
            started,
        }
    }

    /// Completes a bind handed out as [`Action::VerifyAdmin`].
    pub(crate) fn finish_admin_bind(
        &mut self,
        ctx: &ServerContext,
        message_id: i32,
        verified: bool,
        batch: &mut Batch,
        started: Instant,
    ) {
        let reply = self.bind_reply(ctx, message_id, batch, started);
        let dn = ctx.admin.dn().as_bytes();
        // A bind answers success only with the identity it proved: if the
        // configured DN cannot be parsed (a schema file changed under
        // it), the session would stay anonymous while the client believes
        // it is the administrator.
        let proved = verified
            .then(|| Dn::parse(ctx.admin.dn().as_bytes(), &ctx.schema).ok())
            .flatten();
        let _ = match proved {
            Some(admin) => {
                self.identity = ctx.directory.identity_for(admin);
                reply.result(dn, ResultCode::SUCCESS, b"")
            }
            None if verified => {
                tracing::error!(dn = ctx.admin.dn(), "the administrator DN no longer parses");
                reply.result(
                    dn,
                    ResultCode::OTHER,
                    b"the configured administrator DN does not parse with the current schema",
                )
            }
            None => reply.result(dn, ResultCode::INVALID_CREDENTIALS, b""),
        };
    }

    /// Completes a bind handed out as [`Action::VerifyUser`].
    pub(crate) fn finish_user_bind(
        &mut self,
        ctx: &ServerContext,
        message_id: i32,
        dn: Dn,
        verified: bool,
        batch: &mut Batch,
        started: Instant,
    ) {
        let reply = self.bind_reply(ctx, message_id, batch, started);
        let name = dn.original().as_bytes().to_vec();
        if verified {
            self.identity = ctx.directory.identity_for(dn);
            reply.result(&name, ResultCode::SUCCESS, b"");
        } else {
            reply.result(&name, ResultCode::INVALID_CREDENTIALS, b"");
        }
    }

    /// Password Modify (RFC 3062): checked here, then a write like any
    /// other, in order with the connection's others; the old-password
    /// check and the hashing (slow by design) run on the blocking pool
    /// when its turn comes.
    fn password_modify(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let request = match PasswordModifyRequest::decode(ext.value) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("malformed Password Modify request: {e}");
                return reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None);
            }
        };
        let ctx = reply.ctx;
        let change = match ctx.directory.prepare_password_modify(
            &self.identity,
            request.user,
            request.old_password,
            request.new_password,
        ) {
            Ok(change) => change,
            Err(outcome) => return reply.extended(outcome.code, outcome.message.as_bytes(), None),
        };
        let success_value = change.generated.then(|| {
            let mut value = Vec::new();
            encode_password_modify_response(&mut value, change.new_password());
            value
        });
        let mut spawned = self.spawned_write(&reply, out, change.target().original().as_bytes());
        spawned.success_value = success_value;
        spawned.guard_failure = Some(Outcome::new(
            ResultCode::INVALID_CREDENTIALS,
            meridian_directory::PasswordChange::CHANGED_MEANWHILE,
        ));
        let allow_cleartext = ctx.allow_cleartext;
        let directory = Arc::clone(&ctx.directory);
        self.queue_pending(
            ctx,
            spawned,
            Pending::AfterEarlier(Box::new(move || {
                change.into_command(&directory, allow_cleartext)
            })),
        )
    }

    /// Refresh (RFC 2589): a dynamic entry's new TTL, clamped to the
    /// configured bounds; the response says what was granted.
    fn refresh(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let request = match RefreshRequest::decode(ext.value) {
            Ok(request) => request,
            Err(e) => {
                let message = format!(
                    "Refresh: {e}; the value is SEQUENCE {{ entryName [0] LDAPDN, requestTtl [1] INTEGER }}"
                );
                return reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None);
            }
        };
        let prepared =
            reply
                .ctx
                .directory
                .prepare_refresh(&self.identity, request.dn, request.ttl_secs);
        let (command, granted) = match prepared {
            Ok(prepared) => prepared,
            Err(outcome) => return reply.extended(outcome.code, outcome.message.as_bytes(), None),
        };
        // A write like any other: in order with the connection's others.
        let mut value = Vec::new();
        encode_refresh_response(&mut value, granted);
        let mut spawned = self.spawned_write(&reply, out, request.dn);
        spawned.success_value = Some(value);
        self.queue_pending(reply.ctx, spawned, Pending::Ready(command))
    }

    /// Cancel (RFC 3909): stops a streamed search, which answers
    /// `canceled`; the Cancel's own response follows it. A write already
    /// submitted is too late to stop; anything else is not running.
    fn cancel(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let target = match decode_cancel(ext.value) {
            Ok(target) => target,
            Err(e) => {
                let message =
                    format!("Cancel: {e}; the value is SEQUENCE {{ cancelID MessageID }}");
                return reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None);
            }
        };
        let Some(op) = self.running.get(target).cloned() else {
            let message = format!("no operation {target} is in progress on this connection");
            return reply.extended(ResultCode::NO_SUCH_OPERATION, message.as_bytes(), None);
        };
        if op.kind() == Kind::Write {
            return reply.extended(
                ResultCode::TOO_LATE,
                b"the write was already handed to the store",
                None,
            );
        }
        if !op.request_stop(Stop::Cancel) {
            return reply.extended(
                ResultCode::TOO_LATE,
                b"the operation is already stopping or done",
                None,
            );
        }
        let (id, outbound) = (reply.id, Arc::clone(out));
        tokio::spawn(async move {
            op.finished().await;
            push_extended(&outbound, id, &Outcome::success(), &[]);
        });
        Action::Spawned
    }

    fn extended(
        &mut self,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let name = ext.name;
        if name == extended_oid::WHO_AM_I {
            if ext.value.is_some() {
                return reply.extended(
                    ResultCode::PROTOCOL_ERROR,
                    b"WhoAmI takes no request value",
                    None,
                );
            }
            // RFC 4532: "dn:" and the DN, or empty for anonymous.
            let authz = match &self.identity {
                Identity::Anonymous => String::new(),
                Identity::Admin(dn) | Identity::User(dn) => format!("dn:{}", dn.original()),
            };
            return reply.extended(ResultCode::SUCCESS, b"", Some(authz.as_bytes()));
        }
        if name == extended_oid::PASSWORD_MODIFY {
            return self.password_modify(ext, reply, out);
        }
        if name == extended_oid::CANCEL {
            return self.cancel(ext, reply, out);
        }
        if name == extended_oid::REFRESH {
            return self.refresh(ext, reply, out);
        }
        let pending = [(extended_oid::START_TLS, "StartTLS")];
        if let Some((_, what)) = pending.iter().find(|(oid, _)| *oid == name) {
            let message = format!("the {what} extended operation is not implemented yet");
            return reply.extended(ResultCode::UNWILLING_TO_PERFORM, message.as_bytes(), None);
        }
        let message = format!(
            "unsupported extended operation {:?}; supportedExtension in the root DSE lists those served",
            String::from_utf8_lossy(name)
        );
        reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None)
    }

    fn search_request(
        &mut self,
        search: &SearchRequest<'_>,
        controls: &meridian_proto::Seq<'_, Control<'_>>,
        manage_dsa_it: bool,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let ctx = reply.ctx;
        let base = if search.base.is_empty() {
            Ok(Dn::root())
        } else {
            Dn::parse(search.base, &ctx.schema)
        };
        let base = match base {
            Ok(dn) => dn,
            Err(e) => return reply.result(search.base, e.code, e.message.as_bytes()),
        };
        if let (Scope::Base, Some(entry)) = (search.scope, ctx.published.lookup(&base)) {
            ctx.published
                .search(entry, search, &ctx.schema, reply.id, &mut reply.batch.bytes);
            return reply.result(b"", ResultCode::SUCCESS, b"");
        }
        let page = match paged_request(controls) {
            Ok(page) => page,
            Err(message) => {
                return reply.result(search.base, ResultCode::PROTOCOL_ERROR, message.as_bytes());
            }
        };
        let controls = SearchControls {
            page,
            manage_dsa_it,
        };
        // The first step runs here; a result larger than one step's budget
        // continues on a task that waits for the client to read.
        let mut cursor = SearchCursor::new();
        let step = ctx.directory.search_step(
            &self.identity,
            search,
            reply.id,
            &mut reply.batch.bytes,
            controls,
            &mut cursor,
            SEARCH_STEP_BYTES,
        );
        match step {
            Step::Done(outcome, Some(cookie)) => {
                reply.outcome_with_page(search.base, &outcome, &cookie)
            }
            Step::Done(outcome, None) => reply.outcome(search.base, &outcome),
            Step::More => {
                let stream = StreamedSearch {
                    request: OwnedSearch::new(search, controls),
                    identity: self.identity.clone(),
                    directory: Arc::clone(&ctx.directory),
                    outbound: Arc::clone(out),
                    cursor,
                    id: reply.id,
                    in_flight: self.running.start(reply.id, Kind::Search),
                    access_log: ctx.access_log,
                    conn: self.conn_id,
                    started: reply.started,
                };
                tokio::spawn(stream.run());
                Action::Spawned
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

/// The access log line of one operation (`log.access`); `code` is `None`
/// for operations without a response (unbind, abandon, an abandoned
/// search).
fn log_access(
    enabled: bool,
    conn: u64,
    id: i32,
    op: &str,
    dn: &[u8],
    code: Option<ResultCode>,
    started: Instant,
) {
    if enabled {
        tracing::info!(
            target: "meridian::access",
            conn,
            msgid = id,
            op,
            dn = %String::from_utf8_lossy(dn),
            result = code.map_or(-1, |c| i64::from(c.0)),
            etime_us = started.elapsed().as_micros() as u64,
        );
    }
}

/// Encodes the final response of one operation and logs it.
struct Reply<'a> {
    ctx: &'a ServerContext,
    session_conn: u64,
    batch: &'a mut Batch,
    id: i32,
    tag: Tag,
    op_name: &'static str,
    started: Instant,
}

impl Reply<'_> {
    fn outcome(self, dn: &[u8], outcome: &Outcome) -> Action {
        if self.tag == tags::EXTENDED_RESPONSE {
            return self.extended_outcome(outcome, None);
        }
        let urls = referral_urls(outcome);
        let result = ldap_result(outcome, &urls);
        encode_result(&mut self.batch.bytes, self.id, self.tag, &result);
        self.done(dn, outcome.code)
    }

    /// A SearchResultDone carrying the paged results response control.
    fn outcome_with_page(self, dn: &[u8], outcome: &Outcome, cookie: &[u8]) -> Action {
        encode_search_done(&mut self.batch.bytes, self.id, outcome, Some(cookie));
        self.done(dn, outcome.code)
    }

    fn result(self, dn: &[u8], code: ResultCode, message: &[u8]) -> Action {
        if self.tag == tags::EXTENDED_RESPONSE {
            return self.extended(code, message, None);
        }
        encode_result(
            &mut self.batch.bytes,
            self.id,
            self.tag,
            &LdapResult::new(code, message),
        );
        self.done(dn, code)
    }

    fn extended(self, code: ResultCode, message: &[u8], value: Option<&[u8]>) -> Action {
        let outcome = Outcome::new(code, String::from_utf8_lossy(message));
        self.extended_outcome(&outcome, value)
    }

    /// An ExtendedResponse with the whole of `outcome` (matched DN and
    /// referrals too), through the one encoder of extended responses.
    fn extended_outcome(self, outcome: &Outcome, value: Option<&[u8]>) -> Action {
        encode_extended(&mut self.batch.bytes, self.id, outcome, value);
        self.done(b"", outcome.code)
    }

    fn done(self, dn: &[u8], code: ResultCode) -> Action {
        self.batch.completed += 1;
        log_access(
            self.ctx.access_log,
            self.session_conn,
            self.id,
            self.op_name,
            dn,
            Some(code),
            self.started,
        );
        Action::Responded
    }
}

/// Bytes of entries one search step produces before yielding; and the
/// most bytes a streaming search lets wait in the outbound buffer.
const SEARCH_STEP_BYTES: usize = 256 * 1024;
const SEARCH_ROOM_BYTES: usize = 1024 * 1024;

/// A search request copied out of the read buffer, for a search that
/// outlives one pass of the connection's reader.
struct OwnedSearch {
    base: Vec<u8>,
    scope: Scope,
    deref: meridian_proto::DerefAliases,
    size_limit: i32,
    time_limit: i32,
    types_only: bool,
    filter: Vec<u8>,
    attributes: Vec<Vec<u8>>,
    page: Option<(i32, Vec<u8>)>,
    manage_dsa_it: bool,
}

impl OwnedSearch {
    fn new(req: &SearchRequest<'_>, controls: SearchControls<'_>) -> Self {
        let mut filter = Vec::new();
        req.filter.to_ber(&mut filter);
        OwnedSearch {
            base: req.base.to_vec(),
            scope: req.scope,
            deref: req.deref,
            size_limit: req.size_limit,
            time_limit: req.time_limit,
            types_only: req.types_only,
            filter,
            attributes: req.attributes.iter().map(<[u8]>::to_vec).collect(),
            page: controls.page.map(|p| (p.size, p.cookie.to_vec())),
            manage_dsa_it: controls.manage_dsa_it,
        }
    }

    /// Calls `f` with borrowed views of the request.
    fn with<R>(&self, f: impl FnOnce(&SearchRequest<'_>, SearchControls<'_>) -> R) -> Option<R> {
        // Validated when the request was decoded; the depth bound only
        // guards against a bug here.
        let filter =
            meridian_proto::Filter::from_ber(&self.filter, meridian_proto::Depth::new(1024))
                .ok()?;
        let attributes: Vec<&[u8]> = self.attributes.iter().map(Vec::as_slice).collect();
        let req = SearchRequest {
            base: &self.base,
            scope: self.scope,
            deref: self.deref,
            size_limit: self.size_limit,
            time_limit: self.time_limit,
            types_only: self.types_only,
            filter,
            attributes: meridian_proto::Seq::from_items(&attributes),
        };
        let page = self.page.as_ref().map(|(size, cookie)| PageRequest {
            size: *size,
            cookie,
        });
        Some(f(
            &req,
            SearchControls {
                page,
                manage_dsa_it: self.manage_dsa_it,
            },
        ))
    }
}

/// The rest of a large search, on its own task.
struct StreamedSearch {
    request: OwnedSearch,
    identity: Identity,
    directory: Arc<Directory>,
    outbound: Arc<Outbound>,
    cursor: SearchCursor,
    id: i32,
    /// Marked finished when the search ends; Abandon and Cancel stop it.
    in_flight: Arc<InFlight>,
    access_log: bool,
    conn: u64,
    started: Instant,
}

impl StreamedSearch {
    async fn run(self) {
        let in_flight = Arc::clone(&self.in_flight);
        let (access_log, conn, id, started) = (self.access_log, self.conn, self.id, self.started);
        let base = self.request.base.clone();
        let code = self.steps().await;
        in_flight.finish();
        log_access(access_log, conn, id, "SRCH", &base, code, started);
    }

    /// Runs the search to its end: its result code, `None` if it sent no
    /// final response (abandoned, or the connection closed).
    async fn steps(mut self) -> Option<ResultCode> {
        loop {
            if !self.outbound.wait_room(SEARCH_ROOM_BYTES).await {
                return None;
            }
            match self.in_flight.stop_requested() {
                None => {}
                Some(Stop::Abandon) => {
                    // No response; the operation's permit comes back.
                    let mut batch = Batch {
                        completed: 1,
                        ..Batch::default()
                    };
                    self.outbound.push(&mut batch);
                    return None;
                }
                Some(Stop::Cancel) => {
                    let outcome = Outcome::new(
                        ResultCode::CANCELED,
                        "canceled by the client's Cancel request (RFC 3909)",
                    );
                    let mut batch = Batch::default();
                    encode_search_done(&mut batch.bytes, self.id, &outcome, None);
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(outcome.code);
                }
            }
            let mut batch = Batch::default();
            let step = self.request.with(|req, controls| {
                self.directory.search_step(
                    &self.identity,
                    req,
                    self.id,
                    &mut batch.bytes,
                    controls,
                    &mut self.cursor,
                    SEARCH_STEP_BYTES,
                )
            });
            match step {
                Some(Step::More) => {
                    self.outbound.push(&mut batch);
                    // A step ends after at most a few milliseconds of work;
                    // let the worker serve other connections before the next.
                    tokio::task::yield_now().await;
                }
                Some(Step::Done(outcome, cookie)) => {
                    encode_search_done(&mut batch.bytes, self.id, &outcome, cookie.as_deref());
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(outcome.code);
                }
                None => {
                    let outcome = Outcome::new(ResultCode::OTHER, "search state lost");
                    encode_search_done(&mut batch.bytes, self.id, &outcome, None);
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(outcome.code);
                }
            }
        }
    }
}

/// The referral URLs of `outcome`, borrowed for [`ldap_result`].
fn referral_urls(outcome: &Outcome) -> Vec<&[u8]> {
    outcome.referrals.iter().map(String::as_bytes).collect()
}

/// The LDAPResult of `outcome`; `urls` are its [`referral_urls`].
fn ldap_result<'a>(outcome: &'a Outcome, urls: &'a [&'a [u8]]) -> LdapResult<'a> {
    LdapResult {
        code: outcome.code,
        matched_dn: outcome.matched.as_bytes(),
        message: outcome.message.as_bytes(),
        referral: (!urls.is_empty()).then(|| meridian_proto::Seq::from_items(urls)),
    }
}

/// Appends a SearchResultDone, with the paged results response control
/// when `cookie` is given.
fn encode_search_done(buf: &mut Vec<u8>, id: i32, outcome: &Outcome, cookie: Option<&[u8]>) {
    let mut value = Vec::new();
    if let Some(cookie) = cookie {
        PagedResults { size: 0, cookie }.encode(&mut value);
    }
    let control = [Control {
        oid: control_oid::PAGED_RESULTS,
        critical: false,
        value: Some(&value),
    }];
    let urls = referral_urls(outcome);
    LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchResultDone(ldap_result(outcome, &urls)),
        controls: meridian_proto::Seq::from_items(if cookie.is_some() {
            &control[..]
        } else {
            &[]
        }),
    }
    .encode(buf);
}

/// Sends the ExtendedResponse of an operation that finished on its own
/// task (`value` empty: no responseValue), returning its permit.
fn push_extended(outbound: &Outbound, id: i32, outcome: &Outcome, value: &[u8]) {
    let mut batch = Batch::default();
    encode_extended(
        &mut batch.bytes,
        id,
        outcome,
        (!value.is_empty()).then_some(value),
    );
    batch.completed = 1;
    outbound.push(&mut batch);
}

/// Appends an ExtendedResponse with an optional responseValue.
fn encode_extended(buf: &mut Vec<u8>, id: i32, outcome: &Outcome, value: Option<&[u8]>) {
    let urls = referral_urls(outcome);
    LdapMessage {
        message_id: id,
        op: ProtocolOp::ExtendedResponse(meridian_proto::ExtendedResponse {
            result: ldap_result(outcome, &urls),
            name: None,
            value,
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(buf);
}

/// A write running on its own task.
struct SpawnedWrite {
    directory: Arc<Directory>,
    outbound: Arc<Outbound>,
    access_log: bool,
    conn: u64,
    id: i32,
    tag: Tag,
    op_name: &'static str,
    dn: Vec<u8>,
    /// Who asked: a noSuchObject's matchedDN is cut to what they may see.
    identity: Identity,
    /// The pre-read and post-read controls asked for, if any.
    read_back: Option<ReadBackRequest>,
    /// For an extended operation: the responseValue sent on success.
    success_value: Option<Vec<u8>>,
    /// The answer instead of assertionFailed when the write's own guard
    /// fails (Password Modify's, not a client's assertion control).
    guard_failure: Option<Outcome>,
    /// Marked finished once the response is queued.
    in_flight: Arc<InFlight>,
    started: Instant,
}

/// The attribute selections of the pre-read and post-read controls
/// (RFC 4527) of one update; `None` for a control not asked for (or not
/// critical and not applicable).
#[derive(Debug, Default)]
struct ReadBackRequest {
    pre: Option<Vec<Vec<u8>>>,
    post: Option<Vec<Vec<u8>>>,
}

/// Decodes the pre-read and post-read controls of `msg`. A control that
/// does not apply to the operation (pre-read on an add, post-read on a
/// delete) or asks for an entry the caller may not read is ignored when
/// not critical (RFC 4511 section 4.1.11), and refuses the operation when
/// critical: unavailableCriticalExtension, or insufficientAccessRights.
fn read_back_request(
    msg: &LdapMessage<'_>,
    op: &ProtocolOp<'_>,
    who: &Identity,
    directory: &Directory,
) -> Result<Option<ReadBackRequest>, (ResultCode, String)> {
    let mut request = ReadBackRequest::default();
    for control in msg.controls.iter() {
        let (slot, name, applies) = if control.oid == control_oid::PRE_READ {
            let applies = matches!(
                op,
                ProtocolOp::DelRequest(_)
                    | ProtocolOp::ModifyRequest(_)
                    | ProtocolOp::ModifyDnRequest(_)
            );
            (&mut request.pre, "pre-read", applies)
        } else if control.oid == control_oid::POST_READ {
            let applies = matches!(
                op,
                ProtocolOp::AddRequest(_)
                    | ProtocolOp::ModifyRequest(_)
                    | ProtocolOp::ModifyDnRequest(_)
            );
            (&mut request.post, "post-read", applies)
        } else {
            continue;
        };
        let attributes = decode_read_entry_request(control.value, meridian_proto::Depth::new(4))
            .map_err(|e| {
                (
                    ResultCode::PROTOCOL_ERROR,
                    format!("{name} control: {e}; the value is a SEQUENCE OF attribute names"),
                )
            })?;
        if !applies {
            if control.critical {
                return Err((
                    ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                    format!(
                        "the {name} control does not apply to {} (pre-read: delete, modify, modify DN; post-read: add, modify, modify DN)",
                        op_description(op)
                    ),
                ));
            }
            continue;
        }
        if !directory.may_read(who, op_dn(op)) {
            if control.critical {
                return Err((
                    ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
                    format!("the {name} control needs read access to the entry"),
                ));
            }
            continue;
        }
        *slot = Some(attributes.iter().map(<[u8]>::to_vec).collect());
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
enum Pending {
    Ready(meridian_store::Command),
    Blocking(MakeCommand),
    /// Like `Blocking`, but it reads what the connection's earlier
    /// writes wrote: it runs once they have committed.
    AfterEarlier(MakeCommand),
}

type MakeCommand = Box<dyn FnOnce() -> Result<meridian_store::Command, Outcome> + Send>;

async fn sequence_writes(
    mut queue: tokio::sync::mpsc::UnboundedReceiver<(SpawnedWrite, Pending)>,
    password_pool: crate::password_pool::PasswordPool,
) {
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
                Pending::Blocking(Box::new(move || directory.hash_passwords(command)))
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
        match write.directory.submit(command).await {
            Ok(submitted) => {
                committing.push(tokio::spawn(async move {
                    match submitted.wait().await {
                        Ok(meridian_store::Outcome::ReadBack { pre, post, .. }) => {
                            let controls = write.read_back_controls(pre, post);
                            write.respond_with(Outcome::success(), &controls);
                        }
                        Ok(_) => write.respond(Outcome::success()),
                        Err(e) => {
                            let outcome: Outcome = e.into();
                            let outcome = match &write.guard_failure {
                                Some(instead) if outcome.code == ResultCode::ASSERTION_FAILED => {
                                    instead.clone()
                                }
                                _ => outcome,
                            };
                            write.respond(outcome);
                        }
                    }
                }));
            }
            Err(outcome) => write.respond(outcome),
        }
    }
}

impl SpawnedWrite {
    /// Sends the write's response and logs it.
    fn respond(self, outcome: Outcome) {
        self.respond_with(outcome, &[]);
    }

    /// The pre-read and post-read response controls: `(OID, value)`.
    fn read_back_controls(
        &self,
        pre: Option<Box<meridian_model::entry::Entry>>,
        post: Option<Box<meridian_model::entry::Entry>>,
    ) -> Vec<(&'static [u8], Vec<u8>)> {
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

    /// Sends the write's response, with `controls` (`(OID, value)`), and
    /// logs it.
    fn respond_with(self, outcome: Outcome, controls: &[(&'static [u8], Vec<u8>)]) {
        let outcome = self.directory.disclose(&self.identity, outcome);
        let mut batch = Batch::default();
        let urls = referral_urls(&outcome);
        let result = ldap_result(&outcome, &urls);
        let controls: Vec<Control<'_>> = controls
            .iter()
            .map(|(oid, value)| Control {
                oid,
                critical: false,
                value: Some(value),
            })
            .collect();
        match result_op(self.tag, result) {
            _ if self.tag == tags::EXTENDED_RESPONSE => {
                let value = self
                    .success_value
                    .as_deref()
                    .filter(|_| outcome.code == ResultCode::SUCCESS);
                encode_extended(&mut batch.bytes, self.id, &outcome, value);
            }
            Some(op) if !controls.is_empty() => LdapMessage {
                message_id: self.id,
                op,
                controls: meridian_proto::Seq::from_items(&controls),
            }
            .encode(&mut batch.bytes),
            _ => encode_result(&mut batch.bytes, self.id, self.tag, &result),
        }
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

/// The response protocolOp of an update with `tag`, holding `result`.
fn result_op(tag: Tag, result: LdapResult<'_>) -> Option<ProtocolOp<'_>> {
    Some(match tag {
        t if t == tags::ADD_RESPONSE => ProtocolOp::AddResponse(result),
        t if t == tags::DEL_RESPONSE => ProtocolOp::DelResponse(result),
        t if t == tags::MODIFY_RESPONSE => ProtocolOp::ModifyResponse(result),
        t if t == tags::MODIFY_DN_RESPONSE => ProtocolOp::ModifyDnResponse(result),
        _ => return None,
    })
}

/// The response tag for a request, `None` for requests without one.
fn response_tag(op: &ProtocolOp<'_>) -> Option<Tag> {
    Some(match op {
        ProtocolOp::BindRequest(_) => tags::BIND_RESPONSE,
        ProtocolOp::SearchRequest(_) => tags::SEARCH_RESULT_DONE,
        ProtocolOp::ModifyRequest(_) => tags::MODIFY_RESPONSE,
        ProtocolOp::AddRequest(_) => tags::ADD_RESPONSE,
        ProtocolOp::DelRequest(_) => tags::DEL_RESPONSE,
        ProtocolOp::ModifyDnRequest(_) => tags::MODIFY_DN_RESPONSE,
        ProtocolOp::CompareRequest(_) => tags::COMPARE_RESPONSE,
        ProtocolOp::ExtendedRequest(_) => tags::EXTENDED_RESPONSE,
        _ => return None,
    })
}

fn op_description(op: &ProtocolOp<'_>) -> &'static str {
    match op {
        ProtocolOp::ModifyRequest(_) => "modify",
        ProtocolOp::AddRequest(_) => "add",
        ProtocolOp::DelRequest(_) => "delete",
        ProtocolOp::ModifyDnRequest(_) => "modify DN",
        ProtocolOp::CompareRequest(_) => "compare",
        _ => "this operation",
    }
}

fn op_dn<'a>(op: &ProtocolOp<'a>) -> &'a [u8] {
    match op {
        ProtocolOp::BindRequest(b) => b.name,
        ProtocolOp::SearchRequest(s) => s.base,
        ProtocolOp::ModifyRequest(m) => m.dn,
        ProtocolOp::AddRequest(a) => a.dn,
        ProtocolOp::DelRequest(dn) => dn,
        ProtocolOp::ModifyDnRequest(m) => m.dn,
        ProtocolOp::CompareRequest(c) => c.dn,
        _ => b"",
    }
}

/// The paged results control of a request, if any.
fn paged_request<'a>(
    controls: &meridian_proto::Seq<'a, Control<'a>>,
) -> Result<Option<PageRequest<'a>>, String> {
    let Some(control) = controls
        .iter()
        .find(|c| c.oid == control_oid::PAGED_RESULTS)
    else {
        return Ok(None);
    };
    let value =
        PagedResults::decode(control.value).map_err(|e| format!("paged results control: {e}"))?;
    Ok(Some(PageRequest {
        size: value.size,
        cookie: value.cookie,
    }))
}

/// Checks the request's controls: unknown critical controls refuse the
/// operation (RFC 4511 section 4.1.11), unknown non-critical ones are
/// ignored. Returns the Queue Length bundle size announced, if any.
/// The answer to an update or compare that reaches a referral object
/// without ManageDsaIT (RFC 3296 section 5.2): `referral` for the
/// target, affectsMultipleDSAs for a rename whose new superior is held
/// elsewhere. `None`: the operation goes ahead. Searches check their
/// base themselves (after following aliases).
fn referral_answer(
    op: &ProtocolOp<'_>,
    manage_dsa_it: bool,
    directory: &Directory,
) -> Option<Result<Outcome, Outcome>> {
    if manage_dsa_it {
        return None;
    }
    let target = match op {
        ProtocolOp::AddRequest(_)
        | ProtocolOp::DelRequest(_)
        | ProtocolOp::ModifyRequest(_)
        | ProtocolOp::ModifyDnRequest(_)
        | ProtocolOp::CompareRequest(_) => op_dn(op),
        _ => return None,
    };
    if let Some(referral) = directory.referral(target, None) {
        return Some(Ok(referral));
    }
    let ProtocolOp::ModifyDnRequest(rename) = op else {
        return None;
    };
    let superior = rename.new_superior?;
    let held_elsewhere = directory.referral(superior, None)?;
    Some(Err(Outcome::new(
        ResultCode::AFFECTS_MULTIPLE_DSAS,
        format!(
            "the new superior is under the referral object \"{}\": the entry would move to another server",
            held_elsewhere.matched
        ),
    )))
}

fn check_controls(msg: &LdapMessage<'_>) -> Result<u64, (ResultCode, String)> {
    let mut bundle = 0;
    for control in msg.controls.iter() {
        if control.oid == control_oid::QUEUE_LENGTH {
            let ql = QueueLength::decode(control.value).map_err(|e| {
                (
                    ResultCode::PROTOCOL_ERROR,
                    format!("queue length control: {e}; the value must be an INTEGER 1..maxInt"),
                )
            })?;
            bundle = u64::from(ql.count);
        } else if control.oid == control_oid::ASSERTION {
            // Decoded and served by the operation.
        } else if control.oid == control_oid::SUBTREE_DELETE {
            if control.value.is_some() {
                return Err((
                    ResultCode::PROTOCOL_ERROR,
                    "the subtree delete control takes no value".to_owned(),
                ));
            }
        } else if control.oid == control_oid::PAGED_RESULTS
            || control.oid == control_oid::PRE_READ
            || control.oid == control_oid::POST_READ
            || control.oid == control_oid::PROXIED_AUTHZ_V2
        {
            // Decoded and served by search (paged results), by the
            // updates (pre-read, post-read: see `read_back_request`) and
            // by `handle` (proxied authorization).
        } else if control.oid == control_oid::PERMISSIVE_MODIFY {
            // Served by modify (see `handle`); it takes no value.
            if control.value.is_some() {
                return Err((
                    ResultCode::PROTOCOL_ERROR,
                    "the permissive modify control takes no value".to_owned(),
                ));
            }
        } else if control.oid == control_oid::MANAGE_DSA_IT {
            // Served by `handle_op` and search; RFC 3296 section 3: no
            // value.
            if control.value.is_some() {
                return Err((
                    ResultCode::PROTOCOL_ERROR,
                    "the ManageDsaIT control takes no value".to_owned(),
                ));
            }
        } else if control.critical {
            return Err((
                ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                format!(
                    "critical control {} is not supported; supportedControl in the root DSE lists those served",
                    String::from_utf8_lossy(control.oid)
                ),
            ));
        }
    }
    Ok(bundle)
}
