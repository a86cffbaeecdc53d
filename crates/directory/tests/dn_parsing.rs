//! A request's DN is parsed with its directory's own schema, also when
//! the same thread last parsed a sibling's DN for another directory:
//! each worker thread keeps the parent of the last DN it parsed, and a
//! parent parsed with one schema must not be reused with another.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use meridian_directory::Limits;
use meridian_directory::clock::SystemClock;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_proto::ResultCode;
use support::{ADMIN_DN, add};

#[tokio::test(flavor = "current_thread")]
async fn a_parent_parsed_with_one_schema_is_not_reused_with_another() {
    let mut extended = Schema::builtin().unwrap();
    extended
        .load_str(
            "attributetype ( 1.3.6.1.4.1.99999.7.1 NAME 'regionName' SUP name )",
            "test.schema",
        )
        .unwrap();
    let (wide, wide_schema) =
        support::directory_with(extended, Arc::new(SystemClock), Limits::default());
    let (narrow, narrow_schema) = support::directory(Arc::new(SystemClock), Limits::default());
    let wide_admin = wide.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &wide_schema).unwrap());
    let narrow_admin = narrow.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &narrow_schema).unwrap());
    let person: &[(&str, &[&str])] = &[("objectClass", &["account"])];
    // Siblings under a parent that only the wide schema can name: the
    // wide directory parses them (the parent is missing, so the adds
    // fail later, as noSuchObject).
    for uid in ["a", "b"] {
        let dn = format!("uid={uid},regionName=north,dc=example,dc=com");
        let code = add(&wide, &wide_admin, &dn, person).await;
        assert_eq!(code, ResultCode::NO_SUCH_OBJECT, "{dn}");
    }
    // The same thread, a sibling, the narrow directory: its schema has
    // no regionName.
    let dn = "uid=c,regionName=north,dc=example,dc=com";
    let code = add(&narrow, &narrow_admin, dn, person).await;
    assert_eq!(code, ResultCode::INVALID_DN_SYNTAX);
}
