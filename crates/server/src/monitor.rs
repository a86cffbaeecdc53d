//! `cn=Monitor`: the server's figures as entries, laid out as slapd's
//! back-monitor lays them out where the two have the same figures
//! (`cn=Connections`, `cn=Operations`, `cn=Statistics`, `cn=Databases`,
//! `cn=Time`, with slapd's object classes and attribute types), so that
//! monitoring scripts written for slapd work. The entries are built for
//! each search from the counts of `metrics.rs` and the stores; they are
//! the administrator's to read, and whom an `[[access]]` rule naming the
//! subtree (`subtree:cn=Monitor`) grants read (a catch-all `to = "*"`
//! does not open it; anyone else finds nothing there); never written.

use meridian_directory::{Directory, Identity};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::selection::Selection;
use meridian_proto::{ResultCode, Scope, SearchRequest};

use crate::metrics;
use crate::root_dse::build;

/// The subtree's root, named in the root DSE's `monitorContext`.
pub(crate) const MONITOR_DN: &str = "cn=Monitor";

/// slapd's names for the operations the access log calls BIND, SRCH...
const OPERATION_NAMES: [(&str, &str); 10] = [
    ("BIND", "Bind"),
    ("UNBIND", "Unbind"),
    ("SRCH", "Search"),
    ("CMP", "Compare"),
    ("MOD", "Modify"),
    ("MODRDN", "Modrdn"),
    ("ADD", "Add"),
    ("DEL", "Delete"),
    ("ABANDON", "Abandon"),
    ("EXT", "Extended"),
];

/// The subtree's root as a DN, parsed once when the server starts (every
/// search asks [`holds`] of its base).
pub(crate) fn root(schema: &Schema) -> Option<Dn> {
    Dn::parse(MONITOR_DN.as_bytes(), schema).ok()
}

/// Whether `base` is in the cn=Monitor subtree whose root is `root`.
pub(crate) fn holds(base: &Dn, root: Option<&Dn>) -> bool {
    root.is_some_and(|root| base.is_within(root))
}

/// Answers a search whose base is in cn=Monitor: the entries matching
/// in scope appended to `buf`; the result code and message.
pub(crate) fn search(
    directory: &Directory,
    who: &Identity,
    request: &SearchRequest<'_>,
    base: &Dn,
    monitor_root: Option<&Dn>,
    message_id: i32,
    buf: &mut Vec<u8>,
) -> (ResultCode, String) {
    let schema = directory.schema();
    let no_such = || {
        (
            ResultCode::NO_SUCH_OBJECT,
            format!("no such entry: {}", base.original()),
        )
    };
    if !monitor_root.is_some_and(|root| directory.may_read_named(who, root)) {
        // As if it were not there: what it would show is the
        // administrator's to see, or whom a rule naming it allows.
        return no_such();
    }
    let entries = entries(directory);
    if !entries.iter().any(|e| e.dn.same_entry(base)) {
        return no_such();
    }
    let filter = CompiledFilter::compile(&request.filter, schema);
    let selection = Selection::parse(request.attributes.iter(), schema);
    let projection = meridian_directory::encode::Projection {
        values: None,
        selection: &selection,
        types_only: request.types_only,
        schema,
    };
    for entry in &entries {
        let in_scope = match request.scope {
            Scope::Base => entry.dn.same_entry(base),
            Scope::OneLevel => entry.dn.is_child_of(base),
            Scope::Subtree => entry.dn.is_within(base),
            Scope::Subordinate => entry.dn.is_descendant_of(base),
        };
        if in_scope && filter.matches(entry, schema) {
            let has_children = entries.iter().any(|e| e.dn.is_child_of(&entry.dn));
            let computed = [(
                "hasSubordinates",
                vec![if has_children {
                    b"TRUE".to_vec()
                } else {
                    b"FALSE".to_vec()
                }],
            )];
            let wanted = schema
                .attribute_id("hasSubordinates")
                .is_some_and(|id| selection.names(id, schema));
            meridian_directory::encode::encode_entry(
                buf,
                message_id,
                entry,
                projection,
                |_| true,
                if wanted { &computed[..] } else { &[] },
            );
        }
    }
    (ResultCode::SUCCESS, String::new())
}

