//! The entries the server itself publishes: the root DSE (RFC 4512
//! section 5.1), what a client reads first to learn what this server
//! supports, and the subschema subentry `cn=Subschema` (RFC 4512 section
//! 4.2). Both are model entries, so filters and attribute selection work
//! on them exactly as on stored entries.

use meridian_directory::encode::{Projection, encode_entry};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::selection::Selection;
use meridian_model::subschema::{SUBSCHEMA_DN, subschema_attributes};
use meridian_proto::SearchRequest;
use meridian_proto::extended::oid as extended_oid;

/// "All operational attributes" (`+`, RFC 3673).
const FEATURE_ALL_OPERATIONAL: &str = "1.3.6.1.4.1.4203.1.5.1";
/// Absolute true and false filters `(&)` and `(|)` (RFC 4526).
const FEATURE_TRUE_FALSE_FILTERS: &str = "1.3.6.1.4.1.4203.1.5.3";

/// Root DSE attributes that change while the server runs (a cluster
/// node's role, term and applied index), read at each root DSE search.
pub trait LiveAttributes: Send + Sync {
    /// The attributes now: names from the schema, values as text.
    fn attributes(&self) -> Vec<(&'static str, Vec<String>)>;
}

/// The server's own entries, built once at start.
pub(crate) struct PublishedEntries {
    root: Entry,
    subschema: Entry,
    /// The root DSE's attributes, for a rebuild with live ones.
    root_attrs: Vec<(&'static str, Vec<String>)>,
    live: Option<std::sync::Arc<dyn LiveAttributes>>,
}

impl std::fmt::Debug for PublishedEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishedEntries")
            .field("root", &self.root)
            .field("live", &self.live.is_some())
            .finish_non_exhaustive()
    }
}

impl PublishedEntries {
    /// The extended operations served.
    pub(crate) const SUPPORTED_EXTENSIONS: &'static [&'static [u8]] = &[
        extended_oid::WHO_AM_I,
        extended_oid::PASSWORD_MODIFY,
        extended_oid::CANCEL,
        extended_oid::REFRESH,
        extended_oid::START_TRANSACTION,
        extended_oid::END_TRANSACTION,
    ];

    /// The root DSE naming `suffixes` and `cn=Subschema` for `schema`;
    /// StartTLS is listed when `tls` (a certificate is configured), SASL
    /// EXTERNAL when `external` (client certificates are asked for).
    pub(crate) fn new(
        suffixes: &[String],
        schema: &Schema,
        tls: bool,
        external: bool,
    ) -> Result<Self, meridian_model::ModelError> {
        let text = |values: &[&[u8]]| {
            values
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect()
        };
        let vendor_version = format!("Meridian {}", env!("CARGO_PKG_VERSION"));
        let root_attrs: Vec<(&'static str, Vec<String>)> = vec![
            ("objectClass", vec!["top".into()]),
            ("namingContexts", suffixes.to_vec()),
            // RFC 2589: where dynamic entries may be created.
            ("dynamicSubtrees", suffixes.to_vec()),
            ("subschemaSubentry", vec![SUBSCHEMA_DN.to_owned()]),
            // As slapd's: where the monitoring entries are.
            (
                "monitorContext",
                vec![crate::monitor::MONITOR_DN.to_owned()],
            ),
            ("supportedLDAPVersion", vec!["3".into()]),
            (
                "supportedControl",
                text(&crate::session::supported_control_oids()),
            ),
            ("supportedExtension", {
                let mut extensions = text(Self::SUPPORTED_EXTENSIONS);
                if tls {
                    extensions.push(String::from_utf8_lossy(extended_oid::START_TLS).into_owned());
                }
                extensions
            }),
            (
                "supportedFeatures",
                vec![
                    FEATURE_ALL_OPERATIONAL.into(),
                    FEATURE_TRUE_FALSE_FILTERS.into(),
                ],
            ),
            ("vendorName", vec!["Meridian".into()]),
            ("vendorVersion", vec![vendor_version]),
        ];
        let mut root_attrs = root_attrs;
        if external {
            root_attrs.push(("supportedSASLMechanisms", vec!["EXTERNAL".into()]));
        }
        let root = build(b"", &root_attrs, schema)?;
        let mut sub_attrs = subschema_attributes(schema);
        sub_attrs.push(("subschemaSubentry", vec![SUBSCHEMA_DN.to_owned()]));
        let subschema = build(SUBSCHEMA_DN.as_bytes(), &sub_attrs, schema)?;
        Ok(PublishedEntries {
            root,
            subschema,
            root_attrs,
            live: None,
        })
    }

    /// Lists the extended operation `oid` in `supportedExtension`.
    pub(crate) fn add_extension(&mut self, oid: &[u8], schema: &Schema) {
        let oid = String::from_utf8_lossy(oid).into_owned();
        for (name, values) in &mut self.root_attrs {
            if *name == "supportedExtension" && !values.contains(&oid) {
                values.push(oid.clone());
            }
        }
        match build(b"", &self.root_attrs, schema) {
            Ok(root) => self.root = root,
            Err(e) => tracing::error!("the root DSE with {oid} was refused: {e}"),
        }
    }

    /// Adds `live` attributes to the root DSE.
    pub(crate) fn set_live(&mut self, live: std::sync::Arc<dyn LiveAttributes>) {
        self.live = Some(live);
    }

    /// The published entry at `base`, if the base names one.
    pub(crate) fn lookup(&self, base: &Dn, schema: &Schema) -> Option<std::borrow::Cow<'_, Entry>> {
        use std::borrow::Cow;
        if base.is_root() {
            let Some(live) = &self.live else {
                return Some(Cow::Borrowed(&self.root));
            };
            let mut attrs = self.root_attrs.clone();
            attrs.extend(live.attributes());
            // A live value the schema refuses is a bug of ours: the
            // root DSE is then served without the live attributes.
            Some(build(b"", &attrs, schema).map_or_else(
                |e| {
                    tracing::error!("live root DSE attributes refused: {e}");
                    Cow::Borrowed(&self.root)
                },
                Cow::Owned,
            ))
        } else if base.same_entry(&self.subschema.dn) {
            Some(Cow::Borrowed(&self.subschema))
        } else {
            None
        }
    }

    /// Evaluates `filter` against `entry` and, when it matches, appends
    /// the SearchResultEntry for the requested selection.
    pub(crate) fn search(
        &self,
        entry: &Entry,
        request: &SearchRequest<'_>,
        schema: &Schema,
        values: Option<&meridian_model::filter::ValuesFilter>,
        message_id: i32,
        buf: &mut Vec<u8>,
    ) {
        if !CompiledFilter::compile(&request.filter, schema).matches(entry, schema) {
            return;
        }
        let selection = Selection::parse(request.attributes.iter(), schema);
        let projection = Projection {
            values,
            selection: &selection,
            types_only: request.types_only,
            schema,
        };
        encode_entry(buf, message_id, entry, projection, |_| true, &[]);
    }
}

