//! `meridian verify --against ldap://old-server`: after (or during) a
//! live migration, is Meridian's copy the same as the source?
//!
//! Both are searched over LDAP for every entry below the base, with the
//! user attributes and the operational ones a copy keeps
//! (`migrate::follow::KEPT_OPERATIONAL`). Each entry becomes a digest
//! (SHA-256 of its attributes, names lower-cased, values sorted) under
//! its normalized DN: the source's are held, a few dozen bytes an entry,
//! never the entries themselves; Meridian's are compared as they
//! stream in. The differences are named by DN and attribute: an entry
//! on one side only, or an attribute whose values differ (those two
//! entries are read again, one at a time, to say which). Exit status 0:
//! identical; 1: differences.

use std::collections::BTreeMap;

use anyhow::bail;
use meridian_proto::{Filter, Scope};
use sha2::{Digest as _, Sha256};

use crate::ldap_client::{Client, Endpoint, OwnedEntry};
use crate::migrate::follow::KEPT_OPERATIONAL;

/// Most differences listed; the count is always given.
const LISTED: usize = 100;

/// What `verify --against` compares.
pub(crate) struct Comparison {
    pub(crate) source: Endpoint,
    pub(crate) target: Endpoint,
    pub(crate) base: String,
}

/// A DN as two servers may spell it differently: lower case, no space
/// after a separator.
fn normalized_dn(dn: &str) -> String {
    dn.to_ascii_lowercase().replace(", ", ",")
}

/// The attributes compared, in a fixed order: names lower-cased, values
/// sorted.
fn canonical(entry: &OwnedEntry) -> BTreeMap<String, Vec<Vec<u8>>> {
    entry
        .attributes
        .iter()
        .map(|(name, values)| {
            let mut values = values.clone();
            values.sort();
            (name.to_ascii_lowercase(), values)
        })
        .collect()
}

fn digest(entry: &OwnedEntry) -> [u8; 32] {
    let mut hash = Sha256::new();
    for (name, values) in canonical(entry) {
        hash.update((name.len() as u64).to_be_bytes());
        hash.update(name.as_bytes());
        hash.update((values.len() as u64).to_be_bytes());
        for value in values {
            hash.update((value.len() as u64).to_be_bytes());
            hash.update(&value);
        }
    }
    hash.finalize().into()
}

fn attributes() -> Vec<&'static [u8]> {
    let mut list: Vec<&[u8]> = vec![b"*"];
    list.extend(KEPT_OPERATIONAL.iter().map(|a| a.as_bytes()));
    list
}

pub(crate) fn run(comparison: &Comparison) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let differences = runtime.block_on(compare(comparison))?;
    if differences.is_empty() {
        return Ok(());
    }
    for line in differences.iter().take(LISTED) {
        println!("{line}");
    }
    if differences.len() > LISTED {
        println!("... and {} more", differences.len() - LISTED);
    }
    bail!(
        "{} entries differ between {} and {}",
        differences.len(),
        comparison.source.url,
        comparison.target.url
    )
}

/// The differences, one line each.
async fn compare(comparison: &Comparison) -> anyhow::Result<Vec<String>> {
    let base = comparison.base.as_str();
    let all = Filter::Present(b"objectClass");
    let wanted = attributes();
    let mut source = Client::open(&comparison.source).await?;
    // Normalized DN → (the DN as the source spells it, its digest).
    let mut theirs: BTreeMap<String, (String, [u8; 32])> = BTreeMap::new();
    source
        .search_each(base, Scope::Subtree, all, &wanted, |entry| {
            theirs.insert(normalized_dn(&entry.dn), (entry.dn.clone(), digest(&entry)));
            Ok(())
        })
        .await?;
    let mut target = Client::open(&comparison.target).await?;
    let mut differing: Vec<String> = Vec::new();
    let mut only_ours: Vec<String> = Vec::new();
    let mut entries = 0u64;
    target
        .search_each(base, Scope::Subtree, all, &wanted, |entry| {
            entries += 1;
            match theirs.remove(&normalized_dn(&entry.dn)) {
                Some((_, sum)) if sum == digest(&entry) => {}
                Some(_) => differing.push(entry.dn),
                None => only_ours.push(entry.dn),
            }
            Ok(())
        })
        .await?;
    let mut lines = Vec::new();
    for (dn, _) in theirs.values() {
        lines.push(format!("only in {}: {dn}", comparison.source.url));
    }
    for dn in only_ours {
        lines.push(format!("only in {}: {dn}", comparison.target.url));
    }
    for dn in differing.iter().take(LISTED) {
        let ours = read(&mut target, dn).await?;
        let their = read(&mut source, dn).await?;
        lines.push(format!(
            "differs: {dn}: {}",
            attribute_differences(&their, &ours)
        ));
    }
    if differing.len() > LISTED {
        lines.extend(
            differing
                .iter()
                .skip(LISTED)
                .map(|dn| format!("differs: {dn}")),
        );
    }
    if lines.is_empty() {
        println!(
            "identical: {entries} entries below {base} in {} and {}",
            comparison.source.url, comparison.target.url
        );
    }
    Ok(lines)
}

/// One entry, read again.
async fn read(client: &mut Client, dn: &str) -> anyhow::Result<OwnedEntry> {
    let wanted = attributes();
    Ok(client.read_entry(dn, &wanted).await?.unwrap_or_default())
}

/// Which attributes differ between the source's entry and ours.
fn attribute_differences(theirs: &OwnedEntry, ours: &OwnedEntry) -> String {
    let (theirs, ours) = (canonical(theirs), canonical(ours));
    let mut names: Vec<&String> = theirs.keys().chain(ours.keys()).collect();
    names.sort();
    names.dedup();
    let differ: Vec<String> = names
        .into_iter()
        .filter(|name| theirs.get(*name) != ours.get(*name))
        .map(|name| match (theirs.get(name), ours.get(name)) {
            (Some(_), None) => format!("{name} (missing here)"),
            (None, Some(_)) => format!("{name} (only here)"),
            _ => format!("{name} (values)"),
        })
        .collect();
    differ.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(attributes: &[(&str, &[&str])]) -> OwnedEntry {
        OwnedEntry {
            dn: "cn=a,dc=example,dc=com".into(),
            attributes: attributes
                .iter()
                .map(|(n, v)| {
                    (
                        (*n).to_owned(),
                        v.iter().map(|x| x.as_bytes().to_vec()).collect(),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn digests_ignore_name_case_and_value_order_but_not_values() {
        let a = entry(&[("cn", &["a"]), ("mail", &["x", "y"])]);
        let b = entry(&[("MAIL", &["y", "x"]), ("CN", &["a"])]);
        let c = entry(&[("cn", &["a"]), ("mail", &["x", "z"])]);
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        assert_eq!(attribute_differences(&a, &c), "mail (values)");
        assert_eq!(normalized_dn("CN=A, DC=Example"), "cn=a,dc=example");
    }
}
