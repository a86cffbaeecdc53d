//! What a follower of the directory's changes needs from it: content
//! synchronization's cookies (RFC 4533), and the entries of a search
//! relabelled with the controls of the change they report.
//!
//! A follower's search runs through the ordinary search (`search/`),
//! with entryUUID and entryCSN added to the attributes it asks for;
//! [`relabel`] then reads those two from each encoded entry, asks the
//! follower what to send (the entry with its state, its bare DN, or
//! nothing), and encodes that with the follower's control, leaving out
//! the two attributes again unless the client asked for them. Access
//! control, the filter, scope, size and time limits are the search's.
//!
//! Cookies are `rid=NNN,csn=CSN[;CSN...]`, as slapd's syncprov writes
//! them: the consumer's replica ID echoed, and per server ID the highest
//! entryCSN the consumer has been sent. An entry whose entryCSN is above
//! the cookie's CSN for its server ID (less [`REORDER_MARGIN_SECS`]) has
//! changed since.

use std::sync::Arc;

use meridian_model::dn::Dn;
use meridian_proto::message::{PartialAttribute, SearchResultEntry};
use meridian_proto::{Control, DecodeLimits, LdapMessage, ProtocolOp, Seq};
use meridian_store::feed::{ContextCsns, csn_sid, merge_csn};

use crate::access::Level;
use crate::rights::Memberships;
use crate::{Directory, Identity};

/// How far back of a cookie's CSN an entry counts as changed: commits
/// need not come in the order of their CSNs (a CSN is chosen when a
/// write is prepared, on the server's workers, and a cluster's writes
/// cross the network first), so a consumer's cookie may be above a
/// change it never saw. Sending an unchanged entry again costs little;
/// missing a change is a divergence.
pub const REORDER_MARGIN_SECS: i64 = 10;

/// A consumer's cookie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncCookie {
    /// The consumer's replica ID (`rid=`), echoed in every cookie sent.
    pub rid: Option<String>,
    /// The highest entryCSN sent, per server ID.
    pub csns: ContextCsns,
}

impl SyncCookie {
    /// Reads a cookie: comma-separated `rid=`, `sid=`, `csn=` (CSNs
    /// separated by `;`) and `delcsn=` fields, in any order; unknown
    /// fields are passed over, as slapd does. `Err`: why it is not one.
    pub fn parse(value: &[u8]) -> Result<SyncCookie, String> {
        let text = std::str::from_utf8(value).map_err(|_| "the sync cookie is not UTF-8")?;
        let mut cookie = SyncCookie::default();
        for field in text.split(',').filter(|f| !f.is_empty()) {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| format!("sync cookie field {field:?} has no '='"))?;
            match name.trim() {
                "rid" => {
                    if value.is_empty()
                        || value.len() > 3
                        || !value.bytes().all(|b| b.is_ascii_digit())
                    {
                        return Err(format!("sync cookie rid {value:?} is not 1 to 3 digits"));
                    }
                    cookie.rid = Some(value.to_owned());
                }
                "csn" => {
                    for csn in value.split(';').filter(|c| !c.is_empty()) {
                        if csn_sid(csn.as_bytes()).is_none() {
                            return Err(format!("sync cookie CSN {csn:?} is not a CSN"));
                        }
                        merge_csn(&mut cookie.csns, csn.as_bytes());
                    }
                }
                _ => {}
            }
        }
        Ok(cookie)
    }

    /// The cookie for `csns` (the consumer's `rid` kept).
    pub fn encode(&self, csns: &ContextCsns) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 * csns.len() + 8);
        if let Some(rid) = &self.rid {
            out.extend_from_slice(b"rid=");
            out.extend_from_slice(rid.as_bytes());
        }
        if !csns.is_empty() {
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(b"csn=");
            for (i, csn) in csns.values().enumerate() {
                if i > 0 {
                    out.push(b';');
                }
                out.extend_from_slice(csn);
            }
        }
        out
    }

    /// The lowest CSN of the cookie, less the reorder margin: the
    /// consumer has seen every change committed before it.
    pub fn seen_before(&self) -> Option<Vec<u8>> {
        self.csns.values().min().map(|csn| minus_margin(csn))
    }

    /// Whether an entry stamped `csn` may have changed since the
    /// consumer's cookie.
    pub fn changed_since(&self, csn: Option<&[u8]>) -> bool {
        let Some(csn) = csn else {
            return true;
        };
        match csn_sid(csn).and_then(|sid| self.csns.get(&sid)) {
            Some(seen) => csn > minus_margin(seen).as_slice(),
            None => true,
        }
    }

    /// Raises the cookie's CSN for `csn`'s server ID; true if it rose
    /// (the message carrying `csn` then moves the consumer's cookie).
    pub fn advance(&mut self, csn: &[u8]) -> bool {
        let Some(sid) = csn_sid(csn) else {
            return false;
        };
        let rises = self.csns.get(&sid).is_none_or(|seen| csn > seen.as_slice());
        if rises {
            self.csns.insert(sid, csn.to_vec());
        }
        rises
    }
}

