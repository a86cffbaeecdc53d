//! `meridian migrate --follow ldap://old-server`: a live migration. A
//! content synchronization consumer (RFC 4533) of an OpenLDAP server
//! with the syncprov overlay, which copies its entries into a running
//! Meridian (one server, or any node of a cluster) and keeps applying
//! its changes until the operator cuts the clients over; then `meridian
//! verify --against` compares the two.
//!
//! The copy is written over LDAP as the administrator with the Relax
//! Rules control, so entries keep their entryUUID, entryCSN, timestamps,
//! creator and modifier, and their password hashes. An entry is found in
//! Meridian by its entryUUID (indexed by default): a new one is added, a
//! changed one is renamed if it moved and given the source's values
//! where they differ, a deleted one deleted. The present phase of a
//! refresh deletes whatever Meridian holds below the base that the
//! source did not name. Applying is idempotent, so the cookie is saved
//! (in `--state`, atomically) after what it covers is applied: a restart
//! of either side resumes from it and applies at most some changes again.
//! An add whose parent is not there yet waits for the next add that
//! succeeds.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use meridian_proto::message::{AddRequest, PartialAttribute};
use meridian_proto::sync::{
    SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateValue, decode_sync_done, oid as sync_oid,
};
use meridian_proto::{Ava, Control, Filter, ProtocolOp, ResultCode, Scope, Seq};

use crate::ldap_client::{Client, Endpoint, OwnedEntry, Refused, decode, search};

mod changes;

/// The operational attributes a copy keeps: what says which entry it is
/// and what happened to it, and the password policy's state. Others are
/// the server's own (structuralObjectClass, entryDN, hasSubordinates,
/// subschemaSubentry, contextCSN) or kept by Meridian itself (memberOf).
pub(crate) const KEPT_OPERATIONAL: &[&str] = &[
    "entryUUID",
    "entryCSN",
    "createTimestamp",
    "creatorsName",
    "modifyTimestamp",
    "modifiersName",
    "pwdChangedTime",
    "pwdAccountLockedTime",
    "pwdFailureTime",
    "pwdHistory",
    "pwdReset",
    "pwdPolicySubentry",
];

/// What `migrate --follow` was told.
#[derive(Debug, Clone)]
pub(crate) struct Following {
    pub(crate) source: Endpoint,
    pub(crate) target: Endpoint,
    pub(crate) base: String,
    /// Where the cookie is kept between runs.
    pub(crate) state: PathBuf,
    /// One refresh (refreshOnly), then exit.
    pub(crate) once: bool,
}

/// How one session with the source ended.
enum Ended {
    /// The refresh of `--once` is done.
    Refreshed,
    /// The source said to synchronize again from the start.
    RefreshRequired,
}

