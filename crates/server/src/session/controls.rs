//! Request controls: the one table of those served, each with the
//! operations it is served with and the check of its value, from which
//! a request's controls are parsed once ([`RequestControls`]) and the
//! root DSE lists `supportedControl`; and the referral answer for
//! operations on or below a referral object (RFC 3296).
//!
//! A control is added as one row of [`SUPPORTED_CONTROLS`], one field of
//! [`RequestControls`], and the logic that serves it.

use meridian_directory::sort::ControlValue;
use meridian_directory::{Directory, Outcome, PageRequest};
use meridian_proto::controls::{
    Control, PagedResults, QueueLength, decode_assertion, decode_proxied_authz,
    decode_read_entry_request, decode_values_return_filter, expect_no_value, oid as control_oid,
};
use meridian_proto::sync::{PersistentSearch, SyncRequest, oid as sync_oid};
use meridian_proto::{Depth, Filter, LdapMessage, ProtocolOp, ResultCode, Seq};

use super::reply::{op_description, op_dn};

/// A request's controls, parsed once from [`SUPPORTED_CONTROLS`]: each
/// served control the request carries (the first of a repeated one),
/// checked and decoded.
#[derive(Debug, Default)]
pub(crate) struct RequestControls<'a> {
    /// Queue Length: the responses this request's bundle holds.
    pub(crate) queue_length: u64,
    /// Paged results (RFC 2696).
    pub(crate) page: Option<PageRequest<'a>>,
    /// Assertion (RFC 4528): the filter, and the control's value as
    /// sent (a write guarded by it carries the encoding).
    pub(crate) assertion: Option<(Filter<'a>, &'a [u8])>,
    /// Subtree delete.
    pub(crate) subtree_delete: bool,
    /// Permissive modify.
    pub(crate) permissive_modify: bool,
    /// Pre-read (RFC 4527): the attributes asked for, and whether the
    /// control is critical (its access is decided by `read_back_request`).
    pub(crate) pre_read: Option<ReadEntry<'a>>,
    /// Post-read (RFC 4527).
    pub(crate) post_read: Option<ReadEntry<'a>>,
    /// Proxied authorization (RFC 4370): the authorization identity.
    pub(crate) proxied_authz: Option<(Control<'a>, &'a [u8])>,
    /// ManageDsaIT (RFC 3296).
    pub(crate) manage_dsa_it: bool,
    /// Password policy: the response carries the policy's warning or
    /// error.
    pub(crate) password_policy: bool,
    /// Matched values (RFC 3876): the value, checked.
    pub(crate) matched_values: Option<&'a [u8]>,
    /// Server-side sort (RFC 2891).
    pub(crate) sort: Option<ControlValue<'a>>,
    /// Virtual list view.
    pub(crate) vlv: Option<ControlValue<'a>>,
    /// Transaction specification (RFC 5805): the transaction's
    /// identifier.
    pub(crate) transaction: Option<&'a [u8]>,
    /// Relax Rules (OpenLDAP's): the administrator writes operational
    /// attributes.
    pub(crate) relax: bool,
    /// Sync Request (RFC 4533).
    pub(crate) sync: Option<SyncRequest<'a>>,
    /// Persistent search (draft-ietf-ldapext-psearch-03).
    pub(crate) persistent: Option<PersistentSearch>,
}

