//! Final responses: encoding, the access log line, and the mapping of
//! requests to their response tags.

use std::time::Instant;

use meridian_ber::Tag;
use meridian_directory::{Outcome, SearchDone};
use meridian_proto::controls::{PolicyResponse, oid as control_oid};
use meridian_proto::message::{encode_result, tags};
use meridian_proto::{
    Authentication, Control, LdapMessage, LdapResult, ProtocolOp, ResultCode, SearchRequest,
};

use super::Action;
use super::search::encode_search_done;
use crate::ServerContext;
use crate::outbound::{Outbound, ResponseBatch};

/// The access log line of one operation (`log.access`); `code` is `None`
/// for operations without a response (unbind, abandon, an abandoned
/// search). Reads the clock for the line's `etime_us`, a measurement.
#[allow(clippy::disallowed_methods)]
pub(super) fn log_access(
    enabled: bool,
    conn: u64,
    id: i32,
    op: &str,
    dn: &[u8],
    code: Option<ResultCode>,
    started: Instant,
) {
    log_access_of(enabled, conn, id, op, dn, Detail::None, code, started);
}

/// What an operator greps for in a request's access line, as slapd's
/// `SRCH`, `EXT` and `BIND` lines name them.
#[derive(Clone, Copy)]
pub(super) enum Detail<'r> {
    None,
    /// Its scope, filter and attributes.
    Search(&'r SearchRequest<'r>),
    /// An extended operation's OID.
    Extended(&'r [u8]),
    /// A simple bind.
    Simple,
    /// A SASL bind and its mechanism.
    Sasl(&'r [u8]),
}

impl<'r> Detail<'r> {
    pub(super) fn of(op: &'r ProtocolOp<'r>) -> Detail<'r> {
        match op {
            ProtocolOp::SearchRequest(search) => Detail::Search(search),
            ProtocolOp::ExtendedRequest(ext) => Detail::Extended(ext.name),
            ProtocolOp::BindRequest(bind) => match bind.auth {
                Authentication::Simple(_) => Detail::Simple,
                Authentication::Sasl { mechanism, .. } => Detail::Sasl(mechanism),
            },
            _ => Detail::None,
        }
    }
}

/// [`log_access`] with the request's [`Detail`].
#[allow(clippy::disallowed_methods, clippy::too_many_arguments)]
pub(super) fn log_access_of(
    enabled: bool,
    conn: u64,
    id: i32,
    op: &str,
    dn: &[u8],
    detail: Detail<'_>,
    code: Option<ResultCode>,
    started: Instant,
) {
    let took = started.elapsed();
    crate::metrics::operation(op, code, took);
    if enabled {
        let result = code.map_or(-1, |c| i64::from(c.0));
        write_access_line(conn, id, op, dn, detail, result, None, took);
    }
}

/// Most bytes of a filter (or of an attribute list) the access log
/// shows: a line stays a line.
const LOGGED_FILTER_BYTES: usize = 512;

/// A search's attribute list as the access log shows it: `cn,mail`.
struct Attrs<'r>(&'r SearchRequest<'r>);

impl std::fmt::Display for Attrs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, attr) in self.0.attributes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&String::from_utf8_lossy(attr))?;
        }
        Ok(())
    }
}

/// `conn msgid op dn [request details] result [nentries] etime_us`: the
/// fields of an operation's line, in the order log readers expect.
#[allow(clippy::too_many_arguments)]
fn write_access_line(
    conn: u64,
    id: i32,
    op: &str,
    dn: &[u8],
    detail: Detail<'_>,
    result: i64,
    entries: Option<u64>,
    took: std::time::Duration,
) {
    crate::access_log::write(|line| {
        line.number("conn", conn)
            .signed("msgid", id.into())
            .word("op", op)
            .dn("dn", dn);
        match detail {
            Detail::Search(search) => {
                line.number("scope", search.scope as u64)
                    .shown("filter", &search.filter, LOGGED_FILTER_BYTES)
                    .shown("attrs", &Attrs(search), LOGGED_FILTER_BYTES);
            }
            Detail::Extended(oid) => {
                line.word("oid", &String::from_utf8_lossy(oid));
            }
            Detail::Simple => {
                line.word("method", "simple");
            }
            Detail::Sasl(mechanism) => {
                line.word(
                    "method",
                    &format!("SASL/{}", String::from_utf8_lossy(mechanism)),
                );
            }
            Detail::None => {}
        }
        line.signed("result", result);
        if let Some(entries) = entries {
            line.number("nentries", entries);
        }
        line.number("etime_us", took.as_micros() as u64);
    });
}

