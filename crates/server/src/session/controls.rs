//! Request controls: which critical ones are refused, and the referral
//! answer for operations on or below a referral object (RFC 3296).

use super::*;

/// Checks the request's controls: unknown critical controls refuse the
/// operation (RFC 4511 section 4.1.11), unknown non-critical ones are
/// ignored. Returns the Queue Length bundle size announced, if any.
/// The answer to an update or compare that reaches a referral object
/// without ManageDsaIT (RFC 3296 section 5.2): `referral` for the
/// target, affectsMultipleDSAs for a rename whose new superior is held
/// elsewhere. `None`: the operation goes ahead. Searches check their
/// base themselves (after following aliases).
pub(super) fn referral_answer(
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

pub(super) fn check_controls(msg: &LdapMessage<'_>) -> Result<u64, (ResultCode, String)> {
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
        } else if control.oid == control_oid::PASSWORD_POLICY {
            // Asked of a bind: its response carries the policy's
            // warning or error (`bind.rs`). No value (the draft).
            if control.value.is_some() {
                return Err((
                    ResultCode::PROTOCOL_ERROR,
                    "the password policy request control takes no value".to_owned(),
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
        } else if control.oid == control_oid::MATCHED_VALUES
            || control.oid == control_oid::SORT_REQUEST
            || control.oid == control_oid::VLV_REQUEST
        {
            // Served by search (`search.rs`, the directory's `sort.rs`);
            // on any other operation a critical one is not served (RFC
            // 3876 section 2, RFC 2891 section 1.1).
            if control.critical && !matches!(msg.op, ProtocolOp::SearchRequest(_)) {
                return Err((
                    ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                    format!(
                        "control {} is served with a search only",
                        String::from_utf8_lossy(control.oid)
                    ),
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
