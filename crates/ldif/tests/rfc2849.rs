//! The examples of RFC 2849 section 3, read as the RFC says they read,
//! and the reader's refusals, each naming the input and the line.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Cursor;

use meridian_ldif::{Body, LdifError, Limits, ModOp, Record, RecordReader};

fn read(text: &str) -> Result<Vec<Record>, LdifError> {
    RecordReader::new(
        Cursor::new(text.as_bytes().to_vec()),
        "test.ldif",
        Limits::default(),
    )
    .collect()
}

fn example(n: u32) -> String {
    let path = format!(
        "{}/tests/rfc2849/example{n}.ldif",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

fn values<'r>(record: &'r Record, description: &str) -> Vec<&'r [u8]> {
    record
        .entry_attributes()
        .unwrap()
        .iter()
        .filter(|a| a.description == description)
        .map(|a| a.value.as_slice())
        .collect()
}

#[test]
fn example_1_two_entries() {
    let records = read(&example(1)).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(
        records[0].dn,
        b"cn=Barbara Jensen, ou=Product Development, dc=airius, dc=com"
    );
    assert_eq!(records[0].line, 2);
    assert_eq!(
        values(&records[0], "cn"),
        [&b"Barbara Jensen"[..], b"Barbara J Jensen", b"Babs Jensen"]
    );
    assert_eq!(
        records[1].dn,
        b"cn=Bjorn Jensen, ou=Accounting, dc=airius, dc=com"
    );
    assert_eq!(records[1].line, 14);
    assert_eq!(values(&records[1], "telephonenumber"), [b"+1 408 555 1212"]);
}

#[test]
fn example_2_folded_value_without_spaces_after_colons() {
    let records = read(&example(2)).unwrap();
    assert_eq!(
        values(&records[0], "description"),
        [&b"Babs is a big sailing fan, and travels extensively in search of perfect sailing conditions."[..]]
    );
    assert_eq!(values(&records[0], "objectclass")[0], b"top");
}

#[test]
fn example_3_base64_value_with_a_cr() {
    let records = read(&example(3)).unwrap();
    assert_eq!(
        values(&records[0], "description"),
        [&b"What a careful reader you are!  This value is base-64-encoded because it has a control character in it (a CR).\r  By the way, you should really get out more."[..]]
    );
}

#[test]
fn example_4_utf8_dns_values_and_language_options() {
    let records = read(&example(4)).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(
        String::from_utf8(records[0].dn.clone()).unwrap(),
        "ou=営業部,o=Airius"
    );
    assert_eq!(values(&records[0], "ou;lang-ja"), ["営業部".as_bytes()]);
    assert_eq!(values(&records[0], "ou;lang-en"), [b"Sales"]);
    assert_eq!(
        String::from_utf8(records[1].dn.clone()).unwrap(),
        "uid=rogasawara,ou=営業部,o=Airius"
    );
    // The folded comment is a comment to its end: it adds no attribute.
    let attrs = records[1].entry_attributes().unwrap();
    assert_eq!(attrs.len(), 24);
    assert!(attrs.iter().all(|a| !a.description.starts_with('<')));
    assert_eq!(values(&records[1], "title;lang-en"), [b"Sales, Director"]);
}

