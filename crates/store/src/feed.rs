//! The change feed: what each commit changed, told to whoever follows
//! the store (content synchronization and persistent searches, in the
//! server), and the session log of deleted entries that lets a
//! synchronization resume without sending every entry again.
//!
//! The writer notes, while it applies a transaction, which entries were
//! added, modified, renamed and deleted ([`EntryChange`]); after the commit
//! it publishes them as one [`Committed`] on a broadcast channel of a
//! fixed number of batches (`storage.change_feed_batches`). A follower
//! that falls that far behind is told it lagged and must start over:
//! the store never buffers for a follower that does not read. What a
//! change says is where to look: a follower reads the entry itself from
//! a snapshot taken after the commit, so the feed holds no entry.
//!
//! Every replica of a cluster applies the same log through its writer,
//! so every node's feed tells the same changes in the same order. A
//! snapshot installed from the leader replaces the whole store: the feed
//! then says [`Committed::reset`], and followers start over.
//!
//! The CSNs of the feed (`high water`, the stamps of the session log)
//! are entryCSN values, compared as bytes: OpenLDAP's CSN layout
//! (`YYYYmmddHHMMSS.uuuuuuZ#counter#sid#mod`) sorts as time, then
//! counter, within one server ID.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use tokio::sync::broadcast;

use crate::keys::EntryId;

/// One change of a committed transaction.
#[derive(Debug, Clone)]
pub enum EntryChange {
    /// The entry was added.
    Added(EntryId),
    /// The entry's attributes changed (by a client, or by the server
    /// keeping memberOf and references true).
    Modified(EntryId),
    /// The entry was renamed or moved (its subtree with it); it was
    /// `old_dn`.
    Renamed {
        /// The entry.
        id: EntryId,
        /// Its DN before.
        old_dn: Dn,
    },
    /// The entry was deleted.
    Deleted {
        /// Its DN.
        dn: Dn,
        /// Its entryUUID as 16 octets, if it had a valid one.
        uuid: Option<[u8; 16]>,
        /// The entry as it was, when the feed had followers as the
        /// transaction began (a persistent search evaluates its filter
        /// on it and sends it); `None` otherwise.
        entry: Option<Arc<Entry>>,
    },
}

/// What one commit changed, in the order it was applied.
#[derive(Debug, Default)]
pub struct Committed {
    /// The changes.
    pub changes: Vec<EntryChange>,
    /// The store was replaced as a whole (a snapshot installed): what a
    /// follower knows of it is void.
    pub reset: bool,
    /// Per change, what followers made of it, shared among them: the
    /// entry read once, and its encodings by the views that asked.
    shared: Vec<Shared>,
    /// Per change, whether an earlier change of the commit names the same
    /// entry: a follower tells an entry once per commit, at its first
    /// change; found here once rather than by every follower.
    repeated: Vec<bool>,
}

/// What the followers of a commit share of one change.
#[derive(Debug, Default)]
struct Shared {
    /// The entry as the first follower to look read it (at this commit
    /// or after: a later commit's change is told again anyway).
    entry: OnceLock<Option<Arc<Entry>>>,
    /// Encodings by view: few views, compared by their whole key.
    encoded: Mutex<Vec<Encoding>>,
}

/// An entry's encoding for one view: the view's key, the bytes.
type Encoding = (Arc<str>, Arc<[u8]>);

impl Committed {
    fn new(changes: Vec<EntryChange>, reset: bool) -> Committed {
        let shared = changes.iter().map(|_| Shared::default()).collect();
        let mut named = rustc_hash::FxHashSet::default();
        let repeated = changes
            .iter()
            .map(|change| match change {
                EntryChange::Added(id)
                | EntryChange::Modified(id)
                | EntryChange::Renamed { id, .. } => !named.insert(*id),
                EntryChange::Deleted { .. } => false,
            })
            .collect();
        Committed {
            changes,
            reset,
            shared,
            repeated,
        }
    }

    /// Whether change `at` names an entry an earlier change of this
    /// commit names too (added, modified or renamed): told already.
    pub fn repeats(&self, at: usize) -> bool {
        self.repeated.get(at).copied().unwrap_or(false)
    }

