//! Commands: every write is one, applied by the writer thread.
//!
//! A command carries everything its result depends on: the entry with
//! its operational attributes (timestamps, entryUUID, entryCSN) already
//! chosen by the caller. Applying it reads no clock and no random source,
//! so two stores that apply the same commands in the same order hold the
//! same entries and the same index keys (the replication seam of the
//! SPEC).

use std::borrow::Cow;

use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::modify::Modification;

use crate::StoreError;
use crate::keys::EntryId;

/// The operational attributes a `Modify` or `ModifyDn` replaces, by
/// name. The server's names are constants: borrowed, not a string
/// allocated per write (and freed on another thread); a journal replay
/// owns the names it read.
pub type Operational = Vec<OperationalAttribute>;

/// One attribute of [`Operational`]: its name and its new values.
pub type OperationalAttribute = (Cow<'static, str>, Vec<Vec<u8>>);

/// One write.
#[derive(Debug, Clone)]
pub enum Command {
    /// Add an entry; its parent must exist unless it is a suffix.
    Add {
        /// The complete entry, operational attributes included.
        entry: Entry,
        /// The caller has checked the entry against this store's schema
        /// (`Directory::prepare_add` does, on the server's workers): the
        /// writer, the one thread every write goes through, skips the
        /// check, and finds an existing entry by its `dn2id` write alone.
        prechecked: bool,
    },
    /// Delete a leaf entry.
    Delete {
        /// The entry.
        dn: Dn,
    },
    /// Delete an entry and everything below it (the subtree delete
    /// control), in one transaction.
    DeleteSubtree {
        /// The subtree's root.
        dn: Dn,
    },
    /// Apply changes, then set operational attributes.
    Modify {
        /// The entry.
        dn: Dn,
        /// Client changes, in order.
        changes: Vec<Modification>,
        /// Operational attributes to set afterwards (modifyTimestamp,
        /// modifiersName, entryCSN), as `(name, values)`.
        operational: Operational,
        /// Permissive modify (control 1.2.840.113556.1.4.1413).
        permissive: bool,
    },
    /// Rename an entry and/or move it (with its whole subtree) under a new
    /// superior (RFC 4511 section 4.9).
    ModifyDn {
        /// The entry.
        dn: Dn,
        /// The new RDN, as the client wrote it (`cn=New Name`).
        new_rdn: String,
        /// Remove the old RDN's values from the entry.
        delete_old_rdn: bool,
        /// The new parent, if moving (boxed: renames are rare, and a
        /// second DN inline would double the size of every command).
        new_superior: Option<Box<Dn>>,
        /// Operational attributes to set on the entry (modifyTimestamp,
        /// modifiersName, entryCSN).
        operational: Operational,
    },
    /// Run `command` only if `assertion` (a filter in BER) is TRUE for its
    /// target entry as it is when the command applies (the assertion
    /// control, RFC 4528); otherwise fail with assertionFailed.
    Guarded {
        /// The filter, BER encoded.
        assertion: Vec<u8>,
        /// The guarded command.
        command: Box<Command>,
    },
    /// Run `command` only if its target's entryCSN is still `seen`, the
    /// value the node that prepared it read (`cluster.conflicts =
    /// "first-wins"`): a write committed to the entry in between makes
    /// this one a conflict, refused with assertionFailed. Every replica
    /// applies one log in one order, so every replica refuses it alike.
    Unchanged {
        /// The entryCSN the preparing node read.
        seen: Vec<u8>,
        /// The command.
        command: Box<Command>,
    },
    /// Drop every index key and rebuild them from the entries and the
    /// configured indexes (after the config adds or removes an index).
    RebuildIndexes,
    /// One step of an online index build ([`crate::Store::build_indexes_online`]):
    /// write the keys of every configured index of `types` (OIDs) for
    /// the entries with IDs in `from..to`; with `complete` (the build's
    /// last step, sent once every range before it has succeeded), then
    /// record every configured index as built. The keys are named by the
    /// command, not by what the store holds as unbuilt, so a replayed
    /// step writes what the live one did.
    BuildIndexes {
        /// The first entry ID of the step.
        from: EntryId,
        /// The ID after the step's last.
        to: EntryId,
        /// The OIDs of the types whose keys the step writes.
        types: Vec<String>,
        /// Record the indexes as built.
        complete: bool,
    },
    /// Add many entries in one command (bulk import). Each
    /// entry is checked before anything of it is written, so one refused
    /// entry fails alone ([`Effect::AddedMany`] lists it) and costs no
    /// rollback; an engine failure fails the whole command.
    AddMany {
        /// Complete entries, in the order to add them (shared: the loader
        /// keeps them to retry those whose parent came later). A `Vec`
        /// behind the `Arc`, not a slice: the loader's batch moves in
        /// without copying its entries again.
        entries: std::sync::Arc<Vec<Entry>>,
        /// The caller has checked every entry against this store's
        /// schema (`Directory::prepare_import` does): the writer, the one
        /// thread every load goes through, skips the check.
        prechecked: bool,
    },
    /// Run `command` and read its target entry in the same transaction:
    /// as it was before (`pre`) and as it is after (`post`): the pre-read
    /// and post-read controls (RFC 4527), atomic with the update.
    ReadBack {
        /// Read the entry before the update.
        pre: bool,
        /// Read the entry after the update.
        post: bool,
        /// The update.
        command: Box<Command>,
    },
    /// Apply `commands` in order, all or none: an LDAP transaction (RFC
    /// 5805). The first that is refused fails the whole
    /// ([`StoreError::InTransaction`] says which), and nothing of the
    /// others is kept; in a cluster it is one command of one log entry,
    /// so every replica applies all of it or none of it alike. Never
    /// nested.
    Transaction {
        /// The updates, in the order the client sent them.
        commands: Vec<Command>,
    },
    /// Mark the database as holding a load in progress (`Some(what)`,
    /// a description for the operator) or a complete one (`None`). A
    /// server refuses to serve a database marked incomplete.
    SetLoadState(Option<String>),
}

impl Command {
    /// True for the commands that add entries and nothing else, whose
    /// index keys may wait until the batch's run of adds ends (see
    /// `apply::Context::pending_index`).
    pub(crate) fn is_add(&self) -> bool {
        matches!(self, Command::Add { .. } | Command::AddMany { .. })
    }

    /// The entry the command writes, by DN (`None` for the commands of
    /// bulk loads and maintenance, which have none).
    pub fn target(&self) -> Option<&Dn> {
        match self {
            Command::Add { entry, .. } => Some(&entry.dn),
            Command::Delete { dn }
            | Command::DeleteSubtree { dn }
            | Command::Modify { dn, .. }
            | Command::ModifyDn { dn, .. } => Some(dn),
            Command::Guarded { command, .. }
            | Command::ReadBack { command, .. }
            | Command::Unchanged { command, .. } => command.target(),
            Command::RebuildIndexes
            | Command::BuildIndexes { .. }
            | Command::AddMany { .. }
            | Command::Transaction { .. }
            | Command::SetLoadState(_) => None,
        }
    }
}

impl Command {
    /// The entryCSN the command writes, if it writes one (`csn_type` is
    /// the schema's ID of `entryCSN`).
    pub fn entry_csn(&self, csn_type: meridian_model::schema::AttrId) -> Option<&[u8]> {
        fn from_operational(operational: &Operational) -> Option<&[u8]> {
            operational
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("entryCSN"))
                .and_then(|(_, values)| values.first())
                .map(Vec::as_slice)
        }
        match self {
            Command::Add { entry, .. } => entry
                .get(csn_type)
                .and_then(|a| a.values.first())
                .map(Vec::as_slice),
            Command::Modify { operational, .. } | Command::ModifyDn { operational, .. } => {
                from_operational(operational)
            }
            Command::Guarded { command, .. }
            | Command::ReadBack { command, .. }
            | Command::Unchanged { command, .. } => command.entry_csn(csn_type),
            Command::Delete { .. }
            | Command::DeleteSubtree { .. }
            | Command::RebuildIndexes
            | Command::BuildIndexes { .. }
            | Command::AddMany { .. }
            | Command::SetLoadState(_) => None,
            // A transaction's CSN is its latest update's.
            Command::Transaction { commands } => commands
                .iter()
                .filter_map(|command| command.entry_csn(csn_type))
                .max(),
        }
    }

    /// A DN of the naming context the command writes in: its target's,
    /// or a transaction's first update's (all of a transaction's are in
    /// one context).
    pub fn context_dn(&self) -> Option<&Dn> {
        match self {
            Command::Transaction { commands } => commands.iter().find_map(Command::context_dn),
            other => other.target(),
        }
    }
}

