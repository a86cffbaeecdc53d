//! Dynamic entries (RFC 2589) against a moving clock: an entry expires
//! when its TTL runs out and not before, a Refresh extends it within the
//! configured bounds, children go before their parents, and nothing can
//! make an entry dynamic or static later. No test sleeps.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use meridian_config::{Backend, IndexKind, StorageConfig};
use meridian_directory::clock::Clock;
use meridian_directory::dynamic::DynamicTtl;
use meridian_directory::{Directory, Limits};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_proto::{PartialAttribute, ResultCode, Seq};
use support::add;

/// A clock the test moves.
#[derive(Debug)]
struct ManualClock(Mutex<SystemTime>);

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }

    fn monotonic(&self) -> std::time::Instant {
        meridian_directory::clock::SystemClock.monotonic()
    }
}

impl ManualClock {
    fn advance(&self, secs: u64) {
        *self.0.lock().unwrap() += Duration::from_secs(secs);
    }
}

/// A directory on a memory store; with `ordered`, entryExpireTimestamp
/// has an ordering index, and the sweep reads the expired entries from it.
fn directory(clock: Arc<ManualClock>, ordered: bool) -> (Directory, Arc<Schema>) {
    let limits = Limits {
        dynamic: DynamicTtl {
            default_secs: 100,
            min_secs: 10,
            max_secs: 1000,
        },
        ..Limits::default()
    };
    let mut storage = StorageConfig {
        backend: Backend::Memory,
        ..StorageConfig::default()
    };
    if ordered {
        storage
            .indexes
            .insert("entryExpireTimestamp".into(), vec![IndexKind::Ord]);
    }
    support::directory_with_storage(Schema::builtin().unwrap(), clock, limits, storage)
}

fn exists(d: &Directory, schema: &Schema, dn: &str) -> bool {
    let dn = Dn::parse(dn.as_bytes(), schema).unwrap();
    d.store().snapshot().unwrap().get(&dn).unwrap().is_some()
}

#[tokio::test]
async fn dynamic_entries_expire_refresh_and_stay_dynamic() {
    expire_refresh_and_stay_dynamic(false).await;
}

#[tokio::test]
async fn dynamic_entries_expire_by_the_ordering_index() {
    expire_refresh_and_stay_dynamic(true).await;
}

