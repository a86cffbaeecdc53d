//! SearchResultEntry encoding with attribute selection.

use meridian_ber::{Tag, Writer};
use meridian_model::Schema;
use meridian_model::entry::Entry;
use meridian_model::filter::ValuesFilter;
use meridian_model::schema::AttrId;
use meridian_model::selection::Selection;
use meridian_proto::message::tags;
use meridian_store::FoundRecord;

/// What of an entry a search returns.
#[derive(Debug, Clone, Copy)]
pub struct Projection<'a> {
    /// The requested attributes.
    pub selection: &'a Selection,
    /// Names only, no values.
    pub types_only: bool,
    /// The schema (for subtype and operational decisions).
    pub schema: &'a Schema,
    /// The matched values control's filter (RFC 3876), if given.
    pub values: Option<&'a ValuesFilter>,
}

/// Appends a SearchResultEntry: the selected attributes of `entry` that
/// `visible` allows, then `computed` operational attributes (name,
/// values) that were asked for.
pub fn encode_entry(
    buf: &mut Vec<u8>,
    message_id: i32,
    entry: &Entry,
    projection: Projection<'_>,
    visible: impl Fn(&meridian_model::entry::Attribute) -> bool,
    computed: &[(&str, Vec<Vec<u8>>)],
) {
    let mut w = Writer::new(buf);
    let msg = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    encode_entry_op(&mut w, entry, projection, visible, computed);
    w.end(msg);
}

/// The SearchResultEntry protocolOp alone ([APPLICATION 4], no message
/// envelope): what [`encode_entry`] puts in a message, and the value of
/// the pre-read and post-read response controls (RFC 4527).
pub fn encode_entry_op(
    w: &mut Writer<'_>,
    entry: &Entry,
    projection: Projection<'_>,
    visible: impl Fn(&meridian_model::entry::Attribute) -> bool,
    computed: &[(&str, Vec<Vec<u8>>)],
) {
    let Projection {
        selection,
        types_only,
        schema,
        values,
    } = projection;
    let op = w.start(tags::SEARCH_RESULT_ENTRY);
    w.octets(Tag::OCTET_STRING, entry.dn.original().as_bytes());
    let attrs = w.start(Tag::SEQUENCE);
    for attribute in entry
        .attributes
        .iter()
        .filter(|a| selection.wants(a, schema) && visible(a))
    {
        let name = attribute.name(schema).as_bytes();
        match values.map(|filter| filter.values(attribute, schema)) {
            None => put_attribute(
                w,
                name,
                attribute.values.iter().map(Vec::as_slice),
                types_only,
            ),
            // No value matched (or the filter does not name the type):
            // the attribute is left out, as slapd does.
            Some(kept) if kept.is_empty() => {}
            Some(kept) => put_attribute(w, name, kept.into_iter(), types_only),
        }
    }
    for (name, values) in computed {
        put_attribute(
            w,
            name.as_bytes(),
            values.iter().map(Vec::as_slice),
            types_only,
        );
    }
    w.end(attrs);
    w.end(op);
}

/// Appends a SearchResultEntry for a record read in place: what
/// [`encode_entry`] gives for the entry decoded from it, with the
/// attributes of the types `visible` accepts, and nothing computed or
/// filtered by value (the caller's search needs neither). False, with
/// nothing appended, if the record cannot be read in place
/// ([`FoundRecord::for_each_attribute`]): the caller encodes the decoded
/// entry instead.
#[must_use]
pub fn encode_record(
    buf: &mut Vec<u8>,
    message_id: i32,
    record: &FoundRecord<'_>,
    selection: &Selection,
    types_only: bool,
    schema: &Schema,
    visible: impl Fn(AttrId) -> bool,
) -> bool {
    let start = buf.len();
    let mut w = Writer::new(buf);
    let msg = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    let op = w.start(tags::SEARCH_RESULT_ENTRY);
    w.octets(Tag::OCTET_STRING, record.dn());
    let attrs = w.start(Tag::SEQUENCE);
    let complete = record.for_each_attribute(|attribute| {
        if selection.wants_description(attribute.desc, schema) && visible(attribute.desc.attr) {
            let name = attribute.name.text(attribute.desc.attr, schema);
            put_attribute(&mut w, name.as_bytes(), attribute.values, types_only);
        }
    });
    if complete {
        w.end(attrs);
        w.end(op);
        w.end(msg);
    } else {
        buf.truncate(start);
    }
    complete
}

/// Appends one PartialAttribute (its values left out for `types_only`).
fn put_attribute<'v>(
    w: &mut Writer<'_>,
    name: &[u8],
    values: impl Iterator<Item = &'v [u8]>,
    types_only: bool,
) {
    let m = w.start(Tag::SEQUENCE);
    w.octets(Tag::OCTET_STRING, name);
    let set = w.start(Tag::SET);
    if !types_only {
        for value in values {
            w.octets(Tag::OCTET_STRING, value);
        }
    }
    w.end(set);
    w.end(m);
}
