//! Extended operations: WhoAmI (RFC 4532), Password Modify (RFC 3062),
//! Cancel (RFC 3909), Refresh (RFC 2589), Start and End Transaction
//! (RFC 5805, in `transaction.rs`), cluster administration
//! (Meridian's, `cluster_hooks.rs`), and the refusal of others.

use std::sync::Arc;
use std::time::Instant;

use meridian_directory::{Identity, Outcome};
use meridian_proto::extended::{
    PasswordModifyRequest, RefreshRequest, decode_cancel, encode_password_modify_response,
    encode_refresh_response, oid as extended_oid,
};
use meridian_proto::{ExtendedRequest, LdapMessage, LdapResult, ProtocolOp, ResultCode};

use super::reply::{Detail, Reply, log_access_of, push_extended};
use super::writes::Pending;
use super::{Action, Session};
use crate::ServerContext;
use crate::inflight::{Kind, Stop};
use crate::outbound::{Outbound, ResponseBatch};

impl Session {
    /// Password Modify (RFC 3062): checked here, then a write like any
    /// other, in order with the connection's others; the old-password
    /// check and the hashing (slow by design) run on the blocking pool
    /// when its turn comes.
    pub(super) fn password_modify(
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
            Err(outcome) => return reply.outcome(b"", &outcome),
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

    /// StartTLS (RFC 4511 section 4.14): refused here on a connection
    /// already under TLS (operationsError) or a server without a
    /// certificate (unavailable); otherwise the connection answers it
    /// once no other operation is outstanding, and upgrades.
    pub(super) fn start_tls(&mut self, ext: &ExtendedRequest<'_>, reply: Reply<'_>) -> Action {
        if ext.value.is_some() {
            return reply.extended(
                ResultCode::PROTOCOL_ERROR,
                b"a StartTLS request has no value",
                None,
            );
        }
        if self.tls {
            return reply.extended(
                ResultCode::OPERATIONS_ERROR,
                b"TLS is already established on this connection",
                None,
            );
        }
        if reply.ctx.tls.is_none() {
            return reply.extended(
                ResultCode::UNAVAILABLE,
                b"TLS is not configured on this server (security.tls_certificate_file and security.tls_key_file)",
                None,
            );
        }
        Action::StartTls {
            message_id: reply.id,
            started: reply.started,
        }
    }

    /// Answers a StartTLS request the connection decided on: success
    /// (then the handshake follows), or why not.
    pub(crate) fn finish_start_tls(
        &mut self,
        ctx: &ServerContext,
        message_id: i32,
        refusal: Option<&str>,
        batch: &mut ResponseBatch,
        started: Instant,
    ) {
        let (code, message) = match refusal {
            None => (ResultCode::SUCCESS, ""),
            Some(why) => (ResultCode::OPERATIONS_ERROR, why),
        };
        LdapMessage {
            message_id,
            op: ProtocolOp::ExtendedResponse(meridian_proto::ExtendedResponse {
                result: LdapResult::new(code, message.as_bytes()),
                // RFC 4511 section 4.14.2: the response names StartTLS.
                name: Some(extended_oid::START_TLS),
                value: None,
            }),
            controls: meridian_proto::Seq::empty(),
        }
        .encode(&mut batch.bytes);
        batch.completed += 1;
        log_access_of(
            ctx.access_log,
            self.conn_id,
            message_id,
            "EXT",
            b"",
            Detail::Extended(extended_oid::START_TLS),
            Some(code),
            started,
        );
        if refusal.is_none() {
            self.tls = true;
        }
    }

    /// Refresh (RFC 2589): a dynamic entry's new TTL, clamped to the
    /// configured bounds; the response says what was granted.
    pub(super) fn refresh(
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

    /// Cluster administration: the administrator's only; answered when
    /// the hook has carried it out (a membership change waits for the
    /// leader to commit it), while the connection goes on with others.
    fn cluster_admin(
        &mut self,
        hook: &dyn crate::ClusterHooks,
        ext: &ExtendedRequest<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        if !matches!(self.identity, Identity::Admin(_)) {
            return reply.extended(
                ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
                b"cluster administration is for the directory administrator (bind as directory.admin_dn)",
                None,
            );
        }
        let answer = hook.administer(ext.value.unwrap_or_default());
        let (id, outbound) = (reply.id, Arc::clone(out));
        tokio::spawn(async move {
            let answer = answer.await;
            let outcome = Outcome::new(answer.code, answer.message);
            push_extended(
                &outbound,
                id,
                &outcome,
                answer.value.as_deref().unwrap_or_default(),
            );
        });
        Action::Spawned
    }

    /// Cancel (RFC 3909): stops a streamed search, which answers
    /// `canceled`; the Cancel's own response follows it. A write already
    /// submitted is too late to stop; anything else is not running.
    pub(super) fn cancel(
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

    pub(super) fn extended(
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
        if name == extended_oid::START_TLS {
            return self.start_tls(ext, reply);
        }
        if name == extended_oid::START_TRANSACTION {
            return self.start_transaction(ext, reply);
        }
        if name == extended_oid::END_TRANSACTION {
            return self.end_transaction(ext, reply, out);
        }
        if name == extended_oid::CLUSTER_ADMIN
            && let Some(hook) = &reply.ctx.cluster_hooks
        {
            return self.cluster_admin(hook.0.as_ref(), ext, reply, out);
        }
        let message = format!(
            "unsupported extended operation {:?}; supportedExtension in the root DSE lists those served",
            String::from_utf8_lossy(name)
        );
        reply.extended(ResultCode::PROTOCOL_ERROR, message.as_bytes(), None)
    }
}