/// `csn` moved back by [`REORDER_MARGIN_SECS`], as the lowest CSN of
/// that second and server ID; `csn` itself if its time does not parse.
fn minus_margin(csn: &[u8]) -> Vec<u8> {
    let Some(seconds) = csn.get(..14) else {
        return csn.to_vec();
    };
    let mut stamp = seconds.to_vec();
    stamp.push(b'Z');
    let Some(time) = meridian_model::time::parse_generalized_time(&stamp) else {
        return csn.to_vec();
    };
    let earlier = meridian_model::time::Instant {
        secs: time.secs - REORDER_MARGIN_SECS,
        nanos: 0,
    };
    let sid = csn.split(|b| *b == b'#').nth(2).unwrap_or(b"000");
    let mut out = earlier
        .canonical()
        .trim_end_matches('Z')
        .as_bytes()
        .to_vec();
    out.extend_from_slice(b".000000Z#000000#");
    out.extend_from_slice(sid);
    out.extend_from_slice(b"#000000");
    out
}

/// What [`relabel`] learns of an encoded entry.
#[derive(Debug)]
pub struct Found<'a> {
    /// The entry's DN, as encoded.
    pub dn: &'a [u8],
    /// Its entryUUID, as 16 octets.
    pub uuid: Option<[u8; 16]>,
    /// Its entryCSN.
    pub csn: Option<&'a [u8]>,
}

/// What to send for an entry.
#[derive(Debug)]
pub struct Label {
    /// The response control, OID and value (a persistent search that
    /// did not ask for Entry Change Notifications has none).
    pub control: Option<(&'static [u8], Vec<u8>)>,
    /// The entry's attributes are sent (else its DN alone, as a
    /// synchronization's present and delete states send it).
    pub attributes: bool,
}

/// The attribute list a follower's search asks for: the client's, with
/// entryUUID and entryCSN added; and whether the client asked for each
/// of those itself (else [`relabel`] leaves it out again).
pub fn follower_attributes(asked: &[Vec<u8>]) -> (Vec<Vec<u8>>, Asked) {
    let named = |names: &[&[u8]]| {
        asked
            .iter()
            .any(|a| a.as_slice() == b"+" || names.iter().any(|n| a.eq_ignore_ascii_case(n)))
    };
    let kept = Asked {
        uuid: named(&[b"entryUUID", b"1.3.6.1.1.16.4"]),
        csn: named(&[b"entryCSN", b"1.3.6.1.4.1.4203.666.1.7"]),
        computed: asked.iter().any(|a| is_computed(a)),
    };
    let no_attributes = asked.iter().all(|a| a.as_slice() == b"1.1");
    let mut list: Vec<Vec<u8>> = if asked.is_empty() {
        vec![b"*".to_vec()]
    } else {
        asked
            .iter()
            .filter(|a| a.as_slice() != b"1.1")
            .cloned()
            .collect()
    };
    if !asked.is_empty() && no_attributes {
        list.clear();
    }
    list.push(b"entryUUID".to_vec());
    list.push(b"entryCSN".to_vec());
    (list, kept)
}

/// Which of the attributes a follower's search adds the client asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// entryUUID.
    pub uuid: bool,
    /// entryCSN.
    pub csn: bool,
    /// The computed attributes ([`COMPUTED`]), by name: `+` alone does
    /// not send them to a follower.
    pub computed: bool,
}

/// Operational attributes computed as an entry is sent, not stored: a
/// follower copies entries, and a copy must not hold them (slapd's
/// consumer cannot store `numSubordinates`, which it does not know, and
/// keeps the others itself).
pub const COMPUTED: [&[u8]; 4] = [
    b"entryDN",
    b"hasSubordinates",
    b"numSubordinates",
    b"subschemaSubentry",
];