    /// The entry of change `at`, read by `read` once for every follower
    /// (`None`: it is gone).
    pub fn entry(&self, at: usize, read: impl FnOnce() -> Option<Entry>) -> Option<Arc<Entry>> {
        let shared = self.shared.get(at)?;
        shared.entry.get_or_init(|| read().map(Arc::new)).clone()
    }

    /// Change `at`'s entry as the view named `view` encodes it, encoded
    /// by `encode` once for every follower with that view.
    pub fn encoded(
        &self,
        at: usize,
        view: &Arc<str>,
        encode: impl FnOnce() -> Vec<u8>,
    ) -> Arc<[u8]> {
        let Some(shared) = self.shared.get(at) else {
            return Arc::from(encode());
        };
        let known = shared
            .encoded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(key, _)| key == view)
            .map(|(_, bytes)| Arc::clone(bytes));
        if let Some(bytes) = known {
            return bytes;
        }
        // Encoded outside the lock: another follower may encode it too,
        // which costs one encoding and is harmless.
        let bytes: Arc<[u8]> = Arc::from(encode());
        shared
            .encoded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((Arc::clone(view), Arc::clone(&bytes)));
        bytes
    }
}

/// A deleted entry, as the session log keeps it.
#[derive(Debug, Clone)]
pub struct DeletedEntry {
    /// Its DN.
    pub dn: Dn,
    /// Its entryUUID.
    pub uuid: [u8; 16],
}

/// The highest entryCSN committed per server ID.
pub type ContextCsns = BTreeMap<u16, Vec<u8>>;

/// An entryUUID's text (RFC 4530: `8-4-4-4-12` hexadecimal digits) as
/// the 16 octets a syncUUID is.
pub fn uuid_octets(text: &[u8]) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut digits = text.iter().filter(|b| **b != b'-');
    for slot in &mut out {
        let high = char::from(*digits.next()?).to_digit(16)?;
        let low = char::from(*digits.next()?).to_digit(16)?;
        *slot = (high * 16 + low) as u8;
    }
    (digits.next().is_none() && text.len() == 36).then_some(out)
}

/// The server ID of a CSN (its third `#` field, hexadecimal).
pub fn csn_sid(csn: &[u8]) -> Option<u16> {
    let field = csn.split(|b| *b == b'#').nth(2)?;
    u16::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()
}

/// Raises `into`'s CSN for `csn`'s server ID to `csn` if it is higher.
pub fn merge_csn(into: &mut ContextCsns, csn: &[u8]) {
    let Some(sid) = csn_sid(csn) else {
        return;
    };
    let slot = into.entry(sid).or_default();
    if csn > slot.as_slice() {
        *slot = csn.to_vec();
    }
}

/// The feed of one store.
pub(crate) struct Feed {
    sender: broadcast::Sender<Arc<Committed>>,
    capacity: usize,
    state: Mutex<FeedState>,
    session_log: usize,
}

struct FeedState {
    /// The highest entryCSN per server ID of the commits since the
    /// store opened, and, once a follower asked
    /// ([`crate::Store::context_csns`]), of every entry before.
    high_water: ContextCsns,
    /// The entries stored before the store opened were read into
    /// `high_water`.
    seeded: bool,
    /// Deletes since `floor`, oldest first, each stamped with the
    /// highest CSN (any server ID) committed with or before it (what
    /// the floor rises to when it is dropped).
    deleted: VecDeque<(Option<Vec<u8>>, DeletedEntry)>,
    /// The log holds every delete committed after a change stamped
    /// above this CSN; `None` until a commit with a CSN.
    floor: Option<Vec<u8>>,
    /// The highest CSN of any server ID committed so far.
    highest: Option<Vec<u8>>,
}

impl Feed {
    /// A feed keeping `batches` commits for slow followers and
    /// `session_log` deletes.
    pub(crate) fn new(batches: usize, session_log: usize) -> Feed {
        let capacity = batches.max(1);
        let (sender, _) = broadcast::channel(capacity);
        Feed {
            sender,
            capacity,
            state: Mutex::new(FeedState {
                high_water: ContextCsns::new(),
                seeded: false,
                deleted: VecDeque::new(),
                floor: None,
                highest: None,
            }),
            session_log,
        }
    }

