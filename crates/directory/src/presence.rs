//! Whether the rare kinds of entry that change how operations run may
//! exist at all: referral objects (RFC 3296) and aliases. Nearly every
//! directory has neither, and then no update, compare or search should
//! pay even an index lookup to learn it.
//!
//! Found once when the directory opens (the objectClass index, or a scan
//! without it) and set, before the write is submitted, by any add of
//! such an entry and any modify of objectClass. Never cleared: after the
//! last one is deleted the checks merely go on finding nothing. An
//! operation that reads the flag just before an add of a referral object
//! commits is ordered before that add, as it would be anyway.

use std::sync::atomic::{AtomicBool, Ordering};

use meridian_model::dn::Dn;
use meridian_proto::Scope;
use meridian_store::Store;

/// The kinds of entry tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// objectClass referral.
    Referral,
    /// objectClass alias.
    Alias,
}

impl Special {
    pub(crate) const ALL: [Special; 2] = [Special::Referral, Special::Alias];

    /// The object class's name.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Special::Referral => "referral",
            Special::Alias => "alias",
        }
    }
}

/// One flag per [`Special`] kind: true while one may exist.
#[derive(Debug)]
pub(crate) struct Presence {
    referral: AtomicBool,
    alias: AtomicBool,
}

impl Presence {
    /// What `store` holds (true where it cannot tell).
    pub(crate) fn of(store: &Store) -> Presence {
        let holds = |kind: Special| -> bool {
            let Ok(snapshot) = store.snapshot() else {
                return true;
            };
            match snapshot.class_members(kind.class()) {
                Ok(Some(ids)) => !ids.is_empty(),
                Ok(None) => {
                    let filter = meridian_proto::Filter::Equality(meridian_proto::Ava {
                        attr: b"objectClass",
                        value: kind.class().as_bytes(),
                    });
                    let mut found = false;
                    let searched = snapshot.search(&Dn::root(), Scope::Subtree, &filter, |_, _| {
                        found = true;
                        false
                    });
                    found || searched.is_err()
                }
                Err(_) => true,
            }
        };
        Presence {
            referral: AtomicBool::new(holds(Special::Referral)),
            alias: AtomicBool::new(holds(Special::Alias)),
        }
    }

    /// Adds what `other` (another naming context's) may hold.
    pub(crate) fn include(&self, other: &Presence) {
        for kind in Special::ALL {
            if other.may_hold(kind) {
                self.note(kind);
            }
        }
    }

    fn flag(&self, kind: Special) -> &AtomicBool {
        match kind {
            Special::Referral => &self.referral,
            Special::Alias => &self.alias,
        }
    }

    /// False only if no entry of `kind` exists.
    pub(crate) fn may_hold(&self, kind: Special) -> bool {
        self.flag(kind).load(Ordering::Acquire)
    }

    /// An entry of `kind` may be about to exist.
    pub(crate) fn note(&self, kind: Special) {
        self.flag(kind).store(true, Ordering::Release);
    }
}