/// What a successful command did to the store (the directory turns it
/// into an LDAP result, its `Outcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Added under this ID.
    Added(EntryId),
    /// Deleted.
    Deleted,
    /// A subtree deleted: the number of entries removed.
    DeletedSubtree(u64),
    /// Modified.
    Modified,
    /// Renamed or moved; the number of descendants whose DN changed too.
    Renamed(u64),
    /// Indexes rebuilt over this many entries.
    Reindexed(u64),
    /// A step of an online index build done.
    IndexesBuilt {
        /// Entries indexed.
        entries: u64,
        /// The build is complete: its indexes are recorded as built.
        complete: bool,
    },
    /// Of an [`Command::AddMany`]: how many were added, and the position
    /// and reason of each entry that was refused.
    AddedMany {
        /// Entries added.
        added: u64,
        /// `(position in the command, why)` for each refused entry.
        failed: Vec<(usize, StoreError)>,
    },
    /// The load state was set.
    LoadStateSet,
    /// Of a [`Command::Transaction`]: each update's effect, in order.
    Transaction(Vec<Effect>),
    /// Of a [`Command::ReadBack`]: the update's effect and the entry
    /// before and after it, as asked (`None` where there was none).
    ReadBack {
        /// What the update did.
        effect: Box<Effect>,
        /// The entry before the update.
        pre: Option<Box<Entry>>,
        /// The entry after the update.
        post: Option<Box<Entry>>,
    },
}
