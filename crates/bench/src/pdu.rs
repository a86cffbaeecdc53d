//! Requests encoded once, re-rendered per request with the message ID and
//! the template's variable parts patched in.
//!
//! A request is built as a normal `LdapMessage` whose variable values hold
//! sentinels (`\x01` index `\x02`) where placeholders were, encoded with
//! the codec, and compiled into a tree: every TLV without a sentinel
//! becomes literal bytes (merged with its literal neighbours), and only
//! the TLVs on the path to a sentinel stay as nodes whose lengths are
//! recomputed. A search by key thus costs a copy of a few literal runs,
//! one rendered value and three or four length headers, whatever the
//! filter and attribute list look like.

use meridian_ber::{Reader, Tag, Writer};

use crate::template::{Segment, Template, TemplateError, Values};

const SENTINEL_START: char = '\u{1}';
const SENTINEL_END: char = '\u{2}';

/// Collects a request's placeholders while its fields are marked.
#[derive(Debug, Default)]
pub struct Marker {
    slots: Vec<Template>,
}

impl Marker {
    /// `text` with each placeholder replaced by a sentinel for this marker.
    pub fn mark(&mut self, text: &str) -> Result<String, TemplateError> {
        if text.contains([SENTINEL_START, SENTINEL_END]) {
            return Err(TemplateError {
                template: text.to_owned(),
                reason: "control characters U+0001 and U+0002 are reserved".into(),
            });
        }
        let mut marked = String::with_capacity(text.len());
        for piece in Template::split(text)? {
            match piece {
                Segment::Text(literal) => marked.push_str(&literal),
                Segment::Placeholder(placeholder) => {
                    marked.push(SENTINEL_START);
                    marked.push_str(&self.slots.len().to_string());
                    marked.push(SENTINEL_END);
                    self.slots.push(placeholder);
                }
            }
        }
        Ok(marked)
    }

    /// Compiles `encoded`, an LDAPMessage built from marked fields with
    /// message ID 0.
    pub fn compile(self, encoded: &[u8]) -> Result<PduTemplate, String> {
        let top = Reader::new(encoded)
            .read()
            .map_err(|e| format!("request does not encode: {e}"))?;
        let mut fields = Reader::new(top.contents);
        fields
            .read()
            .map_err(|e| format!("request has no message ID: {e}"))?;
        let mut body = Vec::new();
        compile_children(fields.rest(), &mut body)?;
        Ok(PduTemplate {
            body,
            uses_seq: self.slots.iter().any(Template::uses_seq),
            slots: self.slots,
        })
    }
}

/// A compiled request.
#[derive(Debug, Clone)]
pub struct PduTemplate {
    /// Everything after the message ID.
    body: Vec<Node>,
    slots: Vec<Template>,
    /// A placeholder is `{seq}` (asked once per request: kept, not derived).
    uses_seq: bool,
}

#[derive(Debug, Clone)]
enum Node {
    /// Whole TLVs, copied as they are.
    Literal(Vec<u8>),
    /// A primitive value with placeholders.
    Primitive { tag: Tag, parts: Vec<Piece> },
    /// A constructed value with a placeholder somewhere inside.
    Constructed { tag: Tag, children: Vec<Node> },
}

#[derive(Debug, Clone)]
enum Piece {
    Bytes(Vec<u8>),
    Slot(usize),
}

impl PduTemplate {
    /// Appends the request with `message_id`, its placeholders rendered
    /// from `values`, and `controls` (an encoded `[0]` Controls, or empty)
    /// at the end.
    pub fn render(
        &self,
        message_id: i32,
        values: &mut Values<'_>,
        controls: &[u8],
        out: &mut Vec<u8>,
    ) {
        let mut w = Writer::new(out);
        let message = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(message_id));
        for node in &self.body {
            self.render_node(node, values, &mut w);
        }
        w.raw(controls);
        w.end(message);
    }

    /// True when every rendering is the same apart from the message ID.
    pub fn is_constant(&self) -> bool {
        self.slots.is_empty()
    }

    /// True when a placeholder is `{seq}`.
    pub fn uses_seq(&self) -> bool {
        self.uses_seq
    }

    fn render_node(&self, node: &Node, values: &mut Values<'_>, w: &mut Writer<'_>) {
        match node {
            Node::Literal(bytes) => w.raw(bytes),
            Node::Primitive { tag, parts } => {
                // `start`/`end` back-patch the length, primitive or not.
                let mark = w.start(*tag);
                for part in parts {
                    match part {
                        Piece::Bytes(bytes) => w.raw(bytes),
                        Piece::Slot(i) => {
                            if let Some(slot) = self.slots.get(*i) {
                                w.append_with(|buf| slot.render(values, buf));
                            }
                        }
                    }
                }
                w.end(mark);
            }
            Node::Constructed { tag, children } => {
                let mark = w.start(*tag);
                for child in children {
                    self.render_node(child, values, w);
                }
                w.end(mark);
            }
        }
    }
}