#[test]
fn example_5_file_urls() {
    let text = example(5);
    // The RFC's path does not exist here: the error names it and the line.
    let err = read(&text).unwrap_err();
    assert_eq!(err.line, 11, "{err}");
    assert!(
        err.message
            .contains("/usr/local/directory/photos/hjensen.jpg"),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("ldif-example5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let photo = dir.join("hjensen photo.jpg");
    std::fs::write(&photo, [0xff, 0xd8, 0xff, 0x00, b'\n']).unwrap();
    let url = format!("file://{}", dir.join("hjensen%20photo.jpg").display());
    let text = text.replace("file:///usr/local/directory/photos/hjensen.jpg", &url);
    let records = read(&text).unwrap();
    assert_eq!(
        values(&records[0], "jpegphoto"),
        [&[0xff, 0xd8, 0xff, 0x00, b'\n'][..]]
    );

    let limits = Limits {
        allow_file_urls: false,
        ..Limits::default()
    };
    let err = RecordReader::new(Cursor::new(text.clone().into_bytes()), "x", limits)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err();
    assert!(err.message.contains("not allowed"), "{err}");
    let limits = Limits {
        max_record_bytes: 4,
        ..Limits::default()
    };
    let err = meridian_ldif::parse_record(
        &meridian_ldif::RawRecord {
            text: format!("dn: cn=x\njpegphoto:< {url}\n").into_bytes(),
            line: 1,
        },
        &"x".into(),
        &limits,
    )
    .unwrap_err();
    assert!(err.message.contains("limit"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();

    for url in [
        "http://example.com/x.jpg",
        "file://otherhost/x.jpg",
        "ftp:x",
    ] {
        let err = read(&format!("dn: cn=x\njpegphoto:< {url}\n")).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }
}

#[test]
fn example_6_change_records() {
    let text = example(6).replace(":< file:///usr/local/directory/photos/fiona.jpg", ": x");
    let records = read(&text).unwrap();
    assert_eq!(records.len(), 6);
    assert!(matches!(&records[0].body, Body::Add(attrs) if attrs.len() == 8));
    assert_eq!(records[1].body, Body::Delete);
    assert_eq!(
        records[2].body,
        Body::ModRdn {
            new_rdn: b"cn=Paula Jensen".to_vec(),
            delete_old_rdn: true,
            new_superior: None
        }
    );
    assert_eq!(
        records[3].body,
        Body::ModRdn {
            new_rdn: b"ou=Product Development Accountants".to_vec(),
            delete_old_rdn: false,
            new_superior: Some(b"ou=Accounting, dc=airius, dc=com".to_vec())
        }
    );
    let Body::Modify(specs) = &records[4].body else {
        panic!("{:?}", records[4].body)
    };
    let summary: Vec<(ModOp, &str, usize)> = specs
        .iter()
        .map(|s| (s.op, s.description.as_str(), s.values.len()))
        .collect();
    assert_eq!(
        summary,
        [
            (ModOp::Add, "postaladdress", 1),
            (ModOp::Delete, "description", 0),
            (ModOp::Replace, "telephonenumber", 2),
            (ModOp::Delete, "facsimiletelephonenumber", 1)
        ]
    );
    let Body::Modify(specs) = &records[5].body else {
        panic!()
    };
    assert_eq!(specs.len(), 2);
    assert!(specs.iter().all(|s| s.values.is_empty()));
}

#[test]
fn example_7_control() {
    let records = read(&example(7)).unwrap();
    assert_eq!(records[0].controls.len(), 1);
    assert_eq!(records[0].controls[0].oid, "1.2.840.113556.1.4.805");
    assert!(records[0].controls[0].critical);
    assert_eq!(records[0].controls[0].value, None);
    assert_eq!(records[0].body, Body::Delete);
    let records =
        read("dn: cn=x\ncontrol: 1.2.3 false:: AAE=\ncontrol: 1.2.4: v\nchangetype: delete\n")
            .unwrap();
    assert_eq!(records[0].controls[0].value.as_deref(), Some(&[0u8, 1][..]));
    assert!(!records[0].controls[0].critical);
    assert_eq!(records[0].controls[1].value.as_deref(), Some(&b"v"[..]));
}

#[test]
fn crlf_line_ends_comment_only_records_and_increment() {
    let text = "version: 1\r\n\r\n# only a comment\r\n\r\ndn: cn=a\r\ncn: a\r\n b\r\n\r\n\r\ndn: cn=c\r\nchangetype: modify\r\nincrement: uidNumber\r\nuidNumber: 1\r\n";
    let records = read(text).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(values(&records[0], "cn"), [b"ab"]);
    assert_eq!(records[0].line, 5);
    assert!(matches!(&records[1].body, Body::Modify(s) if s[0].op == ModOp::Increment));
}

#[test]
fn refusals_name_the_input_and_line() {
    for (text, line, says) in [
        ("version: 2\ndn: cn=a\n", 1, "version"),
        ("dn: cn=a\ncn a\n", 2, "description: value"),
        ("cn: a\n", 1, "starts with `dn:`"),
        ("dn: cn=a\ncn:: !!!\n", 2, "base64"),
        ("dn: cn=a\nbad attr: x\n", 2, "attribute description"),
        ("\n\n dn: cn=a\n", 3, "continuation"),
        ("dn: cn=a\ncontrol: 1.2.3\ncn: a\n", 1, "changetype"),
        (
            "dn: cn=a\ncontrol: x.y\nchangetype: delete\n",
            2,
            "control OID",
        ),
        ("dn: cn=a\nchangetype: rename\n", 2, "unknown changetype"),
        (
            "dn: cn=a\nchangetype: delete\ncn: a\n",
            3,
            "no further lines",
        ),
        (
            "dn: cn=a\nchangetype: modrdn\nnewrdn: cn=b\n",
            1,
            "deleteoldrdn",
        ),
        (
            "dn: cn=a\nchangetype: modrdn\nnewrdn: cn=b\ndeleteoldrdn: 2\n",
            4,
            "0 or 1",
        ),
        (
            "dn: cn=a\nchangetype: modify\nadd: cn\nsn: x\n",
            4,
            "another attribute",
        ),
        (
            "dn: cn=a\nchangetype: modify\nfrobnicate: cn\n",
            3,
            "expected add:",
        ),
        ("dn: cn=a\nchangetype: modify\n-\n", 3, "no modification"),
        ("\n\ndn: cn=ok\n\ndn: cn=a\nx\n", 6, "description: value"),
    ] {
        let err = read(text).unwrap_err();
        assert_eq!(
            (&*err.input, err.line),
            ("test.ldif", line),
            "{text:?}: {err}"
        );
        assert!(err.message.contains(says), "{text:?}: {err}");
        assert!(err.to_string().starts_with(&format!("test.ldif:{line}: ")));
    }
}

#[test]
fn a_record_over_the_limit_is_refused_without_reading_it_all() {
    let limits = Limits {
        max_record_bytes: 100,
        ..Limits::default()
    };
    let big = format!("dn: cn=a\ndescription: {}\n", "x".repeat(10_000));
    let mut splitter = meridian_ldif::Splitter::new(Cursor::new(big.into_bytes()), "big", limits);
    let err = splitter.next_raw().unwrap_err();
    assert!(err.message.contains("100-byte limit"), "{err}");
    assert_eq!(splitter.next_raw().unwrap(), None);
}