pub(crate) fn build(
    dn: &[u8],
    attrs: &[(&str, Vec<String>)],
    schema: &Schema,
) -> Result<Entry, meridian_model::ModelError> {
    let dn = if dn.is_empty() {
        Dn::root()
    } else {
        Dn::parse(dn, schema)?
    };
    Entry::new(
        dn,
        attrs
            .iter()
            .map(|(name, values)| (name.as_bytes(), values.iter().map(String::as_bytes))),
        schema,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_proto::{
        Depth, DerefAliases, Filter, LdapMessage, ProtocolOp, Scope, Seq, filter_str,
    };

    fn published() -> (PublishedEntries, Schema) {
        let schema = Schema::builtin().unwrap();
        (
            PublishedEntries::new(&["dc=example,dc=com".to_owned()], &schema, false, false)
                .unwrap(),
            schema,
        )
    }

    fn search(base: &str, filter: &str, selection: &[&[u8]]) -> Vec<String> {
        let (p, schema) = published();
        let base = if base.is_empty() {
            Dn::root()
        } else {
            Dn::parse(base.as_bytes(), &schema).unwrap()
        };
        let Some(entry) = p.lookup(&base, &schema) else {
            return vec!["<none>".into()];
        };
        let ber = filter_str::parse(filter, 32).unwrap();
        let f = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        let mut buf = Vec::new();
        let request = SearchRequest {
            base: b"",
            scope: Scope::Base,
            deref: DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: f,
            attributes: Seq::from_items(selection),
        };
        p.search(&entry, &request, &schema, None, 1, &mut buf);
        if buf.is_empty() {
            return Vec::new();
        }
        let msg = LdapMessage::decode(&buf, &Default::default()).unwrap();
        let ProtocolOp::SearchResultEntry(e) = msg.op else {
            panic!()
        };
        e.attributes
            .iter()
            .map(|a| String::from_utf8(a.ty.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn root_dse_filters_and_selection() {
        assert_eq!(search("", "(objectClass=*)", &[]), ["objectClass"]);
        assert_eq!(
            search("", "(objectClass=person)", &[]),
            Vec::<String>::new()
        );
        assert_eq!(
            search("", "(vendorName=Meridian)", &[b"vendorName"]),
            ["vendorName"]
        );
        assert!(search("", "(objectClass=*)", &[b"+"]).contains(&"supportedControl".to_string()));
        assert_eq!(
            search("", "(objectClass=*)", &[b"1.1"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn subschema_is_published_under_cn_subschema() {
        let attrs = search(
            "CN=subschema",
            "(objectClass=subschema)",
            &[b"attributeTypes", b"objectClasses"],
        );
        assert_eq!(attrs, ["attributeTypes", "objectClasses"]);
        assert_eq!(search("cn=other", "(objectClass=*)", &[]), ["<none>"]);
    }
}
