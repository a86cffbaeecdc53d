//! Differential tests against two independent LDAP codecs: `ldap3_proto`
//! (kanidm) and `rasn-ldap`. For every sample we encode, the other codec
//! must decode it; its re-encoding must decode with ours to the very same
//! message. So they read what we write, and we read what they write.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use bytes::BytesMut;
use ldap3_proto::LdapCodec;
use meridian_ber::{Tag, Writer};
use meridian_proto::{Depth, Filter, LdapMessage, ProtocolOp};
use support::{LIMITS, samples};
use tokio_util::codec::{Decoder, Encoder};

fn via_ldap3_proto(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut codec = LdapCodec::new(Some(1 << 20), None);
    let mut input = BytesMut::from(bytes);
    let msg = codec
        .decode(&mut input)
        .map_err(|e| format!("ldap3_proto cannot decode: {e}"))?
        .ok_or("ldap3_proto wants more bytes")?;
    let mut out = BytesMut::new();
    codec
        .encode(msg, &mut out)
        .map_err(|e| format!("ldap3_proto cannot encode: {e}"))?;
    Ok(out.to_vec())
}

fn via_rasn(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let msg: rasn_ldap::LdapMessage =
        rasn::ber::decode(bytes).map_err(|e| format!("rasn cannot decode: {e}"))?;
    rasn::ber::encode(&msg).map_err(|e| format!("rasn cannot encode: {e}"))
}

/// Samples that an oracle cannot represent, with the reason.
fn known_gap(oracle: &str, sample: &str) -> Option<&'static str> {
    match (oracle, sample) {
        ("rasn", "modify") => {
            Some("rasn-ldap knows add/delete/replace only; increment is RFC 4525")
        }
        ("ldap3_proto", "search paged") => Some(
            "ldap3_proto parses the paged results control into a type that drops its criticality",
        ),
        ("ldap3_proto", "search done referral") => {
            Some("ldap3_proto does not decode the referral field of LDAPResult")
        }
        ("ldap3_proto", "intermediate") => {
            Some("ldap3_proto refuses IntermediateResponse with responseName/responseValue")
        }
        _ => None,
    }
}

/// Re-encodes a message with the children of every `and`/`or` sorted: they
/// are SETs, and a DER-minded encoder (rasn) may reorder them.
fn canonical(bytes: &[u8]) -> String {
    let msg = LdapMessage::decode(bytes, &LIMITS).unwrap();
    let mut filter_bytes = Vec::new();
    let op = match msg.op {
        ProtocolOp::SearchRequest(mut search) => {
            sorted_filter(&search.filter, &mut filter_bytes);
            search.filter = Filter::from_ber(&filter_bytes, Depth::new(64)).unwrap();
            ProtocolOp::SearchRequest(search)
        }
        other => other,
    };
    format!("{:?}", LdapMessage { op, ..msg })
}

fn sorted_filter(filter: &Filter<'_>, out: &mut Vec<u8>) {
    let tag = match filter {
        Filter::And(_) => Tag::context(0, true),
        Filter::Or(_) => Tag::context(1, true),
        Filter::Not(_) => Tag::context(2, true),
        _ => return filter.to_ber(out),
    };
    let (Filter::And(children) | Filter::Or(children) | Filter::Not(children)) = filter else {
        unreachable!()
    };
    let mut encoded: Vec<Vec<u8>> = children
        .iter()
        .map(|child| {
            let mut buf = Vec::new();
            sorted_filter(&child, &mut buf);
            buf
        })
        .collect();
    encoded.sort();
    let mut w = Writer::new(out);
    let m = w.start(tag);
    encoded.iter().for_each(|c| w.raw(c));
    w.end(m);
}

fn check(oracle: &str, convert: fn(&[u8]) -> Result<Vec<u8>, String>) {
    let mut failures = Vec::new();
    for (name, bytes) in samples() {
        let ours = canonical(&bytes);
        let result = convert(&bytes).and_then(|theirs| {
            LdapMessage::decode(&theirs, &LIMITS)
                .map_err(|e| format!("we cannot decode their encoding: {e}"))?;
            let back = canonical(&theirs);
            if back == ours {
                Ok(())
            } else {
                Err(format!(
                    "decoded differently:\n ours   {ours:?}\n theirs {back:?}"
                ))
            }
        });
        match (result, known_gap(oracle, name)) {
            (Ok(()), _) | (Err(_), Some(_)) => {}
            (Err(e), None) => failures.push(format!("{oracle} / {name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ldap3_proto_agrees() {
    check("ldap3_proto", via_ldap3_proto);
}

#[test]
fn rasn_ldap_agrees() {
    check("rasn", via_rasn);
}