/// The access log line of a search: [`log_access`]'s, with the number of
/// entries it returned (`done` is `None` for an abandoned search).
#[allow(clippy::disallowed_methods)]
pub(super) fn log_search(
    enabled: bool,
    conn: u64,
    id: i32,
    search: &SearchRequest<'_>,
    done: Option<&SearchDone>,
    started: Instant,
) {
    let took = started.elapsed();
    crate::metrics::operation("SRCH", done.map(|d| d.outcome.code), took);
    crate::metrics::search_entries(done.map_or(0, |d| d.entries));
    if enabled {
        let result = done.map_or(-1, |d| i64::from(d.outcome.code.0));
        let entries = done.map_or(0, |d| d.entries);
        write_access_line(
            conn,
            id,
            "SRCH",
            search.base,
            Detail::Search(search),
            result,
            Some(entries),
            took,
        );
    }
}

/// Encodes the final response of one operation and logs it.
pub(super) struct Reply<'a> {
    pub(super) ctx: &'a ServerContext,
    pub(super) session_conn: u64,
    pub(super) batch: &'a mut ResponseBatch,
    pub(super) id: i32,
    pub(super) tag: Tag,
    pub(super) op_name: &'static str,
    pub(super) started: Instant,
    /// What its access line shows of the request.
    pub(super) detail: Detail<'a>,
    /// The request carried the password policy control: a refusal by
    /// the policy answers with the response control.
    pub(super) policy_control: bool,
}

impl Reply<'_> {
    pub(super) fn outcome(self, dn: &[u8], outcome: &Outcome) -> Action {
        let controls: Vec<_> = policy_refusal_control(self.policy_control, outcome)
            .into_iter()
            .collect();
        encode_response(
            &mut self.batch.bytes,
            self.id,
            self.tag,
            outcome,
            None,
            &controls,
        );
        let dn = if self.tag == tags::EXTENDED_RESPONSE {
            b""
        } else {
            dn
        };
        self.done(dn, outcome.code)
    }

    /// A SearchResultDone with its response controls.
    pub(super) fn search_done(self, search: &SearchRequest<'_>, done: &SearchDone) -> Action {
        encode_search_done(&mut self.batch.bytes, self.id, done);
        self.batch.completed += 1;
        log_search(
            self.ctx.access_log,
            self.session_conn,
            self.id,
            search,
            Some(done),
            self.started,
        );
        Action::Responded
    }

    pub(super) fn result(self, dn: &[u8], code: ResultCode, message: &[u8]) -> Action {
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

    pub(super) fn extended(self, code: ResultCode, message: &[u8], value: Option<&[u8]>) -> Action {
        let result = LdapResult {
            code,
            matched_dn: b"",
            message,
            referral: None,
        };
        encode_extended_result(&mut self.batch.bytes, self.id, result, value);
        self.done(b"", code)
    }

    pub(super) fn done(self, dn: &[u8], code: ResultCode) -> Action {
        self.batch.completed += 1;
        log_access_of(
            self.ctx.access_log,
            self.session_conn,
            self.id,
            self.op_name,
            dn,
            self.detail,
            Some(code),
            self.started,
        );
        Action::Responded
    }
}

