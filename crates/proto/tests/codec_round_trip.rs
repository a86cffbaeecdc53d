//! Every PDU type: encode, decode, re-encode, compare; and the examples of
//! RFC 4515 section 4.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_proto::filter_str;
use meridian_proto::*;
use support::{LIMITS, samples};

#[test]
fn every_pdu_type_round_trips_byte_for_byte() {
    let samples = samples();
    let mut seen = std::collections::HashSet::new();
    for (name, bytes) in &samples {
        let msg = LdapMessage::decode(bytes, &LIMITS).unwrap_or_else(|e| panic!("{name}: {e}"));
        seen.insert(msg.op.tag());
        let mut again = Vec::new();
        msg.encode(&mut again);
        assert_eq!(&again, bytes, "{name}");
        let (prefix_msg, used) = LdapMessage::decode_prefix(bytes, &LIMITS).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(prefix_msg, msg);
    }
    // 21 protocolOp choices exist in RFC 4511.
    assert_eq!(seen.len(), 21, "a PDU type is missing from the samples");
}

#[test]
fn pipelined_pdus_split_at_their_boundaries() {
    let samples = samples();
    let stream: Vec<u8> = samples.iter().flat_map(|(_, b)| b.clone()).collect();
    let mut rest = &stream[..];
    for (name, bytes) in &samples {
        let (_, used) = LdapMessage::decode_prefix(rest, &LIMITS).unwrap();
        assert_eq!(used, bytes.len(), "{name}");
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
}

#[test]
fn every_truncation_is_incomplete_never_malformed() {
    for (name, bytes) in samples() {
        for cut in 0..bytes.len() {
            let err = LdapMessage::decode_prefix(&bytes[..cut], &LIMITS).unwrap_err();
            assert!(err.is_incomplete(), "{name} cut at {cut}: {err}");
        }
    }
}

#[test]
fn decoded_strings_borrow_from_the_input() {
    let (_, bytes) = samples()
        .into_iter()
        .find(|(n, _)| *n == "bind simple")
        .unwrap();
    let msg = LdapMessage::decode(&bytes, &LIMITS).unwrap();
    let ProtocolOp::BindRequest(bind) = msg.op else {
        panic!()
    };
    let range = bytes.as_ptr_range();
    assert!(range.contains(&bind.name.as_ptr()));
}

#[test]
fn limits_are_enforced() {
    let (_, bytes) = samples()
        .into_iter()
        .find(|(n, _)| *n == "search complex")
        .unwrap();
    let small = DecodeLimits {
        max_pdu_bytes: 32,
        max_depth: 64,
    };
    assert!(matches!(
        LdapMessage::decode_prefix(&bytes, &small),
        Err(DecodeError::TooLarge { .. })
    ));
    let shallow = DecodeLimits {
        max_pdu_bytes: 1 << 20,
        max_depth: 3,
    };
    assert!(matches!(
        LdapMessage::decode(&bytes, &shallow),
        Err(DecodeError::TooDeep { max: 3 })
    ));
}

#[test]
fn malformed_messages_are_refused() {
    let cases: &[(&str, &[u8])] = &[
        ("not a sequence", &[0x04, 0x00]),
        (
            "indefinite length",
            &[0x30, 0x80, 0x02, 0x01, 0x01, 0x42, 0x00, 0x00, 0x00],
        ),
        (
            "negative message id",
            &[0x30, 0x05, 0x02, 0x01, 0xff, 0x42, 0x00],
        ),
        ("unknown op", &[0x30, 0x05, 0x02, 0x01, 0x01, 0x5f, 0x00]),
        (
            "unbind with content",
            &[0x30, 0x06, 0x02, 0x01, 0x01, 0x42, 0x01, 0x00],
        ),
        (
            "trailing bytes",
            &[0x30, 0x06, 0x02, 0x01, 0x01, 0x42, 0x00, 0x00],
        ),
        (
            "child overruns parent",
            &[0x30, 0x05, 0x02, 0x05, 0x01, 0x42, 0x00],
        ),
        (
            "constructed octet string",
            &[
                0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x24, 0x00, 0x80, 0x00,
            ],
        ),
        (
            "constructed delete request",
            &[0x30, 0x05, 0x02, 0x01, 0x01, 0x6a, 0x00],
        ),
    ];
    for (name, bytes) in cases {
        let result = LdapMessage::decode(bytes, &LIMITS);
        assert!(
            matches!(result, Err(ref e) if !e.is_incomplete()),
            "{name}: {result:?}"
        );
    }
}

/// RFC 4515 section 4, each with the BER the RFC gives or implies.
#[test]
fn rfc4515_section4_examples() {
    let examples = [
        "(cn=Babs Jensen)",
        "(!(cn=Tim Howes))",
        "(&(objectClass=Person)(|(sn=Jensen)(cn=Babs J*)))",
        "(o=univ*of*mich*)",
        "(seeAlso=)",
        "(cn:caseExactMatch:=Fred Flintstone)",
        "(cn:=Betty Rubble)",
        "(sn:dn:2.4.6.8.10:=Barney Rubble)",
        "(o:dn:=Ace Industry)",
        "(:1.2.3:=Wilma Flintstone)",
        "(:DN:2.4.6.8.10:=Dino)",
        r"(o=Parens R Us \28for all your parenthetical needs\29)",
        r"(cn=*\2A*)",
        r"(filename=C:\5cMyFile)",
        r"(sn=Lu\c4\8di\c4\87)",
        r"(1.3.6.1.4.1.1466.0=\04\02\48\69)",
    ];
    for text in examples {
        let ber = filter_str::parse(text, 32).unwrap_or_else(|e| panic!("{text}: {e}"));
        let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        // Printing and re-parsing gives the same BER.
        let printed = filter.to_string();
        let again = filter_str::parse(&printed, 32).unwrap();
        assert_eq!(again, ber, "{text} printed as {printed}");
    }

    let value = |text: &str| {
        let ber = filter_str::parse(text, 32).unwrap();
        match Filter::from_ber(&ber, Depth::new(32)).unwrap() {
            Filter::Equality(ava) => ava.value.to_vec(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(value(r"(sn=Lu\c4\8di\c4\87)"), "Lučić".as_bytes());
    assert_eq!(
        value(r"(1.3.6.1.4.1.1466.0=\04\02\48\69)"),
        [4, 2, b'H', b'i']
    );
    assert_eq!(value(r"(filename=C:\5cMyFile)"), br"C:\MyFile");

    let ber = filter_str::parse(r"(cn=*\2A*)", 32).unwrap();
    let Filter::Substrings(s) = Filter::from_ber(&ber, Depth::new(32)).unwrap() else {
        panic!()
    };
    assert_eq!(s.parts.iter().collect::<Vec<_>>(), [Substring::Any(b"*")]);

    let ber = filter_str::parse("(:DN:2.4.6.8.10:=Dino)", 32).unwrap();
    let Filter::Extensible(m) = Filter::from_ber(&ber, Depth::new(32)).unwrap() else {
        panic!()
    };
    assert_eq!(
        (m.rule, m.attr, m.dn_attributes),
        (Some(&b"2.4.6.8.10"[..]), None, true)
    );

    // The empty filters of RFC 4526 and a bare item without parentheses.
    for text in ["(&)", "(|)", "uid=jdoe"] {
        filter_str::parse(text, 32).unwrap();
    }
}

#[test]
fn invalid_filter_strings_are_refused() {
    for text in [
        "",
        "(",
        "(cn=a",
        "(cn=a))",
        "(cn)",
        "(=a)",
        "(cn=a*(b)",
        "(cn=\\zz)",
        "(cn>=a*)",
        "(cn=a**b)",
        "(:=x)",
        "(cn:dn:r1:r2:=x)",
        "(!(a=b)(c=d))",
    ] {
        assert!(
            filter_str::parse(text, 32).is_err(),
            "{text:?} was accepted"
        );
    }
    let deep = format!("{}(a=b){}", "(!".repeat(40), ")".repeat(40));
    assert!(filter_str::parse(&deep, 32).is_err());
    assert!(filter_str::parse(&deep, 64).is_ok());
}

#[test]
fn encode_add_writes_what_an_add_request_message_encodes() {
    let attributes: [(&[u8], Vec<&[u8]>); 3] = [
        (b"objectClass", vec![b"top", b"inetOrgPerson"]),
        (b"cn", vec![&[b'x'; 300][..]]),
        (b"description", vec![]),
    ];
    let mut direct = Vec::new();
    message::encode_add(
        &mut direct,
        42,
        b"cn=x,dc=example,dc=com",
        attributes.iter().map(|(ty, vs)| (*ty, vs.iter().copied())),
    );
    let values: Vec<Vec<&[u8]>> = attributes.iter().map(|(_, vs)| vs.clone()).collect();
    let parts: Vec<PartialAttribute<'_>> = attributes
        .iter()
        .zip(&values)
        .map(|((ty, _), vs)| PartialAttribute {
            ty,
            values: Seq::from_items(vs),
        })
        .collect();
    let mut via_message = Vec::new();
    LdapMessage {
        message_id: 42,
        op: ProtocolOp::AddRequest(AddRequest {
            dn: b"cn=x,dc=example,dc=com",
            attributes: Seq::from_items(&parts),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut via_message);
    assert_eq!(direct, via_message);
}