/// Follows until `--once`'s refresh ends; otherwise until killed,
/// reconnecting (with the saved cookie) a second after any failure.
pub(crate) fn run(following: &Following) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        loop {
            match session(following).await {
                Ok(Ended::Refreshed) => return Ok(()),
                Ok(Ended::RefreshRequired) => {
                    eprintln!(
                        "{}: a full refresh is required; starting over",
                        following.source.url
                    );
                    save_cookie(&following.state, None)?;
                }
                Err(e) if following.once => return Err(e),
                Err(e) => {
                    eprintln!(
                        "following {}: {e:#}; trying again in a second",
                        following.source.url
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    })
}

/// One connection to each side: the refresh, then (unless `--once`) the
/// changes as they come.
async fn session(following: &Following) -> anyhow::Result<Ended> {
    let mut source = Client::open(&following.source).await?;
    let cookie = load_cookie(&following.state)?;
    let mut copy = Copy {
        target: Client::open(&following.target).await?,
        base: following.base.clone(),
        waiting: Vec::new(),
        // A first refresh sends every entry as an add: sent to Meridian
        // in batches, one round trip each.
        batching: cookie.is_none(),
        batch: Vec::new(),
        in_flight: None,
        group: Vec::new(),
    };
    let mode = if following.once {
        SyncMode::RefreshOnly
    } else {
        SyncMode::RefreshAndPersist
    };
    let mut value = Vec::new();
    SyncRequest {
        mode,
        cookie: cookie.as_deref(),
        reload_hint: false,
    }
    .encode(&mut value);
    let controls = [Control {
        oid: sync_oid::SYNC_REQUEST,
        critical: true,
        value: Some(&value),
    }];
    let mut attributes: Vec<&[u8]> = vec![b"*"];
    attributes.extend(KEPT_OPERATIONAL.iter().map(|a| a.as_bytes()));
    let filter = Filter::Present(b"objectClass");
    let id = source
        .send(
            search(&following.base, Scope::Subtree, filter, &attributes),
            &controls,
        )
        .await?;
    eprintln!(
        "following {} below {} into {}{}",
        following.source.url,
        following.base,
        following.target.url,
        if cookie.is_some() { " (resuming)" } else { "" }
    );
    // The entries the source named in this refresh: the rest go at the
    // end of a present phase.
    let mut present: HashSet<[u8; 16]> = HashSet::new();
    loop {
        let pdu = source.next_pdu().await?;
        let message = decode(&pdu)?;
        if message.message_id != id {
            continue;
        }
        match &message.op {
            ProtocolOp::SearchResultEntry(entry) => {
                let state = message
                    .controls
                    .iter()
                    .find(|c| c.oid == sync_oid::SYNC_STATE)
                    .map(|c| SyncStateValue::decode(c.value))
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("a malformed sync state control: {e}"))?;
                let Some(state) = state else {
                    bail!("{}: an entry without a sync state control", source.url);
                };
                let uuid: [u8; 16] = state
                    .uuid
                    .try_into()
                    .map_err(|_| anyhow::anyhow!("a sync UUID of {} octets", state.uuid.len()))?;
                let cookie = state.cookie.map(<[u8]>::to_vec);
                match state.state {
                    SyncState::Present => {
                        present.insert(uuid);
                    }
                    // Changes as they come: gathered while more are
                    // waiting to be read, then applied together.
                    SyncState::Add | SyncState::Modify | SyncState::Delete if !copy.batching => {
                        let entry =
                            (state.state != SyncState::Delete).then(|| OwnedEntry::of(entry));
                        copy.group.push(changes::Change {
                            uuid,
                            entry,
                            cookie,
                        });
                        if !source.has_buffered_pdu() || copy.group.len() >= changes::GROUP {
                            copy.apply_group(&following.state).await?;
                        }
                        continue;
                    }
                    SyncState::Add | SyncState::Modify => {
                        present.insert(uuid);
                        copy.upsert(&uuid, OwnedEntry::of(entry)).await?;
                    }
                    SyncState::Delete => {
                        copy.flush().await?;
                        copy.delete(&uuid).await?;
                    }
                }
                if let Some(cookie) = cookie {
                    save_cookie(&following.state, Some(cookie.as_slice()))?;
                }
            }
            ProtocolOp::IntermediateResponse(info) if info.name == Some(sync_oid::SYNC_INFO) => {
                let info = SyncInfo::decode(info.value.unwrap_or_default())
                    .map_err(|e| anyhow::anyhow!("a malformed sync info message: {e}"))?;
                copy.sync_info(info, &mut present, &following.state).await?;
            }
            ProtocolOp::SearchResultDone(done) => {
                if done.code == ResultCode::SYNC_REFRESH_REQUIRED {
                    copy.apply_group(&following.state).await?;
                    return Ok(Ended::RefreshRequired);
                }
                if done.code != ResultCode::SUCCESS {
                    bail!(
                        "{}: the synchronization ended with {:?}: {}",
                        source.url,
                        done.code,
                        String::from_utf8_lossy(done.message)
                    );
                }
                let sync_done = message
                    .controls
                    .iter()
                    .find(|c| c.oid == sync_oid::SYNC_DONE)
                    .map(|c| decode_sync_done(c.value))
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("a malformed sync done control: {e}"))?
                    .unwrap_or((None, false));
                copy.sync_done(sync_done, &present, &following.state)
                    .await?;
                return Ok(Ended::Refreshed);
            }
            _ => {}
        }
    }
}

