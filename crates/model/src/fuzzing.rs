//! Properties every fuzz input must satisfy, shared by the `cargo fuzz`
//! targets (`fuzz/fuzz_targets/schema.rs`, `dn.rs`) and the seeded loops
//! under `cargo test` (`tests/fuzz_smoke.rs`).

use crate::Schema;
use crate::dn::Dn;

/// The schema loader (OpenLDAP `.schema` text or LDIF subschema entries)
/// on arbitrary text, over the built-in schema: it never panics; an error
/// names a line inside the text; and after any outcome the schema still
/// answers for what it held before.
pub fn check_schema_text(base: &Schema, data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let mut schema = base.clone();
    let lines = text.lines().count().max(1);
    if let Err(e) = schema.load_str(text, "fuzz")
        && (e.line == 0 || e.line > lines + 1)
    {
        return Err(format!("error outside the input ({lines} lines): {e}"));
    }
    if schema.attribute_id("cn").is_none() || schema.attribute_id("objectClass").is_none() {
        return Err("a load lost the built-in cn or objectClass".into());
    }
    Ok(())
}

/// Schema-aware DN parsing on arbitrary bytes: it never panics; a DN is
/// a child of its parent; and normalising converges: the normal form of
/// a normal form is a fixed point.
///
/// Not the normal form itself: RFC 4518 removes insignificant characters
/// (spaces, controls; for telephoneNumber also hyphens) after its NFKC
/// step, so `s \u{3}\u{323}` prepares to `s\u{323}`, which NFKC would
/// compose to `ṣ` on a second pass. slapd follows the same order; what
/// matters is that a value is prepared one way every time.
pub fn check_dn_normalisation(schema: &Schema, data: &[u8]) -> Result<(), String> {
    let Ok(dn) = Dn::parse(data, schema) else {
        return Ok(());
    };
    let shown = || String::from_utf8_lossy(data).into_owned();
    let renormalise = |text: &str| Dn::parse(text.as_bytes(), schema).ok();
    if let Some(twice) = renormalise(dn.normalized())
        && let Some(thrice) = renormalise(twice.normalized())
        && thrice.normalized() != twice.normalized()
    {
        return Err(format!(
            "{:?} normalises to {:?}, then {:?}, then {:?}",
            shown(),
            dn.normalized(),
            twice.normalized(),
            thrice.normalized()
        ));
    }
    if let Some(parent) = dn.parent()
        && !dn.is_child_of(&parent)
    {
        return Err(format!("{:?} is not a child of its parent", shown()));
    }
    Ok(())
}