/// An entry's attributes by name, as `root_dse::build` takes them.
type Attrs = Vec<(&'static str, Vec<String>)>;

/// Every entry of the subtree, as of now.
///
/// One function on purpose (over 150 lines): it is the list of
/// cn=Monitor's entries in the order slapd's back-monitor lays them out,
/// each a few lines, all read from one look at the figures.
fn entries(directory: &Directory) -> Vec<Entry> {
    let figures = metrics::figures();
    let count = |name: &str| -> (u64, u64) {
        figures
            .ops
            .iter()
            .find(|o| o.name == name)
            .map_or((0, 0), |o| {
                let initiated = o.answered + o.unanswered;
                // Unbind and Abandon have no response: each one counted
                // is completed (slapd counts them so).
                let completed = if matches!(o.name, "UNBIND" | "ABANDON") {
                    initiated
                } else {
                    o.answered
                };
                (initiated, completed)
            })
    };
    let mut specs: Vec<(String, Attrs)> = Vec::new();
    let container = |cn: &str, description: &str| -> Attrs {
        vec![
            ("objectClass", vec!["monitorContainer".into()]),
            ("cn", vec![cn.to_owned()]),
            ("description", vec![description.to_owned()]),
        ]
    };
    let counter = |cn: &str, value: u64| -> Attrs {
        vec![
            ("objectClass", vec!["monitorCounterObject".into()]),
            ("cn", vec![cn.to_owned()]),
            ("monitorCounter", vec![value.to_string()]),
        ]
    };
    specs.push((
        MONITOR_DN.to_owned(),
        vec![
            ("objectClass", vec!["monitorServer".into()]),
            ("cn", vec!["Monitor".into()]),
            (
                "description",
                vec![
                    "This subtree contains monitoring/managing objects.".into(),
                    "Most of the information is held in operational attributes, which must be explicitly requested.".into(),
                ],
            ),
            (
                "monitoredInfo",
                vec![format!("Meridian {}", env!("CARGO_PKG_VERSION"))],
            ),
        ],
    ));
    specs.push((
        format!("cn=Connections,{MONITOR_DN}"),
        container(
            "Connections",
            "This subsystem contains information about connections.",
        ),
    ));
    specs.push((
        format!("cn=Total,cn=Connections,{MONITOR_DN}"),
        counter("Total", figures.connections),
    ));
    specs.push((
        format!("cn=Current,cn=Connections,{MONITOR_DN}"),
        counter(
            "Current",
            u64::try_from(figures.connections_open).unwrap_or(0),
        ),
    ));
    let (mut initiated, mut completed) = (0, 0);
    let mut operations = Vec::new();
    for (ours, theirs) in OPERATION_NAMES {
        let (i, c) = count(ours);
        initiated += i;
        completed += c;
        operations.push((
            format!("cn={theirs},cn=Operations,{MONITOR_DN}"),
            vec![
                ("objectClass", vec!["monitorOperation".into()]),
                ("cn", vec![theirs.to_owned()]),
                ("monitorOpInitiated", vec![i.to_string()]),
                ("monitorOpCompleted", vec![c.to_string()]),
            ],
        ));
    }
    let mut ops_container = container(
        "Operations",
        "This subsystem contains information about performed operations.",
    );
    ops_container.push(("monitorOpInitiated", vec![initiated.to_string()]));
    ops_container.push(("monitorOpCompleted", vec![completed.to_string()]));
    specs.push((format!("cn=Operations,{MONITOR_DN}"), ops_container));
    specs.extend(operations);
    specs.push((
        format!("cn=Statistics,{MONITOR_DN}"),
        container("Statistics", "This subsystem contains statistics."),
    ));
    specs.push((
        format!("cn=Bytes,cn=Statistics,{MONITOR_DN}"),
        counter("Bytes", figures.bytes_sent),
    ));
    specs.push((
        format!("cn=Entries,cn=Statistics,{MONITOR_DN}"),
        counter("Entries", figures.search_entries),
    ));
    let suffixes: Vec<String> = directory
        .stores()
        .flat_map(|s| s.suffixes())
        .map(|s| s.original().to_owned())
        .collect();
    let mut databases = container(
        "Databases",
        "This subsystem contains information about configured databases.",
    );
    databases.push(("namingContexts", suffixes.clone()));
    specs.push((format!("cn=Databases,{MONITOR_DN}"), databases));
    for (i, store) in directory.stores().enumerate() {
        let cn = format!("Database {}", i + 1);
        specs.push((
            format!("cn={cn},cn=Databases,{MONITOR_DN}"),
            vec![
                ("objectClass", vec!["monitoredObject".into()]),
                ("cn", vec![cn.clone()]),
                ("monitoredInfo", vec!["mdb".into()]),
                ("monitorIsShadow", vec!["FALSE".into()]),
                (
                    "namingContexts",
                    store
                        .suffixes()
                        .iter()
                        .map(|s| s.original().to_owned())
                        .collect(),
                ),
                (
                    "readOnly",
                    vec![
                        if store.refuses_writes() {
                            "TRUE"
                        } else {
                            "FALSE"
                        }
                        .into(),
                    ],
                ),
            ],
        ));
    }
    specs.push((
        format!("cn=Time,{MONITOR_DN}"),
        container("Time", "This subsystem contains information about time."),
    ));
    // Wall-clock facts for people, never compared by the server.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    for (cn, at) in [("Start", metrics::started()), ("Current", now)] {
        specs.push((
            format!("cn={cn},cn=Time,{MONITOR_DN}"),
            vec![
                ("objectClass", vec!["monitoredObject".into()]),
                ("cn", vec![cn.to_owned()]),
                ("monitorTimestamp", vec![generalized_time(at)]),
            ],
        ));
    }
    let schema = directory.schema();
    specs
        .iter()
        .filter_map(|(dn, attrs)| match build(dn.as_bytes(), attrs, schema) {
            Ok(entry) => Some(entry),
            Err(e) => {
                // Built from our own schema: a refusal is a bug of ours.
                tracing::error!(dn, "a cn=Monitor entry was refused: {e}");
                None
            }
        })
        .collect()
}

/// `YYYYMMDDHHMMSSZ` of a wall-clock time.
fn generalized_time(at: std::time::SystemTime) -> String {
    meridian_directory::clock::generalized_time(at).0
}