/// A response control to send: its OID and value.
pub(super) type ResponseControl = (&'static [u8], Vec<u8>);

/// The password policy response control of a refusal by the policy,
/// when the request asked for it (`wanted`).
pub(super) fn policy_refusal_control(wanted: bool, outcome: &Outcome) -> Option<ResponseControl> {
    let error = outcome.password_error.filter(|_| wanted)?;
    let mut value = Vec::new();
    PolicyResponse::error(error).encode(&mut value);
    Some((control_oid::PASSWORD_POLICY, value))
}

/// Appends the final response with `tag` answering with `outcome` (for
/// an ExtendedResponse with the responseValue `value`), with response
/// `controls`: the one encoder of results that may carry controls.
pub(super) fn encode_response(
    buf: &mut Vec<u8>,
    id: i32,
    tag: Tag,
    outcome: &Outcome,
    value: Option<&[u8]>,
    controls: &[ResponseControl],
) {
    let urls = referral_urls(outcome);
    let result = ldap_result(outcome, &urls);
    let controls: Vec<Control<'_>> = controls
        .iter()
        .map(|(oid, value)| Control {
            oid,
            critical: false,
            value: Some(value),
        })
        .collect();
    let op = if tag == tags::EXTENDED_RESPONSE {
        Some(ProtocolOp::ExtendedResponse(
            meridian_proto::ExtendedResponse {
                result,
                name: None,
                value,
            },
        ))
    } else {
        result_op(tag, result)
    };
    match op {
        Some(op) => LdapMessage {
            message_id: id,
            op,
            controls: meridian_proto::Seq::from_items(&controls),
        }
        .encode(buf),
        None => encode_result(buf, id, tag, &result),
    }
}

/// The referral URLs of `outcome`, borrowed for [`ldap_result`].
pub(super) fn referral_urls(outcome: &Outcome) -> Vec<&[u8]> {
    outcome.referrals.iter().map(String::as_bytes).collect()
}

/// The LDAPResult of `outcome`; `urls` are its [`referral_urls`].
pub(super) fn ldap_result<'a>(outcome: &'a Outcome, urls: &'a [&'a [u8]]) -> LdapResult<'a> {
    LdapResult {
        code: outcome.code,
        matched_dn: outcome.matched.as_bytes(),
        message: outcome.message.as_bytes(),
        referral: (!urls.is_empty()).then(|| meridian_proto::Seq::from_items(urls)),
    }
}

/// Sends the ExtendedResponse of an operation that finished on its own
/// task (`value` empty: no responseValue), returning its permit.
pub(super) fn push_extended(outbound: &Outbound, id: i32, outcome: &Outcome, value: &[u8]) {
    let mut batch = ResponseBatch::default();
    encode_extended(
        &mut batch.bytes,
        id,
        outcome,
        (!value.is_empty()).then_some(value),
    );
    batch.completed = 1;
    outbound.push(&mut batch);
}

/// Appends an ExtendedResponse answering with `outcome` (its matched DN
/// and referrals too).
pub(super) fn encode_extended(buf: &mut Vec<u8>, id: i32, outcome: &Outcome, value: Option<&[u8]>) {
    encode_response(buf, id, tags::EXTENDED_RESPONSE, outcome, value, &[]);
}

/// Appends an ExtendedResponse with an optional responseValue, from its
/// parts.
pub(super) fn encode_extended_result(
    buf: &mut Vec<u8>,
    id: i32,
    result: LdapResult<'_>,
    value: Option<&[u8]>,
) {
    LdapMessage {
        message_id: id,
        op: ProtocolOp::ExtendedResponse(meridian_proto::ExtendedResponse {
            result,
            name: None,
            value,
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(buf);
}

/// The response protocolOp of an update with `tag`, holding `result`.
pub(super) fn result_op(tag: Tag, result: LdapResult<'_>) -> Option<ProtocolOp<'_>> {
    Some(match tag {
        t if t == tags::ADD_RESPONSE => ProtocolOp::AddResponse(result),
        t if t == tags::DEL_RESPONSE => ProtocolOp::DelResponse(result),
        t if t == tags::MODIFY_RESPONSE => ProtocolOp::ModifyResponse(result),
        t if t == tags::MODIFY_DN_RESPONSE => ProtocolOp::ModifyDnResponse(result),
        _ => return None,
    })
}

/// The response tag for a request, `None` for requests without one.
pub(super) fn response_tag(op: &ProtocolOp<'_>) -> Option<Tag> {
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

pub(super) fn op_description(op: &ProtocolOp<'_>) -> &'static str {
    match op {
        ProtocolOp::ModifyRequest(_) => "modify",
        ProtocolOp::AddRequest(_) => "add",
        ProtocolOp::DelRequest(_) => "delete",
        ProtocolOp::ModifyDnRequest(_) => "modify DN",
        ProtocolOp::CompareRequest(_) => "compare",
        ProtocolOp::SearchRequest(_) => "search",
        ProtocolOp::BindRequest(_) => "bind",
        ProtocolOp::ExtendedRequest(_) => "an extended operation",
        _ => "this operation",
    }
}

pub(super) fn op_dn<'a>(op: &ProtocolOp<'a>) -> &'a [u8] {
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