/// The writing side: Meridian, as its administrator.
struct Copy {
    target: Client,
    base: String,
    /// Adds whose parent was not there yet.
    waiting: Vec<Copied>,
    /// A first refresh: adds are gathered into `batch`.
    batching: bool,
    batch: Vec<Copied>,
    /// The batch sent whose results are still to be read.
    in_flight: Option<(crate::ldap_client::Sent, Vec<Copied>)>,
    /// After the first refresh: changes read and not yet applied, applied
    /// together once no more are waiting to be read (`changes.rs`).
    group: Vec<changes::Change>,
}

/// An entry of the source, by its entryUUID.
type Copied = ([u8; 16], OwnedEntry);

impl Copy {
    /// A Sync Info message: the end of a refresh phase (a present phase
    /// deletes what the source did not name), deleted or present UUIDs,
    /// a new cookie (saved once what it covers is applied).
    async fn sync_info(
        &mut self,
        info: SyncInfo<'_>,
        present: &mut HashSet<[u8; 16]>,
        state: &Path,
    ) -> anyhow::Result<()> {
        self.apply_group(state).await?;
        match info {
            SyncInfo::RefreshDelete { done: true, .. }
            | SyncInfo::RefreshPresent { done: true, .. } => self.end_batching().await?,
            _ => self.flush().await?,
        }
        let cookie = match info {
            SyncInfo::NewCookie(cookie) => Some(cookie),
            SyncInfo::RefreshDelete { cookie, .. } => cookie,
            SyncInfo::RefreshPresent { cookie, .. } => {
                self.delete_absent(present).await?;
                present.clear();
                cookie
            }
            SyncInfo::IdSet {
                refresh_deletes: true,
                uuids,
                cookie,
            } => {
                for uuid in uuids {
                    if let Ok(uuid) = <[u8; 16]>::try_from(uuid) {
                        self.delete(&uuid).await?;
                    }
                }
                cookie
            }
            SyncInfo::IdSet { uuids, cookie, .. } => {
                present.extend(uuids.iter().filter_map(|u| <[u8; 16]>::try_from(*u).ok()));
                cookie
            }
        };
        self.settle_waiting().await?;
        if let Some(cookie) = cookie {
            save_cookie(state, Some(cookie))?;
        }
        Ok(())
    }