/// One request control served: the root DSE's `supportedControl` lists
/// every row's OID.
pub(crate) struct SupportedControl {
    pub(crate) oid: &'static [u8],
    name: &'static str,
    /// The operations it is served with (RFC 4511 section 4.1.11: a
    /// critical one with any other refuses the operation,
    /// unavailableCriticalExtension; a non-critical one is ignored).
    serves: fn(&ProtocolOp<'_>) -> bool,
    /// Those operations, in words, for the refusal.
    served_with: &'static str,
    /// Checks the value and records the control; `Err`: why the value
    /// is malformed (protocolError).
    take: for<'a> fn(Control<'a>, &mut RequestControls<'a>, Depth) -> Result<(), String>,
}

fn any(_: &ProtocolOp<'_>) -> bool {
    true
}

fn not_bind(op: &ProtocolOp<'_>) -> bool {
    !matches!(op, ProtocolOp::BindRequest(_))
}

fn search(op: &ProtocolOp<'_>) -> bool {
    matches!(op, ProtocolOp::SearchRequest(_))
}

fn before_update(op: &ProtocolOp<'_>) -> bool {
    matches!(
        op,
        ProtocolOp::DelRequest(_) | ProtocolOp::ModifyRequest(_) | ProtocolOp::ModifyDnRequest(_)
    )
}

fn update(op: &ProtocolOp<'_>) -> bool {
    matches!(
        op,
        ProtocolOp::AddRequest(_)
            | ProtocolOp::DelRequest(_)
            | ProtocolOp::ModifyRequest(_)
            | ProtocolOp::ModifyDnRequest(_)
    )
}

fn after_update(op: &ProtocolOp<'_>) -> bool {
    matches!(
        op,
        ProtocolOp::AddRequest(_) | ProtocolOp::ModifyRequest(_) | ProtocolOp::ModifyDnRequest(_)
    )
}

/// The value of a control that takes none.
fn no_value(control: Control<'_>, name: &str) -> Result<(), String> {
    expect_no_value(control.value).map_err(|_| format!("the {name} control takes no value"))
}

fn control_value(control: Control<'_>) -> ControlValue<'_> {
    ControlValue {
        critical: control.critical,
        value: control.value,
    }
}

/// The controls served, in the order the root DSE lists them.
pub(crate) const SUPPORTED_CONTROLS: &[SupportedControl] = &[
    SupportedControl {
        oid: control_oid::QUEUE_LENGTH,
        name: "queue length",
        serves: any,
        served_with: "any operation",
        take: |control, parsed, _| {
            let ql = QueueLength::decode(control.value).map_err(|e| {
                format!("queue length control: {e}; the value must be an INTEGER 1..maxInt")
            })?;
            parsed.queue_length = u64::from(ql.count);
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::PAGED_RESULTS,
        name: "paged results",
        serves: search,
        served_with: "search",
        take: |control, parsed, _| {
            let value = PagedResults::decode(control.value)
                .map_err(|e| format!("paged results control: {e}"))?;
            parsed.page = Some(PageRequest {
                size: value.size,
                cookie: value.cookie,
            });
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::ASSERTION,
        name: "assertion",
        serves: any,
        served_with: "any operation",
        take: |control, parsed, depth| {
            let filter = decode_assertion(control.value, depth)
                .map_err(|e| format!("assertion control: {e}"))?;
            parsed.assertion = Some((filter, control.value.unwrap_or_default()));
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::SUBTREE_DELETE,
        name: "subtree delete",
        serves: |op| matches!(op, ProtocolOp::DelRequest(_)),
        served_with: "delete only",
        take: |control, parsed, _| {
            no_value(control, "subtree delete")?;
            parsed.subtree_delete = true;
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::PERMISSIVE_MODIFY,
        name: "permissive modify",
        serves: |op| matches!(op, ProtocolOp::ModifyRequest(_)),
        served_with: "modify only",
        take: |control, parsed, _| {
            no_value(control, "permissive modify")?;
            parsed.permissive_modify = true;
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::PRE_READ,
        name: "pre-read",
        serves: before_update,
        served_with: "pre-read: delete, modify, modify DN; post-read: add, modify, modify DN",
        take: |control, parsed, _| {
            parsed.pre_read = Some(read_entry(control, "pre-read")?);
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::POST_READ,
        name: "post-read",
        serves: after_update,
        served_with: "pre-read: delete, modify, modify DN; post-read: add, modify, modify DN",
        take: |control, parsed, _| {
            parsed.post_read = Some(read_entry(control, "post-read")?);
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::PROXIED_AUTHZ_V2,
        name: "proxied authorization",
        serves: not_bind,
        served_with: "every operation but bind",
        take: |control, parsed, _| {
            if !control.critical {
                return Err(
                    "the proxied authorization control must be critical (RFC 4370)".to_owned(),
                );
            }
            let authz_id = decode_proxied_authz(control.value)
                .map_err(|e| format!("proxied authorization control: {e}"))?;
            parsed.proxied_authz = Some((control, authz_id));
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::MANAGE_DSA_IT,
        name: "ManageDsaIT",
        serves: any,
        served_with: "any operation",
        take: |control, parsed, _| {
            // RFC 3296 section 3: no value.
            no_value(control, "ManageDsaIT")?;
            parsed.manage_dsa_it = true;
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::PASSWORD_POLICY,
        name: "password policy request",
        serves: any,
        served_with: "any operation",
        take: |control, parsed, _| {
            // No value (the draft).
            no_value(control, "password policy request")?;
            parsed.password_policy = true;
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::MATCHED_VALUES,
        name: "matched values",
        serves: search,
        served_with: "search only (RFC 3876 section 2)",
        take: |control, parsed, depth| {
            decode_values_return_filter(control.value, depth)
                .map_err(|e| format!("matched values control: {e}"))?;
            parsed.matched_values = control.value;
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::SORT_REQUEST,
        name: "server-side sort",
        serves: search,
        served_with: "search only (RFC 2891 section 1.1)",
        // Decoded by the search (the directory's `sort.rs`), whose
        // answer to a malformed one depends on the sort's criticality.
        take: |control, parsed, _| {
            parsed.sort = Some(control_value(control));
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::RELAX_RULES,
        name: "relax rules",
        serves: |op| matches!(op, ProtocolOp::AddRequest(_) | ProtocolOp::ModifyRequest(_)),
        served_with: "add and modify",
        take: |control, parsed, _| {
            no_value(control, "relax rules")?;
            parsed.relax = true;
            Ok(())
        },
    },
    SupportedControl {
        oid: sync_oid::SYNC_REQUEST,
        name: "sync request",
        serves: search,
        served_with: "search (RFC 4533)",
        take: |control, parsed, _| {
            let request = SyncRequest::decode(control.value).map_err(|e| {
                format!("sync request control: {e}; the value is SEQUENCE {{ mode ENUMERATED {{ refreshOnly (1), refreshAndPersist (3) }}, cookie OCTET STRING OPTIONAL, reloadHint BOOLEAN DEFAULT FALSE }}")
            })?;
            parsed.sync = Some(request);
            Ok(())
        },
    },
    SupportedControl {
        oid: sync_oid::PERSISTENT_SEARCH,
        name: "persistent search",
        serves: search,
        served_with: "search",
        take: |control, parsed, _| {
            let request = PersistentSearch::decode(control.value).map_err(|e| {
                format!("persistent search control: {e}; the value is SEQUENCE {{ changeTypes INTEGER, changesOnly BOOLEAN, returnECs BOOLEAN }}")
            })?;
            parsed.persistent = Some(request);
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::TRANSACTION_SPECIFICATION,
        name: "transaction specification",
        serves: update,
        served_with: "add, delete, modify and modify DN (RFC 5805)",
        take: |control, parsed, _| {
            if !control.critical {
                return Err(
                    "the transaction specification control must be critical (RFC 5805)".to_owned(),
                );
            }
            let id = control.value.ok_or_else(|| {
                "the transaction specification control's value is the transaction identifier"
                    .to_owned()
            })?;
            parsed.transaction = Some(id);
            Ok(())
        },
    },
    SupportedControl {
        oid: control_oid::VLV_REQUEST,
        name: "virtual list view",
        serves: search,
        served_with: "search only",
        take: |control, parsed, _| {
            parsed.vlv = Some(control_value(control));
            Ok(())
        },
    },
];

/// A pre-read or post-read control, decoded once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadEntry<'a> {
    pub(crate) critical: bool,
    /// The attributes asked for.
    pub(crate) attributes: Seq<'a, &'a [u8]>,
}

/// A pre-read or post-read control's value: a SEQUENCE OF attribute
/// names.
fn read_entry<'a>(control: Control<'a>, name: &str) -> Result<ReadEntry<'a>, String> {
    let attributes = decode_read_entry_request(control.value, Depth::new(4))
        .map_err(|e| format!("{name} control: {e}; the value is a SEQUENCE OF attribute names"))?;
    Ok(ReadEntry {
        critical: control.critical,
        attributes,
    })
}

// One bit per row marks the rows a request has used.
const _: () = assert!(SUPPORTED_CONTROLS.len() <= 64);

impl<'a> RequestControls<'a> {
    /// Parses `msg`'s controls: an unknown critical control, or a
    /// critical one not served with the operation, refuses it
    /// (unavailableCriticalExtension, RFC 4511 section 4.1.11); unknown
    /// and inapplicable non-critical ones are ignored; a malformed value
    /// is protocolError. `depth` bounds a filter a control carries.
    pub(crate) fn parse(
        msg: &LdapMessage<'a>,
        depth: Depth,
    ) -> Result<RequestControls<'a>, (ResultCode, String)> {
        let mut parsed = RequestControls::default();
        // The rows already taken: the first of a repeated control wins.
        let mut taken = 0u64;
        for control in msg.controls.iter() {
            let Some((row, supported)) = SUPPORTED_CONTROLS
                .iter()
                .enumerate()
                .find(|(_, s)| s.oid == control.oid)
            else {
                if control.critical {
                    return Err((
                        ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                        format!(
                            "critical control {} is not supported; supportedControl in the root DSE lists those served",
                            String::from_utf8_lossy(control.oid)
                        ),
                    ));
                }
                continue;
            };
            if !(supported.serves)(&msg.op) {
                if control.critical {
                    return Err((
                        ResultCode::UNAVAILABLE_CRITICAL_EXTENSION,
                        format!(
                            "the {} control does not apply to {} ({})",
                            supported.name,
                            op_description(&msg.op),
                            supported.served_with
                        ),
                    ));
                }
                continue;
            }
            let bit = 1u64 << row;
            if taken & bit != 0 {
                continue;
            }
            taken |= bit;
            (supported.take)(control, &mut parsed, depth)
                .map_err(|message| (ResultCode::PROTOCOL_ERROR, message))?;
        }
        Ok(parsed)
    }
}

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

#[cfg(test)]
mod tests {
    use meridian_proto::{Seq, controls::PagedResults};

    use super::*;

    fn delete_with<'a>(controls: &'a [Control<'a>]) -> LdapMessage<'a> {
        LdapMessage {
            message_id: 1,
            op: ProtocolOp::DelRequest(b"cn=x,dc=example,dc=com"),
            controls: Seq::from_items(controls),
        }
    }

    fn control(
        oid: &'static [u8],
        critical: bool,
        value: Option<&'static [u8]>,
    ) -> Control<'static> {
        Control {
            oid,
            critical,
            value,
        }
    }

    fn parse<'a>(msg: &LdapMessage<'a>) -> Result<RequestControls<'a>, (ResultCode, String)> {
        RequestControls::parse(msg, Depth::new(64))
    }

    #[test]
    fn a_control_not_served_with_the_operation_refuses_it_only_when_critical() {
        let mut page = Vec::new();
        PagedResults {
            size: 10,
            cookie: b"",
        }
        .encode(&mut page);
        let page: &'static [u8] = page.leak();
        // RFC 4511 section 4.1.11: paged results are not appropriate for
        // a delete.
        let critical = [control(control_oid::PAGED_RESULTS, true, Some(page))];
        let (code, message) = parse(&delete_with(&critical)).unwrap_err();
        assert_eq!(code, ResultCode::UNAVAILABLE_CRITICAL_EXTENSION);
        assert!(message.contains("does not apply to delete"), "{message}");
        let ignored = [control(control_oid::PAGED_RESULTS, false, Some(page))];
        assert!(parse(&delete_with(&ignored)).unwrap().page.is_none());
        // Permissive modify is served with a modify only.
        let permissive = [control(control_oid::PERMISSIVE_MODIFY, true, None)];
        assert_eq!(
            parse(&delete_with(&permissive)).unwrap_err().0,
            ResultCode::UNAVAILABLE_CRITICAL_EXTENSION
        );
        // Unknown: the same rule.
        let unknown = [control(b"1.2.3.4", true, None)];
        assert_eq!(
            parse(&delete_with(&unknown)).unwrap_err().0,
            ResultCode::UNAVAILABLE_CRITICAL_EXTENSION
        );
        assert!(parse(&delete_with(&[control(b"1.2.3.4", false, None)])).is_ok());
    }

    #[test]
    fn values_are_checked_once_and_the_first_of_a_repeated_control_wins() {
        let malformed = [control(control_oid::SUBTREE_DELETE, false, Some(b"x"))];
        let (code, message) = parse(&delete_with(&malformed)).unwrap_err();
        assert_eq!(code, ResultCode::PROTOCOL_ERROR);
        assert!(message.contains("takes no value"), "{message}");
        let twice = [
            control(control_oid::SUBTREE_DELETE, false, None),
            control(control_oid::SUBTREE_DELETE, false, Some(b"ignored")),
            control(control_oid::MANAGE_DSA_IT, true, None),
        ];
        let parsed = parse(&delete_with(&twice)).unwrap();
        assert!(parsed.subtree_delete && parsed.manage_dsa_it);
        // Proxied authorization must be critical (RFC 4370).
        let lax = [control(
            control_oid::PROXIED_AUTHZ_V2,
            false,
            Some(b"dn:cn=x"),
        )];
        assert_eq!(
            parse(&delete_with(&lax)).unwrap_err().0,
            ResultCode::PROTOCOL_ERROR
        );
    }

    #[test]
    fn every_row_is_a_distinct_oid() {
        let mut oids: Vec<_> = SUPPORTED_CONTROLS.iter().map(|c| c.oid).collect();
        let rows = oids.len();
        oids.sort_unstable();
        oids.dedup();
        assert_eq!(oids.len(), rows);
    }
}