async fn expire_refresh_and_stay_dynamic(ordered: bool) {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let clock = Arc::new(ManualClock(Mutex::new(start)));
    let (d, schema) = directory(Arc::clone(&clock), ordered);
    let admin = d.identity_for(Dn::parse(b"cn=admin,dc=example,dc=com", &schema).unwrap());
    let dynamic: &[(&str, &[&str])] = &[
        ("objectClass", &["account", "dynamicObject"]),
        ("uid", &["x"]),
    ];
    assert_eq!(
        add(
            &d,
            &admin,
            "dc=example,dc=com",
            &[("objectClass", &["domain"]), ("dc", &["example"])]
        )
        .await,
        ResultCode::SUCCESS
    );
    assert_eq!(
        add(&d, &admin, "uid=tmp,dc=example,dc=com", dynamic).await,
        ResultCode::SUCCESS
    );
    assert_eq!(
        add(&d, &admin, "uid=kid,uid=tmp,dc=example,dc=com", dynamic).await,
        ResultCode::SUCCESS
    );
    // The class by its OID, or in another case, is the same class: these
    // children are dynamic too (a static one is refused below).
    for (uid, class) in [
        ("oid", "1.3.6.1.4.1.1466.101.119.2"),
        ("upper", "DYNAMICOBJECT"),
    ] {
        let spelled: &[(&str, &[&str])] = &[("objectClass", &["account", class]), ("uid", &[uid])];
        assert_eq!(
            add(
                &d,
                &admin,
                &format!("uid={uid},uid=tmp,dc=example,dc=com"),
                spelled
            )
            .await,
            ResultCode::SUCCESS,
            "{class}"
        );
    }
    // A static entry may not live under a dynamic one.
    let static_kid: &[(&str, &[&str])] = &[("objectClass", &["account"]), ("uid", &["s"])];
    assert_eq!(
        add(&d, &admin, "uid=s,uid=tmp,dc=example,dc=com", static_kid).await,
        ResultCode::UNWILLING_TO_PERFORM
    );

    // The default TTL (100 s) is stored; nothing expires before it.
    let tmp = Dn::parse(b"uid=tmp,dc=example,dc=com", &schema).unwrap();
    let entry = d.store().snapshot().unwrap().get(&tmp).unwrap().unwrap().1;
    let ttl = schema.attribute_id("entryTtl").unwrap();
    assert_eq!(
        entry.get(ttl).unwrap().values.as_slice(),
        vec![b"100".to_vec()]
    );
    clock.advance(99);
    assert_eq!(d.sweep_expired().await.unwrap(), 0);

    // Refresh: clamped to [10, 1000]; it extends the parent only.
    let (command, granted) = d
        .prepare_refresh(&admin, b"uid=tmp,dc=example,dc=com", 5000)
        .unwrap();
    assert_eq!(granted, 1000);
    assert_eq!(d.execute(command).await.code, ResultCode::SUCCESS);
    let (_, granted) = d
        .prepare_refresh(&admin, b"uid=tmp,dc=example,dc=com", 1)
        .unwrap();
    assert_eq!(granted, 10);
    assert_eq!(
        d.prepare_refresh(&admin, b"dc=example,dc=com", 60)
            .unwrap_err()
            .code,
        ResultCode::OBJECT_CLASS_VIOLATION
    );
    assert_eq!(
        d.prepare_refresh(&admin, b"uid=nobody,dc=example,dc=com", 60)
            .unwrap_err()
            .code,
        ResultCode::NO_SUCH_OBJECT
    );

    // At 100 s the children expire (all three: dynamic, however the
    // class was spelled); the refreshed parent lives on.
    clock.advance(1);
    assert_eq!(d.sweep_expired().await.unwrap(), 3);
    assert!(!exists(&d, &schema, "uid=kid,uid=tmp,dc=example,dc=com"));
    assert!(!exists(&d, &schema, "uid=oid,uid=tmp,dc=example,dc=com"));
    assert!(exists(&d, &schema, "uid=tmp,dc=example,dc=com"));
    clock.advance(1000);
    assert_eq!(d.sweep_expired().await.unwrap(), 1);
    assert!(!exists(&d, &schema, "uid=tmp,dc=example,dc=com"));

    // A parent and child expiring together go in one sweep, child first.
    assert_eq!(
        add(&d, &admin, "uid=tmp,dc=example,dc=com", dynamic).await,
        ResultCode::SUCCESS
    );
    assert_eq!(
        add(&d, &admin, "uid=kid,uid=tmp,dc=example,dc=com", dynamic).await,
        ResultCode::SUCCESS
    );
    clock.advance(100);
    assert_eq!(d.sweep_expired().await.unwrap(), 2);

    // No modify makes an entry dynamic or static.
    assert_eq!(
        add(&d, &admin, "uid=tmp,dc=example,dc=com", dynamic).await,
        ResultCode::SUCCESS
    );
    for (op, values) in [
        (
            meridian_proto::ModifyOperation::Delete,
            &["dynamicObject"][..],
        ),
        (meridian_proto::ModifyOperation::Replace, &["account"][..]),
    ] {
        let vals: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        let change = [meridian_proto::Change {
            operation: op,
            modification: PartialAttribute {
                ty: b"objectClass",
                values: Seq::from_items(&vals),
            },
        }];
        let request = meridian_proto::ModifyRequest {
            dn: b"uid=tmp,dc=example,dc=com",
            changes: Seq::from_items(&change),
        };
        assert_eq!(
            d.prepare_modify(&admin, &request, false).unwrap_err().code,
            ResultCode::OBJECT_CLASS_VIOLATION
        );
    }
}
