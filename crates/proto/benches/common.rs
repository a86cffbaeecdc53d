//! Inputs shared by the codec benchmark and the zero-allocation test.
#![allow(dead_code, unreachable_pub, missing_docs)]

use meridian_proto::*;

/// A base-object SearchRequest as `ldapsearch -s base -b DN` sends it.
pub fn base_search_pdu(message_id: i32) -> Vec<u8> {
    let mut buf = Vec::new();
    let present = Filter::Present(b"objectClass");
    LdapMessage {
        message_id,
        op: ProtocolOp::SearchRequest(SearchRequest {
            base: b"uid=user.12345,ou=People,dc=example,dc=com",
            scope: Scope::Base,
            deref: DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: present,
            attributes: Seq::empty(),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut buf);
    buf
}

/// `count` pipelined base searches back to back, as one read would see.
pub fn pipelined_searches(count: i32) -> Vec<u8> {
    (1..=count).flat_map(base_search_pdu).collect()
}

/// The attributes of an inetOrgPerson entry: 10 attributes.
pub const ENTRY_DN: &[u8] = b"uid=user.12345,ou=People,dc=example,dc=com";
pub const ENTRY: [(&[u8], &[&[u8]]); 10] = [
    (
        b"objectClass",
        &[b"top", b"person", b"organizationalPerson", b"inetOrgPerson"],
    ),
    (b"uid", &[b"user.12345"]),
    (b"cn", &[b"Aaren Atp"]),
    (b"sn", &[b"Atp"]),
    (b"givenName", &[b"Aaren"]),
    (b"mail", &[b"user.12345@example.com"]),
    (b"telephoneNumber", &[b"+1 685 622 6202"]),
    (b"employeeNumber", &[b"12345"]),
    (b"carLicense", &[b"ABCD1234"]),
    (b"description", &[b"This is the description for Aaren Atp."]),
];

/// Encodes the entry as a SearchResultEntry into `buf` without allocating
/// (beyond `buf`'s own growth, which reuse makes a one-off).
pub fn encode_entry(buf: &mut Vec<u8>, message_id: i32) {
    let values: [Seq<'_, &[u8]>; 10] = ENTRY.map(|(_, v)| Seq::from_items(v));
    let attrs: [PartialAttribute<'_>; 10] = std::array::from_fn(|i| PartialAttribute {
        ty: ENTRY[i].0,
        values: values[i],
    });
    LdapMessage {
        message_id,
        op: ProtocolOp::SearchResultEntry(SearchResultEntry {
            dn: ENTRY_DN,
            attributes: Seq::from_items(&attrs),
        }),
        controls: Seq::empty(),
    }
    .encode(buf);
}
