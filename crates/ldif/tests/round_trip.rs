//! Anything the writer writes, the reader reads back unchanged: any DN
//! bytes, any value bytes (base64 where not safe), long values folded.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;

use meridian_ldif::{AttrValue, Limits, RecordReader, write};
use proptest::prelude::*;

fn description() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cn".to_owned()),
        Just("objectClass".to_owned()),
        Just("description;lang-en".to_owned()),
        Just("2.5.4.3".to_owned()),
        "[a-zA-Z][a-zA-Z0-9-]{0,20}",
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        "[ -~]{0,200}".prop_map(String::into_bytes),
        "\\PC{0,50}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn written_entries_read_back(
        entries in proptest::collection::vec(
            (value(), proptest::collection::vec((description(), value()), 0..12)),
            1..6,
        )
    ) {
        let mut out = Vec::new();
        write::version(&mut out);
        for (dn, attrs) in &entries {
            write::entry(&mut out, dn, attrs.iter().map(|(d, v)| (d.as_str(), v.as_slice())));
        }
        for line in out.split(|b| *b == b'\n') {
            prop_assert!(line.len() <= 76);
        }
        let read: Vec<_> = RecordReader::new(Cursor::new(&out), "out", Limits::default())
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(read.len(), entries.len());
        for (record, (dn, attrs)) in read.iter().zip(&entries) {
            prop_assert_eq!(&record.dn, dn);
            let expected: Vec<AttrValue> = attrs
                .iter()
                .map(|(d, v)| AttrValue { description: d.as_str().into(), value: v.clone() })
                .collect();
            prop_assert_eq!(record.entry_attributes().unwrap(), expected.as_slice());
        }
    }
}

#[test]
fn safe_values_are_written_as_text_and_others_as_base64() {
    let mut out = Vec::new();
    write::entry(
        &mut out,
        b"cn=Babs,dc=example,dc=com",
        [
            ("cn", &b"Babs"[..]),
            ("description", b" leading space"),
            ("description", b"trailing space "),
            ("sn", "Jensen \u{e9}".as_bytes()),
            ("title", b":colon"),
            ("title", b""),
        ],
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "dn: cn=Babs,dc=example,dc=com\ncn: Babs\ndescription:: IGxlYWRpbmcgc3BhY2U=\n\
         description:: dHJhaWxpbmcgc3BhY2Ug\nsn:: SmVuc2VuIMOp\ntitle:: OmNvbG9u\ntitle:\n\n"
    );
}