    /// Whether anyone follows the feed now.
    pub(crate) fn followed(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Follows the commits from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Committed>> {
        self.sender.subscribe()
    }

    /// The commits kept for a follower that has not read them.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Records and publishes a commit: `csns` the entryCSNs its commands
    /// wrote.
    pub(crate) fn publish(&self, changes: Vec<EntryChange>, csns: &[&[u8]]) {
        if changes.is_empty() {
            return;
        }
        // The batch's highest CSN per server ID first (a batch's CSNs are
        // mostly one server's): the state then takes a few, not one
        // copy per command.
        let mut batch_high: Vec<(u16, &[u8])> = Vec::new();
        for csn in csns {
            let Some(sid) = csn_sid(csn) else { continue };
            match batch_high.iter_mut().find(|(s, _)| *s == sid) {
                Some((_, high)) if *csn > *high => *high = csn,
                Some(_) => {}
                None => batch_high.push((sid, csn)),
            }
        }
        {
            let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let state = &mut *guard;
            for (_, csn) in &batch_high {
                merge_csn(&mut state.high_water, csn);
                if state.highest.as_deref().is_none_or(|h| *csn > h) {
                    state.highest = Some(csn.to_vec());
                }
            }
            if state.floor.is_none() {
                state.floor.clone_from(&state.highest);
            }
            for change in &changes {
                if let EntryChange::Deleted {
                    dn,
                    uuid: Some(uuid),
                    ..
                } = change
                {
                    let stamp = state.highest.clone();
                    state.deleted.push_back((
                        stamp,
                        DeletedEntry {
                            dn: dn.clone(),
                            uuid: *uuid,
                        },
                    ));
                }
            }
            while state.deleted.len() > self.session_log {
                // What the consumer may have missed now begins after the
                // oldest delete's stamp.
                if let Some((stamp, _)) = state.deleted.pop_front()
                    && stamp > state.floor
                {
                    state.floor = stamp;
                }
            }
        }
        // No follower: nothing to tell, nothing to build.
        if self.sender.receiver_count() > 0 {
            let _ = self.sender.send(Arc::new(Committed::new(changes, false)));
        }
    }

    /// Tells followers the store was replaced; the session log is void.
    pub(crate) fn reset(&self) {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.deleted.clear();
            state.floor = None;
            state.high_water.clear();
            state.seeded = false;
        }
        let _ = self.sender.send(Arc::new(Committed::new(Vec::new(), true)));
    }

