//! Simple binds: checked here up to the password, which the connection
//! verifies in the password pool under bind protection, then finished.

use std::sync::Arc;
use std::time::Instant;

use meridian_directory::{Identity, Outcome};
use meridian_model::dn::Dn;
use meridian_proto::controls::{PolicyError, PolicyResponse, oid as control_oid};
use meridian_proto::extended::oid as extended_oid;
use meridian_proto::message::tags;
use meridian_proto::{
    Authentication, BindRequest, Control, LdapMessage, LdapResult, ProtocolOp, ResultCode,
};

use super::reply::{Detail, Reply};
use super::{Action, Session};
use crate::ServerContext;
use crate::outbound::ResponseBatch;

impl Session {
    pub(super) fn bind(
        &mut self,
        bind: &BindRequest<'_>,
        wants_policy: bool,
        reply: Reply<'_>,
    ) -> Action {
        // RFC 4513 section 5: a bind, whatever its outcome, first drops the
        // current authorization (and with it a reset password's
        // restriction, which belongs to that identity).
        self.identity = Identity::Anonymous;
        self.must_change_password = false;
        // RFC 5805 section 3.5: and aborts an open transaction, without
        // notice.
        self.transaction = None;
        if bind.version != 3 {
            return reply.result(
                bind.name,
                ResultCode::PROTOCOL_ERROR,
                b"only LDAP version 3 is supported",
            );
        }
        let password = match bind.auth {
            Authentication::Simple(password) => password,
            Authentication::Sasl {
                mechanism,
                credentials,
            } if mechanism.eq_ignore_ascii_case(b"EXTERNAL") => {
                return self.external_bind(credentials, reply);
            }
            Authentication::Sasl { mechanism, .. } => {
                let message = format!(
                    "SASL mechanism {:?} is not supported; supportedSASLMechanisms in the root DSE lists those offered",
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
        if reply.ctx.require_tls && !self.confidential() {
            return reply.result(
                bind.name,
                ResultCode::CONFIDENTIALITY_REQUIRED,
                b"security.require_tls: a bind with a password needs TLS (StartTLS or ldaps://)",
            );
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
            return match reply.ctx.directory.bind_target(&dn) {
                // Locked by the password policy: refused unchecked, and
                // logged and counted as any failed bind.
                Ok(Some(target)) if target.locked => {
                    tracing::warn!(target: "meridian::auth", conn = self.conn_id, dn = dn.original(), "bind refused: the account is locked (password policy)");
                    crate::metrics::failed_bind();
                    let policy =
                        wants_policy.then_some(PolicyResponse::error(PolicyError::AccountLocked));
                    bind_result(reply, bind.name, ResultCode::INVALID_CREDENTIALS, policy)
                }
                // Unknown DN or no password: no password matches, the
                // same answer as a wrong one, so binds cannot enumerate
                // entries; counted by the bind protection like one.
                Ok(target) => Action::VerifyUser {
                    message_id: reply.id,
                    dn,
                    target: Box::new(target.unwrap_or_default()),
                    password: password.to_vec(),
                    started: reply.started,
                    wants_policy,
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

    /// SASL EXTERNAL (RFC 4422 appendix A, RFC 4513 5.2.3): the identity
    /// of the connection's verified client certificate, mapped to an
    /// entry by `security.certificate_map`. An authorization identity in
    /// the credentials must be that same identity (`dn:DN`) or empty.
    fn external_bind(&mut self, credentials: Option<&[u8]>, reply: Reply<'_>) -> Action {
        let ctx = reply.ctx;
        if let Some(peer) = self.peer_credentials {
            return self.peer_bind(peer, credentials, reply);
        }
        let (Some(map), Some(certificate)) = (&ctx.certificate_map, &self.client_certificate)
        else {
            let message: &[u8] = if ctx.certificate_map.is_none() {
                b"SASL EXTERNAL needs client certificates, which this server does not ask for (security.client_certificates)"
            } else {
                b"SASL EXTERNAL needs a client certificate, and this connection has none (use ldaps:// or StartTLS with one)"
            };
            return reply.result(b"", ResultCode::INAPPROPRIATE_AUTHENTICATION, message);
        };
        let identity = match ctx.directory.certificate_identity(map, certificate) {
            Ok(identity) => identity,
            Err(outcome) => {
                tracing::warn!(target: "meridian::auth", conn = self.conn_id, subject = %certificate.subject, reason = %outcome.message, "SASL EXTERNAL bind refused");
                return reply.outcome(b"", &outcome);
            }
        };
        let proved = match &identity {
            Identity::Admin(dn) | Identity::User(dn) => Arc::clone(dn),
            Identity::Anonymous => return reply.result(b"", ResultCode::INVALID_CREDENTIALS, b""),
        };
        let requested = credentials.unwrap_or_default();
        if !requested.is_empty() {
            let same = requested
                .strip_prefix(b"dn:")
                .and_then(|text| Dn::parse(text, &ctx.schema).ok())
                .is_some_and(|dn| dn.same_entry(&proved));
            if !same {
                return reply.result(
                    b"",
                    ResultCode::INVALID_CREDENTIALS,
                    b"SASL EXTERNAL: the requested authorization identity is not the certificate's",
                );
            }
        }
        self.identity = identity;
        reply.result(proved.original().as_bytes(), ResultCode::SUCCESS, b"")
    }

    /// SASL EXTERNAL over `ldapi://`: the user and group the kernel
    /// reports, named as slapd names them; root is the administrator
    /// under `server.ldapi_root_is_admin`. An authorization identity in
    /// the credentials must be that same one or empty.
    fn peer_bind(
        &mut self,
        peer: crate::ldapi::PeerCredentials,
        credentials: Option<&[u8]>,
        reply: Reply<'_>,
    ) -> Action {
        let ctx = reply.ctx;
        let text = peer.dn();
        let dn = match Dn::parse(text.as_bytes(), &ctx.schema) {
            Ok(dn) => Arc::new(dn),
            Err(e) => {
                let message =
                    format!("SASL EXTERNAL: the peer's name {text:?} does not parse: {e}");
                return reply.result(b"", ResultCode::OTHER, message.as_bytes());
            }
        };
        let requested = credentials.unwrap_or_default();
        if !requested.is_empty() {
            let same = requested
                .strip_prefix(b"dn:")
                .and_then(|text| Dn::parse(text, &ctx.schema).ok())
                .is_some_and(|asked| asked.same_entry(&dn));
            if !same {
                return reply.result(
                    b"",
                    ResultCode::INVALID_CREDENTIALS,
                    b"SASL EXTERNAL: the requested authorization identity is not the peer's",
                );
            }
        }
        self.identity = if peer.uid == 0 && ctx.ldapi_root_is_admin {
            Identity::Admin(Arc::clone(&dn))
        } else {
            Identity::User(Arc::clone(&dn))
        };
        tracing::debug!(target: "meridian::auth", conn = self.conn_id, uid = peer.uid, gid = peer.gid, "SASL EXTERNAL bind over ldapi://");
        reply.result(text.as_bytes(), ResultCode::SUCCESS, b"")
    }

    /// The reply to a bind whose password check ran elsewhere.
    pub(super) fn bind_reply<'a>(
        &self,
        ctx: &'a ServerContext,
        message_id: i32,
        batch: &'a mut ResponseBatch,
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
            // Passwords are checked for simple binds only.
            detail: Detail::Simple,
            // A bind answers with its own policy control.
            policy_control: false,
        }
    }

    /// Completes a bind handed out as [`Action::VerifyAdmin`].
    pub(crate) fn finish_admin_bind(
        &mut self,
        ctx: &ServerContext,
        message_id: i32,
        verified: bool,
        batch: &mut ResponseBatch,
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
        answer: BindAnswer,
        batch: &mut ResponseBatch,
        started: Instant,
    ) {
        let BindAnswer {
            verified,
            must_change,
            policy,
        } = answer;
        let reply = self.bind_reply(ctx, message_id, batch, started);
        let name = dn.original().as_bytes().to_vec();
        let code = if verified {
            self.identity = ctx.directory.identity_for(dn);
            self.must_change_password = must_change;
            ResultCode::SUCCESS
        } else {
            ResultCode::INVALID_CREDENTIALS
        };
        bind_result(reply, &name, code, policy);
    }
}

/// How a user's password check ended, for [`Session::finish_user_bind`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindAnswer {
    /// The password matched.
    pub(crate) verified: bool,
    /// The password was reset and must be changed before anything else
    /// (changeAfterReset).
    pub(crate) must_change: bool,
    /// The password policy response control's value, when asked for.
    pub(crate) policy: Option<PolicyResponse>,
}

/// A BindResponse with `code`, and the password policy response control
/// when `policy` is given.
fn bind_result(
    reply: Reply<'_>,
    dn: &[u8],
    code: ResultCode,
    policy: Option<PolicyResponse>,
) -> Action {
    let Some(policy) = policy else {
        return reply.result(dn, code, b"");
    };
    let mut value = Vec::new();
    policy.encode(&mut value);
    let control = [Control {
        oid: control_oid::PASSWORD_POLICY,
        critical: false,
        value: Some(&value),
    }];
    LdapMessage {
        message_id: reply.id,
        op: ProtocolOp::BindResponse(meridian_proto::BindResponse {
            result: LdapResult::new(code, b""),
            server_sasl_creds: None,
        }),
        controls: meridian_proto::Seq::from_items(&control[..]),
    }
    .encode(&mut reply.batch.bytes);
    reply.done(dn, code)
}

impl Session {
    /// While the bound user must change a reset password, why `op` is
    /// refused, as slapd's ppolicy refuses it: insufficientAccessRights
    /// with changeAfterReset for anything but a bind, StartTLS, Password
    /// Modify, or a modify of the user's own userPassword alone. The
    /// entry is read again first: a change made meanwhile (by this
    /// connection's write, or another's) lifts the restriction.
    pub(super) fn reset_restriction(
        &mut self,
        ctx: &ServerContext,
        op: &ProtocolOp<'_>,
    ) -> Option<Outcome> {
        let Identity::User(me) = &self.identity else {
            return None;
        };
        let allowed = match op {
            ProtocolOp::BindRequest(_) => true,
            ProtocolOp::ExtendedRequest(ext) => [
                extended_oid::START_TLS,
                extended_oid::PASSWORD_MODIFY,
                extended_oid::WHO_AM_I,
            ]
            .contains(&ext.name),
            ProtocolOp::ModifyRequest(modify) => {
                Dn::parse(modify.dn, &ctx.schema).is_ok_and(|dn| dn.same_entry(me))
                    && modify
                        .changes
                        .iter()
                        .all(|c| ctx.directory.names_password(c.modification.ty))
            }
            _ => false,
        };
        if allowed {
            return None;
        }
        if !ctx.directory.must_change_password(me) {
            self.must_change_password = false;
            return None;
        }
        Some(
            Outcome::new(
                ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
                "operations are restricted to bind/unbind/abandon/StartTLS/modify password: the password was reset and must be changed first (pwdReset, pwdMustChange)",
            )
            .with_password_error(PolicyError::ChangeAfterReset),
        )
    }
}