/// True when `tlv` carries a placeholder. Only string values can: an
/// INTEGER, ENUMERATED or BOOLEAN (universal class) may hold the
/// sentinel's byte by chance (scope singleLevel is 0x01), a string only
/// if the marker put it there, since templates may not contain it.
fn has_slot(tlv: &meridian_ber::Tlv<'_>) -> bool {
    if tlv.tag.is_constructed() {
        let mut children = Reader::new(tlv.contents);
        while let Ok(child) = children.read() {
            if has_slot(&child) {
                return true;
            }
        }
        false
    } else {
        let is_string = tlv.tag == Tag::OCTET_STRING || tlv.tag.0 & 0xc0 != 0;
        is_string && tlv.contents.contains(&(SENTINEL_START as u8))
    }
}

fn compile_children(mut contents: &[u8], out: &mut Vec<Node>) -> Result<(), String> {
    while !contents.is_empty() {
        let mut reader = Reader::new(contents);
        let tlv = reader
            .read()
            .map_err(|e| format!("request does not encode: {e}"))?;
        let rest = reader.rest();
        let whole = contents.get(..contents.len() - rest.len()).unwrap_or(&[]);
        contents = rest;
        if !has_slot(&tlv) {
            match out.last_mut() {
                Some(Node::Literal(bytes)) => bytes.extend_from_slice(whole),
                _ => out.push(Node::Literal(whole.to_vec())),
            }
        } else if tlv.tag.is_constructed() {
            let mut children = Vec::new();
            compile_children(tlv.contents, &mut children)?;
            out.push(Node::Constructed {
                tag: tlv.tag,
                children,
            });
        } else {
            out.push(Node::Primitive {
                tag: tlv.tag,
                parts: split_sentinels(tlv.contents)?,
            });
        }
    }
    Ok(())
}

