//! Shared test data: one or more messages of every PDU type.
#![allow(dead_code, unreachable_pub, missing_docs)]

use meridian_proto::controls::{PagedResults, QueueLength, oid};
use meridian_proto::filter_str;
use meridian_proto::message::{encode_notice_of_disconnection, tags};
use meridian_proto::*;

pub const LIMITS: DecodeLimits = DecodeLimits {
    max_pdu_bytes: 1 << 20,
    max_depth: 64,
};

fn encode(message_id: i32, op: ProtocolOp<'_>, controls: &[Control<'_>]) -> Vec<u8> {
    let mut buf = Vec::new();
    LdapMessage {
        message_id,
        op,
        controls: Seq::from_items(controls),
    }
    .encode(&mut buf);
    buf
}

fn search(filter: &str, attrs: &[&[u8]], controls: &[Control<'_>]) -> Vec<u8> {
    let ber = filter_str::parse(filter, 64).unwrap();
    let filter = Filter::from_ber(&ber, Depth::new(64)).unwrap();
    encode(
        7,
        ProtocolOp::SearchRequest(SearchRequest {
            base: b"ou=People,dc=example,dc=com",
            scope: Scope::Subtree,
            deref: DerefAliases::Always,
            size_limit: 500,
            time_limit: 30,
            types_only: false,
            filter,
            attributes: Seq::from_items(attrs),
        }),
        controls,
    )
}

/// Encoded sample messages, each with a name for failure messages.
pub fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let mut paged = Vec::new();
    PagedResults {
        size: 100,
        cookie: b"",
    }
    .encode(&mut paged);
    let mut queue = Vec::new();
    QueueLength { count: 1000 }.encode(&mut queue);
    let controls = [
        Control {
            oid: b"1.2.3.4",
            critical: true,
            value: Some(b"opaque"),
        },
        Control {
            oid: oid::MANAGE_DSA_IT,
            critical: false,
            value: None,
        },
    ];
    let paged_control = [Control {
        oid: oid::PAGED_RESULTS,
        critical: true,
        value: Some(&paged),
    }];
    let ql = [Control {
        oid: oid::QUEUE_LENGTH,
        critical: false,
        value: Some(&queue),
    }];
    let mail: [&[u8]; 2] = [b"a@example.com", b"b@example.com"];
    let cn: [&[u8]; 1] = [b"Babs Jensen"];
    let attrs = [
        PartialAttribute {
            ty: b"cn",
            values: Seq::from_items(&cn),
        },
        PartialAttribute {
            ty: b"mail",
            values: Seq::from_items(&mail),
        },
    ];
    let changes = [
        Change {
            operation: ModifyOperation::Replace,
            modification: attrs[1],
        },
        Change {
            operation: ModifyOperation::Delete,
            modification: PartialAttribute {
                ty: b"description",
                values: Seq::empty(),
            },
        },
        Change {
            operation: ModifyOperation::Increment,
            modification: PartialAttribute {
                ty: b"uidNumber",
                values: Seq::from_items(&ONE),
            },
        },
    ];
    const ONE: [&[u8]; 1] = [b"1"];
    let referral: [&[u8]; 1] = [b"ldap://other.example.com/dc=example,dc=com"];
    let result = LdapResult {
        code: ResultCode::NO_SUCH_OBJECT,
        matched_dn: b"dc=example,dc=com",
        message: b"entry not found",
        referral: None,
    };
    let mut notice = Vec::new();
    encode_notice_of_disconnection(&mut notice, ResultCode::PROTOCOL_ERROR, b"bad PDU");
    let mut done = Vec::new();
    message::encode_result(
        &mut done,
        9,
        tags::SEARCH_RESULT_DONE,
        &LdapResult::success(),
    );

    vec![
        (
            "bind simple",
            encode(
                1,
                ProtocolOp::BindRequest(BindRequest {
                    version: 3,
                    name: b"cn=admin,dc=example,dc=com",
                    auth: Authentication::Simple(b"secret"),
                }),
                &[],
            ),
        ),
        (
            "bind sasl",
            encode(
                2,
                ProtocolOp::BindRequest(BindRequest {
                    version: 3,
                    name: b"",
                    auth: Authentication::Sasl {
                        mechanism: b"EXTERNAL",
                        credentials: Some(b""),
                    },
                }),
                &[],
            ),
        ),
        (
            "bind response",
            encode(
                1,
                ProtocolOp::BindResponse(BindResponse {
                    result: LdapResult::success(),
                    server_sasl_creds: None,
                }),
                &[],
            ),
        ),
        ("unbind", encode(3, ProtocolOp::UnbindRequest, &[])),
        ("search base", search("(objectClass=*)", &[b"+", b"*"], &ql)),
        (
            "search complex",
            search(
                "(&(objectClass=Person)(|(sn=Jensen)(cn=Babs J*))(!(uid>=z))(mail~=x)(description<=m)(o=univ*of*mich*))",
                &[b"cn", b"mail"],
                &controls,
            ),
        ),
        (
            "search paged",
            search("(uid=jdoe)", &[b"1.1"], &paged_control),
        ),
        (
            "search extensible",
            search("(sn:dn:2.4.6.8.10:=Barney Rubble)", &[], &[]),
        ),
        (
            "search entry",
            encode(
                7,
                ProtocolOp::SearchResultEntry(SearchResultEntry {
                    dn: b"cn=Babs Jensen,ou=People,dc=example,dc=com",
                    attributes: Seq::from_items(&attrs),
                }),
                &[],
            ),
        ),
        (
            "search reference",
            encode(
                7,
                ProtocolOp::SearchResultReference(Seq::from_items(&referral)),
                &[],
            ),
        ),
        ("search done", done),
        (
            "search done referral",
            encode(
                7,
                ProtocolOp::SearchResultDone(LdapResult {
                    code: ResultCode::REFERRAL,
                    matched_dn: b"",
                    message: b"",
                    referral: Some(Seq::from_items(&referral)),
                }),
                &[],
            ),
        ),
        (
            "modify",
            encode(
                4,
                ProtocolOp::ModifyRequest(ModifyRequest {
                    dn: b"cn=Babs Jensen,ou=People,dc=example,dc=com",
                    changes: Seq::from_items(&changes),
                }),
                &[],
            ),
        ),
        (
            "modify response",
            encode(4, ProtocolOp::ModifyResponse(result), &[]),
        ),
        (
            "add",
            encode(
                5,
                ProtocolOp::AddRequest(AddRequest {
                    dn: b"cn=Babs Jensen,ou=People,dc=example,dc=com",
                    attributes: Seq::from_items(&attrs),
                }),
                &[],
            ),
        ),
        (
            "add response",
            encode(5, ProtocolOp::AddResponse(LdapResult::success()), &[]),
        ),
        (
            "delete",
            encode(6, ProtocolOp::DelRequest(b"cn=x,dc=example,dc=com"), &[]),
        ),
        (
            "delete response",
            encode(6, ProtocolOp::DelResponse(result), &[]),
        ),
        (
            "modify dn",
            encode(
                8,
                ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                    dn: b"cn=x,dc=example,dc=com",
                    new_rdn: b"cn=y",
                    delete_old_rdn: true,
                    new_superior: Some(b"ou=Other,dc=example,dc=com"),
                }),
                &[],
            ),
        ),
        (
            "modify dn response",
            encode(8, ProtocolOp::ModifyDnResponse(LdapResult::success()), &[]),
        ),
        (
            "compare",
            encode(
                10,
                ProtocolOp::CompareRequest(CompareRequest {
                    dn: b"cn=x,dc=example,dc=com",
                    ava: Ava {
                        attr: b"sn",
                        value: b"Jensen",
                    },
                }),
                &[],
            ),
        ),
        (
            "compare response",
            encode(
                10,
                ProtocolOp::CompareResponse(LdapResult::new(ResultCode::COMPARE_TRUE, b"")),
                &[],
            ),
        ),
        ("abandon", encode(11, ProtocolOp::AbandonRequest(7), &[])),
        (
            "extended whoami",
            encode(
                12,
                ProtocolOp::ExtendedRequest(ExtendedRequest {
                    name: extended::oid::WHO_AM_I,
                    value: None,
                }),
                &[],
            ),
        ),
        (
            "extended response",
            encode(
                12,
                ProtocolOp::ExtendedResponse(ExtendedResponse {
                    result: LdapResult::success(),
                    name: Some(extended::oid::WHO_AM_I),
                    value: Some(b"dn:cn=admin,dc=example,dc=com"),
                }),
                &[],
            ),
        ),
        ("notice of disconnection", notice),
        (
            "intermediate",
            encode(
                13,
                ProtocolOp::IntermediateResponse(IntermediateResponse {
                    name: Some(b"1.3.6.1.4.1.4203.1.9.1.4"),
                    value: Some(b"\x30\x00"),
                }),
                &[],
            ),
        ),
    ]
}
