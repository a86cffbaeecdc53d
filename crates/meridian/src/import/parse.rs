//! Worker side: a raw record to a checked entry with its operational
//! attributes, exactly as an LDAP add of it would be checked (but as the
//! server writes, so operational attributes from an export are kept).

use std::sync::Arc;

use meridian_directory::Directory;
use meridian_ldif::Limits;
use meridian_model::dn::{Dn, RecentParent};
use meridian_model::entry::{Entry, RecentDescriptions};
use meridian_store::Command;

use super::input::{Origin, Raw, Refused};

/// A record ready for the store.
pub(crate) struct Parsed {
    pub(crate) origin: Origin,
    pub(crate) entry: Entry,
    /// The worker that built the entry: its allocator holds the entry's
    /// memory, and the entry goes back to it to be freed (see
    /// [`super::Loader::free`]).
    pub(crate) worker: usize,
}

/// What one worker remembers of its previous records: loads repeat the
/// parent DN and the attribute names record after record.
#[derive(Default)]
pub(crate) struct Recent {
    parents: RecentParent,
    descriptions: RecentDescriptions,
}

/// What workers share.
pub(crate) struct Checker {
    pub(crate) directory: Arc<Directory>,
    pub(crate) suffix: Dn,
    pub(crate) limits: Limits,
}

impl Checker {
    /// `None` for a record of comments only.
    /// `recent`: what this worker's previous records had.
    pub(crate) fn check(
        &self,
        worker: usize,
        recent: &mut Recent,
        input: &Arc<str>,
        raw: Raw,
    ) -> Option<Result<Parsed, Refused>> {
        let add = match raw.into_add(input, &self.limits) {
            Ok(Some(add)) => add,
            Ok(None) => return None,
            Err(refused) => return Some(Err(refused)),
        };
        let origin = add.origin;
        let schema = self.directory.schema();
        // Loads name many children of one entry in a row: their parent's
        // part of the DN is parsed once.
        let result = recent
            .parents
            .parse(&add.dn, schema)
            .map_err(|e| format!("dn `{}`: {e}", String::from_utf8_lossy(&add.dn)))
            .and_then(|dn| {
                let pairs = add.values.into_iter().map(|a| (a.description, a.value));
                Entry::from_values(dn, pairs, schema, &mut recent.descriptions)
                    .map_err(|e| e.to_string())
            })
            .and_then(|entry| self.complete(entry, &add.dn));
        Some(match result {
            Ok(entry) => Ok(Parsed {
                origin,
                entry,
                worker,
            }),
            Err(message) => Err(Refused { origin, message }),
        })
    }

    /// The schema check and operational attributes; entries outside the
    /// naming context are refused here, so a store's noSuchObject later
    /// always means a parent not (yet) loaded.
    /// `dn`: the DN as the record wrote it, for messages.
    fn complete(&self, entry: Entry, dn: &[u8]) -> Result<Entry, String> {
        if !entry.dn.is_within(&self.suffix) {
            return Err(format!(
                "{} is outside the naming context {}",
                entry.dn.original(),
                self.suffix.original()
            ));
        }
        // The name is built only for a message: a copy of every DN was a
        // share of a load's allocations.
        let failed = |o: meridian_directory::Outcome| {
            format!(
                "{}: {} ({})",
                String::from_utf8_lossy(dn),
                o.message,
                o.code
            )
        };
        let entry = self.directory.prepare_import(entry).map_err(failed)?;
        // Clear-text passwords are hashed as an LDAP add would hash them
        // (on this worker, in parallel); hashed ones are kept as given.
        let mut add = Command::Add {
            entry,
            prechecked: true,
        };
        if self.directory.needs_hashing(&add) {
            // An add: no history to check, whoever writes it.
            add = self
                .directory
                .hash_passwords(&meridian_directory::Identity::Anonymous, add)
                .map_err(failed)?;
        }
        match add {
            Command::Add { entry, .. } => Ok(entry),
            _ => Err(format!(
                "{}: hashing its password changed the command",
                String::from_utf8_lossy(dn)
            )),
        }
    }
}