fn is_computed(name: &[u8]) -> bool {
    COMPUTED.iter().any(|c| name.eq_ignore_ascii_case(c))
}

/// Appends to `out` the messages of `batch` (a search step's output),
/// each SearchResultEntry as `decide` labels it (or left out when it
/// says `None`); other messages (continuation references) as they are.
/// Returns the number of entries sent.
pub fn relabel(
    batch: &[u8],
    out: &mut Vec<u8>,
    asked: Asked,
    mut decide: impl FnMut(&Found<'_>) -> Option<Label>,
) -> usize {
    let limits = DecodeLimits::default();
    let mut rest = batch;
    let mut sent = 0;
    while !rest.is_empty() {
        let Ok(length) = meridian_ber::frame::pdu_length(rest, usize::MAX) else {
            break;
        };
        let (pdu, after) = rest.split_at(length.min(rest.len()));
        rest = after;
        let Ok(message) = LdapMessage::decode(pdu, &limits) else {
            continue;
        };
        let ProtocolOp::SearchResultEntry(entry) = message.op else {
            out.extend_from_slice(pdu);
            continue;
        };
        let attributes: Vec<PartialAttribute<'_>> = entry.attributes.iter().collect();
        let value_of = |names: &[&[u8]]| {
            attributes
                .iter()
                .find(|a| names.iter().any(|n| a.ty.eq_ignore_ascii_case(n)))
                .and_then(|a| a.values.iter().next())
        };
        let found = Found {
            dn: entry.dn,
            uuid: value_of(&[b"entryUUID"]).and_then(meridian_store::feed::uuid_octets),
            csn: value_of(&[b"entryCSN"]),
        };
        let Some(label) = decide(&found) else {
            continue;
        };
        let kept: Vec<PartialAttribute<'_>> = if label.attributes {
            attributes
                .iter()
                .filter(|a| {
                    (asked.uuid || !a.ty.eq_ignore_ascii_case(b"entryUUID"))
                        && (asked.csn || !a.ty.eq_ignore_ascii_case(b"entryCSN"))
                        && (asked.computed || !is_computed(a.ty))
                })
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        encode_labelled(out, message.message_id, entry.dn, &kept, &label);
        sent += 1;
    }
    sent
}

/// Appends a SearchResultEntry of `dn` with `attributes` and the label's
/// control.
pub fn encode_labelled(
    out: &mut Vec<u8>,
    message_id: i32,
    dn: &[u8],
    attributes: &[PartialAttribute<'_>],
    label: &Label,
) {
    let control = label.control.as_ref().map(|(oid, value)| Control {
        oid,
        critical: false,
        value: Some(value),
    });
    let controls: &[Control<'_>] = control.as_slice();
    LdapMessage {
        message_id,
        op: ProtocolOp::SearchResultEntry(SearchResultEntry {
            dn,
            attributes: Seq::from_items(attributes),
        }),
        controls: Seq::from_items(controls),
    }
    .encode(out);
}

impl Directory {
    /// The store of the naming context holding `dn`: the one a follower
    /// of a search based there follows.
    pub fn store_holding(&self, dn: &Dn) -> &meridian_store::Store {
        self.stores()
            .nth(self.context_of(dn))
            .unwrap_or_else(|| self.store())
    }

    /// Whether `who` may know of the entry at `dn` (read access to the
    /// entry itself): a follower is told of a deleted entry only then.
    pub fn may_know_of(&self, who: &Identity, dn: &Dn) -> bool {
        matches!(who, Identity::Admin(_))
            || self.access_level(who, dn, None, &Memberships::default()) >= Level::Read
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const A: &[u8] = b"20261129101010.000000Z#000003#001#000000";
    const B: &[u8] = b"20261129101020.000000Z#000000#002#000000";

    #[test]
    fn a_cookie_reads_and_writes_as_slapds() {
        let text = [b"rid=007,sid=001,csn=".as_slice(), A, b";", B].concat();
        let cookie = SyncCookie::parse(&text).unwrap();
        assert_eq!(cookie.rid.as_deref(), Some("007"));
        assert_eq!(cookie.csns.len(), 2);
        let again = cookie.encode(&cookie.csns);
        assert_eq!(again, [b"rid=007,csn=".as_slice(), A, b";", B].concat());
        assert!(SyncCookie::parse(b"rid=abcd").is_err());
        assert!(SyncCookie::parse(b"csn=bogus").is_err());
        assert_eq!(SyncCookie::parse(b"").unwrap(), SyncCookie::default());
    }

    #[test]
    fn changes_count_from_the_cookie_less_the_margin() {
        let cookie = SyncCookie::parse(&[b"rid=001,csn=".as_slice(), A].concat()).unwrap();
        // Same server ID, five seconds before: inside the margin.
        assert!(cookie.changed_since(Some(b"20261129101005.000000Z#000000#001#000000")));
        // A minute before: seen.
        assert!(!cookie.changed_since(Some(b"20261129100910.000000Z#000000#001#000000")));
        // Another server ID the cookie does not know: changed.
        assert!(cookie.changed_since(Some(B)));
        assert_eq!(
            cookie.seen_before().unwrap(),
            b"20261129101000.000000Z#000000#001#000000".to_vec()
        );
    }

    #[test]
    fn a_cookie_advances_only_upwards() {
        let mut cookie = SyncCookie::default();
        assert!(cookie.advance(A));
        assert!(!cookie.advance(A));
        assert!(cookie.advance(B));
        assert!(!cookie.advance(b"20261129101009.000000Z#000000#001#000000"));
    }

    #[test]
    fn the_attributes_a_follower_asks_keep_the_clients_meaning() {
        let (list, asked) = follower_attributes(&[]);
        assert_eq!(list.first().map(Vec::as_slice), Some(b"*".as_slice()));
        assert!(!asked.uuid && !asked.csn);
        let (list, asked) = follower_attributes(&[b"1.1".to_vec()]);
        assert_eq!(list.len(), 2);
        assert!(!asked.uuid);
        let (_, asked) = follower_attributes(&[b"*".to_vec(), b"+".to_vec()]);
        assert!(asked.uuid && asked.csn);
        let (_, asked) = follower_attributes(&[b"cn".to_vec(), b"entryuuid".to_vec()]);
        assert!(asked.uuid && !asked.csn);
    }
}

/// What a following search sends of each changed entry, prepared once
/// for its whole life: its filter compiled, the attributes it asked for
/// parsed, who asks. [`Directory::render_changed`] then reads an entry
/// from a snapshot and encodes it with its label in one pass: no search
/// set up per change, no entry encoded twice.
pub struct ChangeView {
    /// What decides the encoding of an entry for this view: who reads
    /// (their access decides the attributes), what they asked for.
    /// Followers with the same key share an entry's encoding.
    key: std::sync::Arc<str>,
    base: Dn,
    scope: meridian_proto::Scope,
    who: Identity,
    admin: bool,
    compiled: meridian_model::filter::CompiledFilter,
    selection: meridian_model::selection::Selection,
    types_only: bool,
    uuid: Option<meridian_model::schema::AttrId>,
    csn: Option<meridian_model::schema::AttrId>,
}

/// Which change [`Directory::render_changed`] renders: change `at` of
/// `committed`, entry `id`, read from `snapshot` if no follower has yet.
#[derive(Clone, Copy)]
pub struct ChangeAt<'a> {
    /// The commit.
    pub committed: &'a meridian_store::feed::Committed,
    /// The change's position in it.
    pub at: usize,
    /// The entry it changed.
    pub id: meridian_store::EntryId,
    /// A snapshot taken after the commit.
    pub snapshot: &'a meridian_store::Snapshot<'a>,
}

/// What [`Directory::render_changed`] found of an entry.
#[derive(Debug)]
pub struct Rendered {
    /// The entry was sent.
    pub sent: bool,
    /// The entry (sent or not), shared with the commit's other
    /// followers: its DN without a copy per follower.
    pub entry: Arc<meridian_model::entry::Entry>,
    /// Its entryUUID.
    pub uuid: Option<[u8; 16]>,
}

impl Rendered {
    /// The entry's DN.
    pub fn dn(&self) -> &Dn {
        &self.entry.dn
    }
}

impl ChangeView {
    /// Whether `dn` is in the search's scope.
    pub fn in_scope(&self, dn: &Dn) -> bool {
        use meridian_proto::Scope;
        match self.scope {
            Scope::Base => dn.same_entry(&self.base),
            Scope::OneLevel => dn.is_child_of(&self.base),
            Scope::Subtree => dn.is_within(&self.base),
            Scope::Subordinate => dn.is_within(&self.base) && !dn.same_entry(&self.base),
        }
    }
}

impl Directory {
    /// The view of changed entries for a following search `req` (based
    /// at `base`, parsed) by `who`.
    pub fn change_view(
        &self,
        who: &Identity,
        req: &meridian_proto::SearchRequest<'_>,
        base: Dn,
    ) -> ChangeView {
        let admin = matches!(who, Identity::Admin(_));
        let mut asked: Vec<String> = req
            .attributes
            .iter()
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .collect();
        asked.sort();
        let reader = match who {
            Identity::Admin(_) => String::new(),
            Identity::User(dn) => dn.normalized().to_owned(),
            Identity::Anonymous => "\u{1}anonymous".to_owned(),
        };
        let key = format!(
            "{admin}\u{0}{reader}\u{0}{}\u{0}{}",
            req.types_only,
            asked.join("\u{0}")
        );
        ChangeView {
            key: key.into(),
            base,
            scope: req.scope,
            who: who.clone(),
            admin,
            compiled: meridian_model::filter::CompiledFilter::compile(&req.filter, &self.schema),
            selection: meridian_model::selection::Selection::parse(
                req.attributes.iter(),
                &self.schema,
            ),
            types_only: req.types_only,
            uuid: self.schema.attribute_id("entryUUID"),
            csn: self.schema.entry_csn_attr(),
        }
    }

    /// The entry of change `at` of `committed` (entry `id`, read from
    /// `snapshot` by the first follower that looks, shared with the
    /// others): if it is in the view's scope, its filter matches it and
    /// its reader may see it, it is appended as message `message_id`
    /// with the control `label` gives (from its entryUUID and entryCSN;
    /// `None` from `label`: not sent). Its encoding is shared by the
    /// followers with the same view. `None` if the entry is gone.
    pub fn render_changed(
        &self,
        view: &ChangeView,
        change: ChangeAt<'_>,
        message_id: i32,
        out: &mut Vec<u8>,
        label: impl FnOnce(&Found<'_>) -> Option<Label>,
    ) -> Option<Rendered> {
        let ChangeAt {
            committed,
            at,
            id,
            snapshot,
        } = change;
        let shared = committed.entry(at, || snapshot.entry_if_present(id).ok().flatten())?;
        let entry: &meridian_model::entry::Entry = &shared;
        let first = |attr: Option<meridian_model::schema::AttrId>| {
            attr.and_then(|a| entry.get(a))
                .and_then(|a| a.values.first())
                .map(Vec::as_slice)
        };
        let uuid = first(view.uuid).and_then(meridian_store::feed::uuid_octets);
        let groups = &Memberships::default();
        let shown = view.in_scope(&entry.dn)
            && view.compiled.matches(entry, &self.schema)
            && (view.admin
                || self.may_see(
                    &view.who,
                    entry,
                    &crate::rights::SeenFilter::new(&view.compiled),
                    groups,
                ));
        let label = if shown {
            label(&Found {
                dn: entry.dn.original().as_bytes(),
                uuid,
                csn: first(view.csn),
            })
        } else {
            None
        };
        let Some(label) = label else {
            return Some(Rendered {
                sent: false,
                entry: Arc::clone(&shared),
                uuid,
            });
        };
        let encoded = committed.encoded(at, &view.key, || {
            let projection = crate::encode::Projection {
                selection: &view.selection,
                types_only: view.types_only,
                schema: &self.schema,
                values: None,
            };
            let visible = |a: &meridian_model::entry::Attribute| {
                view.admin || self.may_read_attribute(&view.who, &entry.dn, a.desc.attr, groups)
            };
            let mut op = Vec::new();
            let mut w = meridian_ber::Writer::new(&mut op);
            crate::encode::encode_entry_op(&mut w, entry, projection, visible, &[]);
            op
        });
        let mut w = meridian_ber::Writer::new(out);
        let message = w.start(meridian_ber::Tag::SEQUENCE);
        w.integer(meridian_ber::Tag::INTEGER, i64::from(message_id));
        w.raw(&encoded);
        if let Some((oid, value)) = &label.control {
            let controls = w.start(meridian_ber::Tag::context(0, true));
            let control = w.start(meridian_ber::Tag::SEQUENCE);
            w.octets(meridian_ber::Tag::OCTET_STRING, oid);
            w.octets(meridian_ber::Tag::OCTET_STRING, value);
            w.end(control);
            w.end(controls);
        }
        w.end(message);
        Some(Rendered {
            sent: true,
            entry: Arc::clone(&shared),
            uuid,
        })
    }
}
