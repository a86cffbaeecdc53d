//! The naming contexts a search walks: its base's, and those glued
//! below it that its scope reaches.

use meridian_proto::Scope;

use crate::{Directory, Outcome};

/// One naming context a search walks, with the base and scope it is
/// searched with there.
pub(super) struct Searched<'d> {
    pub(super) store: &'d meridian_store::Store,
    pub(super) base: &'d meridian_model::dn::Dn,
    pub(super) scope: Scope,
}

impl Directory {
    /// Whether `base` is the suffix of its naming context and that
    /// context holds no entry for it yet.
    pub(super) fn top_missing(&self, base: &meridian_model::dn::Dn) -> Result<bool, Outcome> {
        let store = self.store_for(base);
        if !store.suffixes().iter().any(|s| s.same_entry(base)) {
            return Ok(false);
        }
        let snapshot = store.snapshot().map_err(Outcome::from)?;
        Ok(snapshot.get(base).map_err(Outcome::from)?.is_none())
    }

    /// The naming contexts a search of `base` with `scope` walks, in a
    /// fixed order (a page cookie names one by its position): the
    /// base's own, then the contexts glued below it that the scope
    /// reaches (a subtree search walks each one's whole tree, a one-level
    /// search takes the suffix entries of those directly below). A
    /// search of the root with a wider scope walks every context, one
    /// level only the top ones.
    pub(super) fn searched_contexts<'d>(
        &'d self,
        base: &'d meridian_model::dn::Dn,
        scope: Scope,
    ) -> Vec<Searched<'d>> {
        if base.is_root() && scope != Scope::Base {
            return self
                .stores()
                .filter(|store| {
                    scope != Scope::OneLevel
                        || !store.suffixes().iter().all(|s| self.is_subordinate(s))
                })
                .map(|store| Searched { store, base, scope })
                .collect();
        }
        let mut contexts = vec![Searched {
            store: self.store_for(base),
            base,
            scope,
        }];
        match scope {
            Scope::Base => {}
            Scope::OneLevel => contexts.extend(
                self.contexts_below(base)
                    .into_iter()
                    .filter(|(_, suffix)| suffix.is_child_of(base))
                    .map(|(store, suffix)| Searched {
                        store,
                        base: suffix,
                        scope: Scope::Base,
                    }),
            ),
            Scope::Subtree | Scope::Subordinate => {
                contexts.extend(
                    self.contexts_below(base)
                        .into_iter()
                        .map(|(store, suffix)| Searched {
                            store,
                            base: suffix,
                            scope: Scope::Subtree,
                        }),
                );
            }
        }
        contexts
    }
}