    /// The deletes a follower that has seen every change up to `since`
    /// (its lowest CSN) may have missed: `None` when the log cannot say
    /// (it began or was cut after `since`), else every logged delete:
    /// a superset (a delete the follower saw, or of an entry it never
    /// had, is passed over), because commits need not come in the order
    /// of their CSNs, and the log is bounded anyway.
    pub(crate) fn deleted_since(&self, since: &[u8]) -> Option<Vec<DeletedEntry>> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let floor = state.floor.as_deref()?;
        if since <= floor {
            return None;
        }
        Some(
            state
                .deleted
                .iter()
                .map(|(_, entry)| entry.clone())
                .collect(),
        )
    }

    /// The high water, if the entries from before the store opened are
    /// in it.
    pub(crate) fn high_water(&self) -> Option<ContextCsns> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.seeded.then(|| state.high_water.clone())
    }

    /// Adds the CSNs of the entries stored before (read by the caller
    /// from a snapshot taken after the feed's state was last reset).
    pub(crate) fn seed(&self, stored: &ContextCsns) -> ContextCsns {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for csn in stored.values() {
            merge_csn(&mut state.high_water, csn);
        }
        state.seeded = true;
        state.high_water.clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn dn(text: &str) -> Dn {
        Dn::parse(text.as_bytes(), &meridian_model::Schema::builtin().unwrap()).unwrap()
    }

    fn deleted(name: &str, n: u8) -> EntryChange {
        EntryChange::Deleted {
            dn: dn(&format!("cn={name},dc=example,dc=com")),
            uuid: Some([n; 16]),
            entry: None,
        }
    }

    const CSN_1: &[u8] = b"20261129000001.000000Z#000000#001#000000";
    const CSN_2: &[u8] = b"20261129000002.000000Z#000000#001#000000";
    const CSN_3: &[u8] = b"20261129000003.000000Z#000000#002#000000";

    #[test]
    fn uuids_read_as_octets() {
        let uuid = uuid_octets(b"0123abcd-4567-89ef-0123-456789abcdef").unwrap();
        assert_eq!(uuid[0], 0x01);
        assert_eq!(uuid[15], 0xef);
        assert!(uuid_octets(b"0123abcd-4567-89ef-0123-456789abcde").is_none());
        assert!(uuid_octets(b"0123abcd-4567-89ef-0123-456789abcdeg").is_none());
    }

    #[test]
    fn csns_merge_per_server_id() {
        let mut csns = ContextCsns::new();
        merge_csn(&mut csns, CSN_2);
        merge_csn(&mut csns, CSN_1);
        merge_csn(&mut csns, CSN_3);
        assert_eq!(csns.get(&1).map(Vec::as_slice), Some(CSN_2));
        assert_eq!(csns.get(&2).map(Vec::as_slice), Some(CSN_3));
        assert_eq!(csn_sid(b"not a csn"), None);
    }

    #[test]
    fn the_session_log_answers_only_for_a_follower_after_its_floor() {
        let feed = Feed::new(4, 2);
        let mut follower = feed.subscribe();
        feed.publish(vec![deleted("a", 1)], &[CSN_1]);
        // The log began with the first commit: a follower at or before
        // it may have missed deletes before the log.
        assert!(feed.deleted_since(CSN_1).is_none());
        feed.publish(vec![deleted("b", 2)], &[CSN_2]);
        let since = feed.deleted_since(CSN_2).expect("covered");
        assert!(since.iter().any(|d| d.uuid == [2; 16]));
        // Three deletes in a log of two: the oldest goes and the floor
        // rises to its stamp.
        feed.publish(vec![deleted("c", 3)], &[CSN_3]);
        assert!(feed.deleted_since(CSN_1).is_none());
        assert!(feed.deleted_since(CSN_2).is_some());
        let first = follower.try_recv().unwrap();
        assert!(matches!(
            first.changes.first(),
            Some(EntryChange::Deleted { .. })
        ));
    }

    #[test]
    fn a_follower_that_does_not_read_lags_and_is_told() {
        let feed = Feed::new(2, 10);
        let mut follower = feed.subscribe();
        for n in 0u64..5 {
            feed.publish(vec![EntryChange::Added(n)], &[]);
        }
        assert!(matches!(
            follower.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(_))
        ));
    }

    #[test]
    fn an_entry_changed_twice_in_a_commit_is_told_at_its_first_change() {
        let committed = Committed::new(
            vec![
                EntryChange::Added(7),
                EntryChange::Modified(8),
                EntryChange::Modified(7),
                EntryChange::Renamed {
                    id: 8,
                    old_dn: dn("cn=b,dc=example,dc=com"),
                },
            ],
            false,
        );
        let repeats: Vec<bool> = (0..5).map(|at| committed.repeats(at)).collect();
        assert_eq!(repeats, [false, false, true, true, false]);
    }

    #[test]
    fn followers_share_an_entry_read_and_each_views_encoding() {
        let committed = Committed::new(vec![EntryChange::Added(7)], false);
        let reads = std::cell::Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            Some(Entry {
                dn: dn("cn=a,dc=example,dc=com"),
                attributes: Vec::new(),
            })
        };
        let first = committed.entry(0, read).unwrap();
        let second = committed.entry(0, read).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(reads.get(), 1);
        let (admin, user): (Arc<str>, Arc<str>) = ("admin".into(), "user".into());
        let encodings = std::cell::Cell::new(0);
        let encode = |bytes: &[u8]| {
            encodings.set(encodings.get() + 1);
            bytes.to_vec()
        };
        assert_eq!(&*committed.encoded(0, &admin, || encode(b"all")), b"all");
        assert_eq!(&*committed.encoded(0, &admin, || encode(b"again")), b"all");
        assert_eq!(&*committed.encoded(0, &user, || encode(b"some")), b"some");
        assert_eq!(encodings.get(), 2);
        // A change the commit does not have: nothing shared, nothing read.
        assert!(committed.entry(3, read).is_none());
    }

    #[test]
    fn a_reset_empties_the_log() {
        let feed = Feed::new(4, 10);
        feed.publish(vec![deleted("a", 1)], &[CSN_1]);
        feed.publish(vec![deleted("b", 2)], &[CSN_2]);
        assert!(feed.deleted_since(CSN_2).is_some());
        feed.reset();
        assert!(feed.deleted_since(CSN_2).is_none());
        assert!(feed.high_water().is_none());
    }
}