fn split_sentinels(mut bytes: &[u8]) -> Result<Vec<Piece>, String> {
    let mut parts = Vec::new();
    while let Some(start) = bytes.iter().position(|&b| b == SENTINEL_START as u8) {
        let (before, at) = bytes.split_at(start);
        if !before.is_empty() {
            parts.push(Piece::Bytes(before.to_vec()));
        }
        let end = at
            .iter()
            .position(|&b| b == SENTINEL_END as u8)
            .ok_or("a placeholder was cut by the encoder (does a value hold the byte 0x01?)")?;
        let index = std::str::from_utf8(at.get(1..end).unwrap_or(&[]))
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a placeholder was altered by the encoder")?;
        parts.push(Piece::Slot(index));
        bytes = at.get(end + 1..).unwrap_or(&[]);
    }
    if !bytes.is_empty() {
        parts.push(Piece::Bytes(bytes.to_vec()));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use meridian_proto::{
        Control, DecodeLimits, Filter, LdapMessage, ProtocolOp, Scope, SearchRequest, Seq,
        filter_str, message::DerefAliases,
    };

    use super::*;
    use crate::rng::Rng;

    fn search(base: &str, filter: &str, message_id: i32) -> Vec<u8> {
        let filter = filter_str::parse(filter, 10).unwrap();
        let attrs: [&[u8]; 2] = [b"cn", b"carLicense"];
        let mut out = Vec::new();
        LdapMessage {
            message_id,
            op: ProtocolOp::SearchRequest(SearchRequest {
                base: base.as_bytes(),
                scope: Scope::Subtree,
                deref: DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter: Filter::from_ber(&filter, meridian_proto::Depth::new(10)).unwrap(),
                attributes: Seq::from_items(&attrs),
            }),
            controls: Seq::<Control<'_>>::empty(),
        }
        .encode(&mut out);
        out
    }

    #[test]
    fn rendering_equals_encoding_the_rendered_request() {
        let mut marker = Marker::default();
        let base = marker.mark("ou=People,dc=example,dc=com").unwrap();
        let filter = marker.mark("(&(uid=user{key})(cn=*{alpha:300}*))").unwrap();
        let template = marker.compile(&search(&base, &filter, 0)).unwrap();
        assert!(!template.is_constant());
        let mut rng = Rng::new(1);
        for (id, key) in [(1, 7), (300, 123_456_789), (i32::MAX, 0)] {
            let mut out = Vec::new();
            let mut values = Values {
                key,
                seq: 0,
                unique: 0,
                run: 0,
                rng: &mut rng.clone(),
            };
            template.render(id, &mut values, &[], &mut out);
            // The same draws, rendered by hand.
            let mut values = Values {
                key,
                seq: 0,
                unique: 0,
                run: 0,
                rng: &mut rng,
            };
            let alpha = Template::parse("{alpha:300}")
                .unwrap()
                .render_to_string(&mut values);
            let expected = search(
                "ou=People,dc=example,dc=com",
                &format!("(&(uid=user{key})(cn=*{alpha}*))"),
                id,
            );
            assert_eq!(out, expected);
            LdapMessage::decode(&out, &DecodeLimits::default()).unwrap();
        }
    }

    #[test]
    fn controls_are_appended_inside_the_message() {
        let marker = Marker::default();
        let template = marker
            .compile(&search("dc=x", "(objectClass=*)", 0))
            .unwrap();
        assert!(template.is_constant());
        let mut controls = Vec::new();
        let mut w = Writer::new(&mut controls);
        let all = w.start(Tag::context(0, true));
        let one = w.start(Tag::SEQUENCE);
        w.octets(Tag::OCTET_STRING, b"1.2.3");
        w.end(one);
        w.end(all);
        let mut out = Vec::new();
        let mut rng = Rng::new(1);
        let mut values = Values {
            key: 0,
            seq: 0,
            unique: 0,
            run: 0,
            rng: &mut rng,
        };
        template.render(5, &mut values, &controls, &mut out);
        let message = LdapMessage::decode(&out, &DecodeLimits::default()).unwrap();
        assert_eq!(message.message_id, 5);
        assert_eq!(message.controls.iter().next().unwrap().oid, b"1.2.3");
    }

    #[test]
    fn numbers_holding_the_sentinel_byte_stay_literal() {
        // Scope singleLevel encodes as 0x01, and a sizeLimit of 78,850 as
        // 01 34 02: neither is a placeholder.
        let mut marker = Marker::default();
        let base = marker.mark("uid=u{key}").unwrap();
        let filter = filter_str::parse("(objectClass=*)", 10).unwrap();
        let mut encoded = Vec::new();
        let message = |base: &str, out: &mut Vec<u8>| {
            LdapMessage {
                message_id: 0,
                op: ProtocolOp::SearchRequest(SearchRequest {
                    base: base.as_bytes(),
                    scope: Scope::OneLevel,
                    deref: DerefAliases::Never,
                    size_limit: 0x01_34_02,
                    time_limit: 1,
                    types_only: false,
                    filter: Filter::from_ber(&filter, meridian_proto::Depth::new(10)).unwrap(),
                    attributes: Seq::empty(),
                }),
                controls: Seq::<Control<'_>>::empty(),
            }
            .encode(out)
        };
        message(&base, &mut encoded);
        let template = marker.compile(&encoded).unwrap();
        let mut rng = Rng::new(1);
        let mut out = Vec::new();
        let mut values = Values {
            key: 9,
            seq: 0,
            unique: 0,
            run: 0,
            rng: &mut rng,
        };
        template.render(0, &mut values, &[], &mut out);
        let mut expected = Vec::new();
        message("uid=u9", &mut expected);
        assert_eq!(out, expected);
    }

    #[test]
    fn reserved_characters_are_refused() {
        assert!(Marker::default().mark("a\u{1}b").is_err());
    }
}
