//! What the directory's integration tests share: a directory over a
//! volatile store, and adds through the same path as the server's.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use meridian_config::{Backend, StorageConfig};
use meridian_directory::clock::Clock;
use meridian_directory::{Directory, Identity, Limits};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp, ResultCode};
use meridian_store::{Store, StoreOptions};

pub const ADMIN_DN: &str = "cn=admin,dc=example,dc=com";

/// A directory for dc=example,dc=com over a memory store.
pub fn directory(clock: Arc<dyn Clock>, limits: Limits) -> (Directory, Arc<Schema>) {
    directory_with(Schema::builtin().unwrap(), clock, limits)
}

/// [`directory`] with `schema`.
pub fn directory_with(
    schema: Schema,
    clock: Arc<dyn Clock>,
    limits: Limits,
) -> (Directory, Arc<Schema>) {
    let storage = StorageConfig {
        backend: Backend::Memory,
        ..StorageConfig::default()
    };
    directory_with_storage(schema, clock, limits, storage)
}

/// [`directory_with`] over a store configured by `storage`.
#[allow(dead_code)] // Not every test file that includes this uses it.
pub fn directory_with_storage(
    schema: Schema,
    clock: Arc<dyn Clock>,
    limits: Limits,
    storage: StorageConfig,
) -> (Directory, Arc<Schema>) {
    let schema = Arc::new(schema);
    let store = Store::open(
        StoreOptions {
            path: std::env::temp_dir(),
            storage,
            suffixes: vec![Dn::parse(b"dc=example,dc=com", &schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(&schema),
    )
    .unwrap();
    let admin = Dn::parse(ADMIN_DN.as_bytes(), &schema).unwrap();
    (Directory::new(store, admin, clock, limits), schema)
}

/// Adds an entry as `who` would over LDAP: its result code.
pub async fn add(d: &Directory, who: &Identity, dn: &str, attrs: &[(&str, &[&str])]) -> ResultCode {
    let mut bytes = Vec::new();
    meridian_proto::message::encode_add(
        &mut bytes,
        1,
        dn.as_bytes(),
        attrs
            .iter()
            .map(|(ty, vs)| (ty.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
    );
    let message = LdapMessage::decode(&bytes, &DecodeLimits::default()).unwrap();
    let ProtocolOp::AddRequest(request) = message.op else {
        unreachable!("encode_add writes an AddRequest")
    };
    match d.prepare_add(who, &request) {
        Ok(command) => d.execute(command).await.code,
        Err(outcome) => outcome.code,
    }
}

/// The DNs of the SearchResultEntry messages in `buf` (what one search
/// step appended), in order.
#[allow(
    dead_code,
    reason = "not every test file that shares this module searches"
)]
pub fn entry_dns(buf: &[u8]) -> Vec<String> {
    let mut dns = Vec::new();
    let mut rest = buf;
    while !rest.is_empty() {
        let len = meridian_ber::frame::pdu_length(rest, 1 << 20).unwrap();
        let (pdu, tail) = rest.split_at(len);
        let msg = LdapMessage::decode(pdu, &DecodeLimits::default()).unwrap();
        if let ProtocolOp::SearchResultEntry(e) = msg.op {
            dns.push(String::from_utf8_lossy(e.dn).into_owned());
        }
        rest = tail;
    }
    dns
}