    /// A refreshOnly synchronization's end: its Sync Done control's
    /// cookie and refreshDeletes (FALSE: a present phase, whose absent
    /// entries go).
    async fn sync_done(
        &mut self,
        (cookie, refresh_deletes): (Option<&[u8]>, bool),
        present: &HashSet<[u8; 16]>,
        state: &Path,
    ) -> anyhow::Result<()> {
        self.apply_group(state).await?;
        self.end_batching().await?;
        if !refresh_deletes {
            self.delete_absent(present).await?;
        }
        self.settle_waiting().await?;
        if let Some(cookie) = cookie {
            save_cookie(state, Some(cookie))?;
        }
        if !self.waiting.is_empty() {
            bail!(
                "{} entries never found their parent: {}",
                self.waiting.len(),
                self.waiting
                    .iter()
                    .map(|(_, e)| e.dn.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        Ok(())
    }
}

/// Adds sent at once during a first refresh.
const BATCH: usize = 500;

/// The Relax Rules control: operational attributes written as given.
fn relax() -> [Control<'static>; 1] {
    [Control {
        oid: meridian_proto::controls::oid::RELAX_RULES,
        critical: true,
        value: None,
    }]
}

impl Copy {
    /// The entry with entryUUID `uuid` in Meridian, if any.
    async fn find(&mut self, uuid: &[u8; 16]) -> anyhow::Result<Option<OwnedEntry>> {
        let text = uuid_text(uuid);
        let filter = Filter::Equality(Ava {
            attr: b"entryUUID",
            value: text.as_bytes(),
        });
        let mut attributes: Vec<&[u8]> = vec![b"*"];
        attributes.extend(KEPT_OPERATIONAL.iter().map(|a| a.as_bytes()));
        let base = self.base.clone();
        let found = self
            .target
            .search_all(&base, Scope::Subtree, filter, &attributes)
            .await;
        match found {
            Ok(mut entries) => Ok(entries.pop()),
            // The base itself not there yet: nothing is.
            Err(e) if Refused::is(&e, ResultCode::NO_SUCH_OBJECT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Makes Meridian hold `entry` as the source has it.
    async fn upsert(&mut self, uuid: &[u8; 16], entry: OwnedEntry) -> anyhow::Result<()> {
        if self.batching {
            self.batch.push((*uuid, entry));
            if self.batch.len() >= BATCH {
                self.send_batch().await?;
            }
            return Ok(());
        }
        self.upsert_now(uuid, entry).await
    }

    /// Sends the gathered adds in one round trip. One that finds its DN
    /// taken (a first refresh again after an interrupted one) is made
    /// the same the slow way; one without its parent waits.
    async fn flush(&mut self) -> anyhow::Result<()> {
        self.send_batch().await?;
        self.settle_in_flight().await
    }

    /// Sends the gathered adds, once the batch sent before them is
    /// settled: Meridian applies one batch while the next is read from
    /// the source.
    async fn send_batch(&mut self) -> anyhow::Result<()> {
        self.settle_in_flight().await?;
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() {
            return Ok(());
        }
        let sent = self
            .target
            .send_many(&batch, |(_, entry), id, buf| {
                encode_add(entry, id, buf);
            })
            .await?;
        self.in_flight = Some((sent, batch));
        Ok(())
    }

    /// Reads the results of the batch in flight and deals with them.
    async fn settle_in_flight(&mut self) -> anyhow::Result<()> {
        let Some((sent, batch)) = self.in_flight.take() else {
            return Ok(());
        };
        let results = self.target.results(sent).await?;
        let mut added = false;
        for ((uuid, entry), (code, message)) in batch.into_iter().zip(results) {
            match code {
                ResultCode::SUCCESS => added = true,
                ResultCode::NO_SUCH_OBJECT => self.waiting.push((uuid, entry)),
                ResultCode::ENTRY_ALREADY_EXISTS => self.upsert_now(&uuid, entry).await?,
                _ => bail!("adding {} to Meridian: {code:?}: {message}", entry.dn),
            }
        }
        if added {
            self.settle_waiting().await?;
        }
        Ok(())
    }

    /// The first refresh is over: from now on one change at a time.
    async fn end_batching(&mut self) -> anyhow::Result<()> {
        self.flush().await?;
        self.batching = false;
        Ok(())
    }

    async fn upsert_now(&mut self, uuid: &[u8; 16], entry: OwnedEntry) -> anyhow::Result<()> {
        let Some(existing) = self.find(uuid).await? else {
            return self.add(uuid, entry).await;
        };
        let mut ops = Vec::new();
        changes::plan_update(&existing, &entry, &mut ops);
        self.send_ops(ops).await
    }

    async fn add(&mut self, uuid: &[u8; 16], entry: OwnedEntry) -> anyhow::Result<()> {
        let (code, message) = self.send_add(&entry).await?;
        match code {
            ResultCode::SUCCESS => self.settle_waiting().await,
            ResultCode::NO_SUCH_OBJECT => {
                self.waiting.push((*uuid, entry));
                Ok(())
            }
            ResultCode::ENTRY_ALREADY_EXISTS => {
                // Another entry by that name: one the source deleted
                // while this consumer was away, its DN reused.
                self.delete_dn(&entry.dn).await?;
                Box::pin(self.add(uuid, entry)).await
            }
            _ => bail!("adding {} to Meridian: {code:?}: {message}", entry.dn),
        }
    }

    /// Sends `entry` as an add under the Relax Rules control: its result.
    async fn send_add(&mut self, entry: &OwnedEntry) -> anyhow::Result<(ResultCode, String)> {
        let mut results = self
            .target
            .call_many(std::slice::from_ref(entry), |entry, id, buf| {
                encode_add(entry, id, buf);
            })
            .await?;
        results
            .pop()
            .ok_or_else(|| anyhow::anyhow!("adding {}: no answer", entry.dn))
    }

    /// Adds what waited for its parent, while that adds something.
    async fn settle_waiting(&mut self) -> anyhow::Result<()> {
        loop {
            let waiting = std::mem::take(&mut self.waiting);
            let before = waiting.len();
            if before == 0 {
                return Ok(());
            }
            for (uuid, entry) in waiting {
                let (code, message) = self.send_add(&entry).await?;
                match code {
                    ResultCode::SUCCESS | ResultCode::ENTRY_ALREADY_EXISTS => {}
                    ResultCode::NO_SUCH_OBJECT => self.waiting.push((uuid, entry)),
                    _ => bail!("adding {} to Meridian: {code:?}: {message}", entry.dn),
                }
            }
            if self.waiting.len() == before {
                return Ok(());
            }
        }
    }

    /// Deletes the entry with entryUUID `uuid`, if Meridian has it.
    async fn delete(&mut self, uuid: &[u8; 16]) -> anyhow::Result<()> {
        self.waiting.retain(|(waiting, _)| waiting != uuid);
        if let Some(existing) = self.find(uuid).await? {
            self.delete_dn(&existing.dn).await?;
        }
        Ok(())
    }

    /// Deletes the entry at `dn`, and what is below it if anything is
    /// (entries the source deleted while this consumer was away).
    async fn delete_dn(&mut self, dn: &str) -> anyhow::Result<()> {
        let op = ProtocolOp::DelRequest(dn.as_bytes());
        let (code, message) = self.target.call(op, &[]).await?;
        match code {
            ResultCode::SUCCESS | ResultCode::NO_SUCH_OBJECT => Ok(()),
            ResultCode::NOT_ALLOWED_ON_NON_LEAF => {
                let subtree = [Control {
                    oid: meridian_proto::controls::oid::SUBTREE_DELETE,
                    critical: true,
                    value: None,
                }];
                let op = ProtocolOp::DelRequest(dn.as_bytes());
                let (code, message) = self.target.call(op, &subtree).await?;
                if code != ResultCode::SUCCESS && code != ResultCode::NO_SUCH_OBJECT {
                    bail!("deleting the subtree of {dn} in Meridian: {code:?}: {message}");
                }
                Ok(())
            }
            _ => bail!("deleting {dn} in Meridian: {code:?}: {message}"),
        }
    }

    /// Deletes every entry below the base that `present` does not name,
    /// the deepest first.
    async fn delete_absent(&mut self, present: &HashSet<[u8; 16]>) -> anyhow::Result<()> {
        let base = self.base.clone();
        let mut absent: Vec<String> = Vec::new();
        let found = self
            .target
            .search_each(
                &base,
                Scope::Subtree,
                Filter::Present(b"objectClass"),
                &[b"entryUUID"],
                |entry| {
                    let named = entry
                        .values("entryUUID")
                        .and_then(|v| v.first())
                        .and_then(|v| meridian_store::feed::uuid_octets(v))
                        .is_some_and(|uuid| present.contains(&uuid));
                    if !named {
                        absent.push(entry.dn);
                    }
                    Ok(())
                },
            )
            .await;
        match found {
            Err(e) if Refused::is(&e, ResultCode::NO_SUCH_OBJECT) => return Ok(()),
            other => other?,
        }
        absent.sort_by_key(|dn| std::cmp::Reverse(dn.matches(',').count()));
        for dn in absent {
            self.delete_dn(&dn).await?;
        }
        Ok(())
    }
}

/// Appends `entry` as AddRequest `id` under the Relax Rules control.
fn encode_add(entry: &OwnedEntry, id: i32, buf: &mut Vec<u8>) {
    let values: Vec<Vec<&[u8]>> = entry
        .attributes
        .iter()
        .map(|(_, v)| v.iter().map(Vec::as_slice).collect())
        .collect();
    let attributes: Vec<PartialAttribute<'_>> = entry
        .attributes
        .iter()
        .zip(&values)
        .map(|((name, _), values)| PartialAttribute {
            ty: name.as_bytes(),
            values: Seq::from_items(values),
        })
        .collect();
    let controls = relax();
    meridian_proto::LdapMessage {
        message_id: id,
        op: ProtocolOp::AddRequest(AddRequest {
            dn: entry.dn.as_bytes(),
            attributes: Seq::from_items(&attributes),
        }),
        controls: Seq::from_items(&controls),
    }
    .encode(buf);
}

/// The attributes whose values differ, with the source's values (none:
/// the attribute goes).
fn differences(existing: &OwnedEntry, wanted: &OwnedEntry) -> Vec<(String, Vec<Vec<u8>>)> {
    let set = |values: &[Vec<u8>]| -> Vec<Vec<u8>> {
        let mut sorted = values.to_vec();
        sorted.sort();
        sorted
    };
    let mut changes = Vec::new();
    for (name, values) in &wanted.attributes {
        let same = existing
            .values(name)
            .is_some_and(|have| set(have) == set(values));
        if !same {
            changes.push((name.clone(), values.clone()));
        }
    }
    for (name, _) in &existing.attributes {
        if wanted.values(name).is_none() {
            changes.push((name.clone(), Vec::new()));
        }
    }
    // A modify stamps what it does not write itself: the source's stamps
    // are written even where they are the same (a change within the
    // second of the last keeps its modifyTimestamp).
    if !changes.is_empty() {
        for stamp in STAMPS {
            let named = changes.iter().any(|(n, _)| n.eq_ignore_ascii_case(stamp));
            if let (false, Some(values)) = (named, wanted.values(stamp)) {
                changes.push(((*stamp).to_owned(), values.to_vec()));
            }
        }
    }
    changes
}

/// What every modify stamps on its entry.
const STAMPS: &[&str] = &["modifiersName", "modifyTimestamp", "entryCSN"];

/// The first RDN of `dn` and the rest.
fn split_dn(dn: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in dn.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            ',' if !escaped => return (&dn[..i], dn[i + 1..].trim_start()),
            _ => escaped = false,
        }
    }
    (dn, "")
}

/// Two DNs as spelled by servers: the same up to case and spaces after
/// separators.
fn same_dn(a: &str, b: &str) -> bool {
    let norm = |dn: &str| dn.to_ascii_lowercase().replace(", ", ",");
    norm(a) == norm(b)
}

/// A UUID's text form (RFC 4122), as entryUUID holds it.
pub(crate) fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn load_cookie(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => Ok(None),
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading the cookie in {}", path.display())),
    }
}

/// Saves the cookie (or forgets it) by writing a new file and renaming
/// it over the old: a crash leaves one or the other.
fn save_cookie(path: &Path, cookie: Option<&[u8]>) -> anyhow::Result<()> {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, cookie.unwrap_or_default())
        .with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_split_at_their_first_unescaped_comma() {
        assert_eq!(split_dn("cn=a\\,b,ou=x,dc=y"), ("cn=a\\,b", "ou=x,dc=y"));
        assert_eq!(split_dn("dc=com"), ("dc=com", ""));
        assert!(same_dn("CN=A, ou=X", "cn=a,ou=x"));
    }

    #[test]
    fn differences_replace_what_differs_and_remove_what_is_gone() {
        let have = OwnedEntry {
            dn: "cn=a".into(),
            attributes: vec![
                ("cn".into(), vec![b"a".to_vec()]),
                ("sn".into(), vec![b"x".to_vec(), b"y".to_vec()]),
                ("description".into(), vec![b"old".to_vec()]),
            ],
        };
        let want = OwnedEntry {
            dn: "cn=a".into(),
            attributes: vec![
                ("cn".into(), vec![b"a".to_vec()]),
                ("SN".into(), vec![b"y".to_vec(), b"x".to_vec()]),
                ("mail".into(), vec![b"m".to_vec()]),
            ],
        };
        let changes = differences(&have, &want);
        assert_eq!(
            changes,
            vec![
                ("mail".to_owned(), vec![b"m".to_vec()]),
                ("description".to_owned(), Vec::new()),
            ]
        );
        assert_eq!(
            uuid_text(&[0xab; 16]),
            "abababab-abab-abab-abab-abababababab"
        );
    }
}
