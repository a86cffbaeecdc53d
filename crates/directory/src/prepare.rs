//! The write path up to a store command: each `prepare_*` checks a
//! request against the schema and the caller's rights and chooses the
//! timestamps, entryUUID and entryCSN (deterministic writes: applying the
//! command reads no clock).

use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::{Description, Entry, WrittenBy};
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::{AddRequest, ModifyDnRequest, ModifyOperation, ModifyRequest, ResultCode};
use meridian_store::{Command, Operational, StoreError};

use crate::access::Level;
use crate::clock::generalized_time;
use crate::ids::uuid_v4;
use crate::rights::{Memberships, insufficient};
use crate::{Directory, Identity, Outcome, presence, referral};

/// The operational attributes an add sets, in the order they are stored.
pub(crate) const NEW_ENTRY_ATTRIBUTES: [&str; 7] = [
    "structuralObjectClass",
    "entryUUID",
    "creatorsName",
    "createTimestamp",
    "entryCSN",
    "modifiersName",
    "modifyTimestamp",
];

impl Directory {
    /// Timestamps, CSN and names for a write by `who`.
    pub(crate) fn stamp(&self, who: &Identity) -> (String, String, String) {
        let (seconds, csn) = self.time_and_csn();
        (seconds, csn, who.dn_text().to_owned())
    }

    /// Now as a timestamp, and a new CSN for it.
    pub(crate) fn time_and_csn(&self) -> (String, String) {
        let (seconds, micros) = generalized_time(self.clock.now());
        let csn = self.csn.next(&seconds, micros);
        (seconds, csn)
    }

    /// Checks an add and builds its command (operational attributes set).
    pub fn prepare_add(&self, who: &Identity, req: &AddRequest<'_>) -> Result<Command, Outcome> {
        let dn = self.parse_dn(req.dn)?;
        // RFC 4511 4.7: an AddRequest lists the entry's attributes; none
        // at all is a malformed request, as slapd answers it.
        if req.attributes.is_empty() {
            return Err(Outcome::new(
                ResultCode::PROTOCOL_ERROR,
                "no attributes provided",
            ));
        }
        let groups = &Memberships::default();
        self.require(who, &dn, None, Level::Write, groups)?;
        for attr in req.attributes.iter() {
            if let Ok(desc) = Description::parse(attr.ty, &self.schema) {
                self.require(who, &dn, Some(desc.attr), Level::Write, groups)?;
            }
        }
        let entry = Entry::new(
            dn,
            req.attributes.iter().map(|a| (a.ty, a.values.iter())),
            &self.schema,
        )?
        .with_rdn_values(&self.schema);
        let checked = entry.check(&self.schema, WrittenBy::Client)?;
        let policy = self.policy_of(&entry);
        for attr in entry.attributes.iter().filter(|a| self.is_user_password(a)) {
            self.check_password_values(who, &policy, &attr.values)?;
        }
        let mut entry = self.stamp_new_entry(entry, checked.structural, who.dn_text(), false)?;
        self.stamp_password_set(&mut entry);
        self.prepare_dynamic_add(&mut entry)?;
        self.note_special(&entry);
        // Checked above, before the stamps; what they add is ours and
        // valid, so the writer need not check it all again.
        Ok(Command::Add {
            entry,
            prechecked: true,
        })
    }

    /// Records that `entry`, about to be added, is a referral object or
    /// an alias.
    pub(crate) fn note_special(&self, entry: &Entry) {
        for kind in presence::Special::ALL {
            if referral::has_class(entry, &self.schema, kind.class()) {
                self.presence.note(kind);
            }
        }
    }

    /// Checks an entry of a bulk load (`meridian import`) as the server
    /// checks its own writes (operational attributes may be given) and
    /// gives it the operational attributes an add would, keeping those
    /// it has: an export of this or another server carries its own
    /// entryUUID, timestamps and creator, as `slapadd` keeps them.
    pub fn prepare_import(&self, entry: Entry) -> Result<Entry, Outcome> {
        let entry = entry.with_rdn_values(&self.schema);
        let checked = entry.check(&self.schema, WrittenBy::Server)?;
        // Loaded as the administrator (its name, not a copy of its DN
        // per entry).
        let loader = self.admin.original();
        let mut entry = self.stamp_new_entry(entry, checked.structural, loader, true)?;
        self.stamp_ttl(&mut entry)?;
        Ok(entry)
    }

    /// Adds structuralObjectClass, entryUUID, creatorsName,
    /// createTimestamp, entryCSN, modifiersName and modifyTimestamp (all
    /// of them, or with `keep_given` only those the entry lacks).
    pub(crate) fn stamp_new_entry(
        &self,
        mut entry: Entry,
        structural: meridian_model::schema::ClassId,
        creator: &str,
        keep_given: bool,
    ) -> Result<Entry, Outcome> {
        let structural = self
            .schema
            .class_by_id(structural)
            .map(|c| c.name().to_owned())
            .unwrap_or_default();
        let (now, csn) = self.time_and_csn();
        let creator = creator.to_owned();
        let uuid = uuid_v4().map_err(|e| {
            Outcome::new(
                ResultCode::OTHER,
                format!("no randomness for entryUUID: {e}"),
            )
        })?;
        // In NEW_ENTRY_ATTRIBUTES order.
        let values = [
            structural,
            uuid,
            creator.clone(),
            now.clone(),
            csn,
            creator,
            now,
        ];
        if self.new_entry_attributes.len() != values.len() {
            return Err(ModelError::internal(
                "the schema lacks an operational attribute every entry needs",
            )
            .into());
        }
        // One reallocation, not one per doubling on the way.
        entry.attributes.reserve(values.len());
        for ((name, desc), value) in self.new_entry_attributes.iter().zip(values) {
            if keep_given && entry.get(desc.attr).is_some() {
                continue;
            }
            entry.attributes.push(meridian_model::entry::Attribute {
                desc: desc.clone(),
                name: name.clone(),
                values: meridian_model::entry::Values::from_buf([value.into_bytes()]),
            });
        }
        Ok(entry)
    }

    /// Checks a delete and builds its command; `subtree` (the subtree
    /// delete control) removes the entry and everything below it.
    pub fn prepare_delete(
        &self,
        who: &Identity,
        dn: &[u8],
        subtree: bool,
    ) -> Result<Command, Outcome> {
        let dn = self.parse_dn(dn)?;
        not_the_root(&dn, "cannot delete the root DSE")?;
        if subtree && !matches!(who, Identity::Admin(_)) {
            // The rules are checked per entry, and a subtree's entries are
            // only known inside the write: the control is the
            // administrator's.
            return Err(insufficient(
                "the subtree delete control is for the administrator only",
            ));
        }
        let groups = &Memberships::default();
        self.require_visible(who, &dn, None, Level::Write, groups)?;
        if let Some(glued) = self.glued_below(&dn)? {
            // A naming context glued below is another database's tree:
            // the entry is not a leaf, and a subtree delete would span
            // two databases.
            return Err(if subtree {
                Outcome::new(
                    ResultCode::AFFECTS_MULTIPLE_DSAS,
                    format!(
                        "the naming context {} below {} is its own database: delete its tree first",
                        glued.original(),
                        dn.original()
                    ),
                )
            } else {
                Outcome::new(
                    ResultCode::NOT_ALLOWED_ON_NON_LEAF,
                    format!(
                        "{} has the naming context {} below it",
                        dn.original(),
                        glued.original()
                    ),
                )
            });
        }
        Ok(if subtree {
            Command::DeleteSubtree { dn }
        } else {
            Command::Delete { dn }
        })
    }

    /// `command` made conditional on its target being unchanged when it
    /// applies (`cluster.conflicts = "first-wins"`), and the entryCSN the
    /// command itself writes (for the connection's next write to the
    /// entry).
    ///
    /// What the command saw is `earlier`, the entryCSN written by a write
    /// of the same connection to the same entry that is still on its way
    /// (a client's pipelined writes to one entry are not in conflict with
    /// each other: they apply in the order sent); else the target's
    /// entryCSN as this node's copy holds it now, in the write's turn.
    /// An add, or a target that does not exist here, is left as it is
    /// (an add conflicts by itself: the second is entryAlreadyExists).
    pub fn first_wins(
        &self,
        command: Command,
        earlier: Option<Vec<u8>>,
    ) -> Result<(Command, Option<Vec<u8>>), Outcome> {
        if let Command::Transaction { commands } = command {
            return self.first_wins_in_transaction(commands);
        }
        let csn_type = self.schema.entry_csn_attr();
        let writes = csn_type
            .and_then(|csn| command.entry_csn(csn))
            .map(<[u8]>::to_vec);
        if matches!(command, Command::Add { .. }) {
            return Ok((command, writes));
        }
        let Some(dn) = command.target() else {
            return Ok((command, writes));
        };
        let seen = match (earlier, csn_type) {
            (Some(earlier), _) => Some(earlier),
            (None, Some(csn)) => {
                let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
                snapshot.first_value(dn, csn).map_err(Outcome::from)?
            }
            (None, None) => None,
        };
        Ok(match seen {
            Some(seen) => (
                Command::Unchanged {
                    seen,
                    command: Box::new(command),
                },
                writes,
            ),
            None => (command, writes),
        })
    }

    /// [`Directory::first_wins`] for each update of a transaction: an
    /// update is checked against what the transaction's earlier updates
    /// to its entry leave, not against the store (which has none of
    /// them yet).
    fn first_wins_in_transaction(
        &self,
        commands: Vec<Command>,
    ) -> Result<(Command, Option<Vec<u8>>), Outcome> {
        let mut left: std::collections::HashMap<String, Vec<u8>> = Default::default();
        let mut guarded = Vec::with_capacity(commands.len());
        for command in commands {
            let dn = command.target().map(|dn| dn.normalized().to_owned());
            let earlier = dn.as_ref().and_then(|dn| left.get(dn).cloned());
            let (command, writes) = self.first_wins(command, earlier)?;
            if let (Some(dn), Some(csn)) = (dn, writes) {
                left.insert(dn, csn);
            }
            guarded.push(command);
        }
        Ok((Command::Transaction { commands: guarded }, None))
    }

    /// The suffix of a naming context glued below `dn` whose suffix
    /// entry exists, if there is one.
    fn glued_below(&self, dn: &Dn) -> Result<Option<Dn>, Outcome> {
        for (store, suffix) in self.contexts_below(dn) {
            let snapshot = store.snapshot().map_err(Outcome::from)?;
            if snapshot.id(suffix).map_err(Outcome::from)?.is_some() {
                return Ok(Some(suffix.clone()));
            }
        }
        Ok(None)
    }

    /// The assertion control (RFC 4528) for reads: TRUE for the entry at
    /// `dn`, or assertionFailed. (Writes carry the assertion into their
    /// command, so it is checked atomically when they apply.)
    pub fn check_assertion(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        self.check_assertion_inner(who, dn, filter)
            .map_err(|e| self.disclose(who, e))
    }

    pub(crate) fn check_assertion_inner(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        let dn = self.assertion_dn(who, dn, filter)?;
        let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(&dn).map_err(Outcome::from)? else {
            return Err(StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(&dn).unwrap_or_default(),
            }
            .into());
        };
        let compiled = meridian_model::filter::CompiledFilter::compile(filter, &self.schema);
        if compiled.matches(&entry, &self.schema) {
            Ok(())
        } else {
            Err(Outcome::new(
                ResultCode::ASSERTION_FAILED,
                crate::rights::ASSERTION_FAILED,
            ))
        }
    }

    pub(crate) fn operational_changes(&self, who: &Identity) -> Operational {
        let (now, csn, modifier) = self.stamp(who);
        vec![
            ("modifiersName".into(), vec![modifier.into_bytes()]),
            ("modifyTimestamp".into(), vec![now.into_bytes()]),
            ("entryCSN".into(), vec![csn.into_bytes()]),
        ]
    }

    /// Checks a modify and builds its command.
    pub fn prepare_modify(
        &self,
        who: &Identity,
        req: &ModifyRequest<'_>,
        permissive: bool,
    ) -> Result<Command, Outcome> {
        self.prepare_modify_as(who, req, permissive, false)
    }

    /// [`Directory::prepare_modify`]; with `relax` (the Relax Rules
    /// control, checked by the caller to be the administrator's) the
    /// operational attributes may be written too, and those the request
    /// writes are not stamped over.
    pub(crate) fn prepare_modify_as(
        &self,
        who: &Identity,
        req: &ModifyRequest<'_>,
        permissive: bool,
        relax: bool,
    ) -> Result<Command, Outcome> {
        let dn = self.parse_dn(req.dn)?;
        not_the_root(&dn, "modify upon the root DSE not supported")?;
        let groups = &Memberships::default();
        let mut changes = Vec::new();
        let mut touches_object_class = false;
        let mut touches_password = false;
        let most = self.limits().max_modify_changes;
        for (i, change) in req.changes.iter().enumerate() {
            if i == most {
                return Err(Outcome::new(
                    ResultCode::ADMIN_LIMIT_EXCEEDED,
                    format!(
                        "a modify may make at most {most} changes \
                         (directory.max_modify_changes); split this one"
                    ),
                ));
            }
            let m = change.modification;
            let desc = Description::parse(m.ty, &self.schema)?;
            touches_object_class |= Some(desc.attr) == self.schema.object_class_attr();
            touches_password |= Some(desc.attr) == self.user_password;
            self.require_visible(who, &dn, Some(desc.attr), Level::Write, groups)?;
            // The administrator may delete the password policy's lock
            // state (an unlock); no one writes other such types.
            let unlock = matches!(change.operation, ModifyOperation::Delete)
                || (matches!(change.operation, ModifyOperation::Replace) && m.values.is_empty());
            if let Some(at) = self.schema.attr(desc.attr)
                && at.no_user_modification
                && !relax
                && !(unlock && self.may_unlock(who, desc.attr))
            {
                return Err(Outcome::new(
                    ResultCode::CONSTRAINT_VIOLATION,
                    format!("attribute {:?} is not user-modifiable", at.name()),
                ));
            }
            changes.push(Modification {
                op: match change.operation {
                    ModifyOperation::Add => ModOp::Add,
                    ModifyOperation::Delete => ModOp::Delete,
                    ModifyOperation::Replace => ModOp::Replace,
                    ModifyOperation::Increment => ModOp::Increment,
                },
                attr: String::from_utf8_lossy(m.ty).into_owned(),
                values: m.values.iter().map(<[u8]>::to_vec).collect(),
            });
        }
        let mut operational = self.operational_changes(who);
        if relax {
            operational
                .retain(|(name, _)| !changes.iter().any(|c| c.attr.eq_ignore_ascii_case(name)));
        }
        if touches_password {
            let policy = self.check_password_change(who, &dn, &changes)?;
            operational.extend(self.password_set_state(who, &policy, self.sets_reset(&changes)));
        }
        if touches_object_class {
            self.check_dynamic_modify(&dn, &changes)?;
            // It may become a referral object or an alias.
            for kind in presence::Special::ALL {
                self.presence.note(kind);
            }
        }
        Ok(Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        })
    }

    /// Checks a modifyDN and builds its command.
    pub fn prepare_modify_dn(
        &self,
        who: &Identity,
        req: &ModifyDnRequest<'_>,
    ) -> Result<Command, Outcome> {
        let dn = self.parse_dn(req.dn)?;
        not_the_root(&dn, "cannot rename the root DSE")?;
        let groups = &Memberships::default();
        self.require_visible(who, &dn, None, Level::Write, groups)?;
        let new_rdn = std::str::from_utf8(req.new_rdn)
            .map_err(|_| Outcome::new(ResultCode::INVALID_DN_SYNTAX, "newrdn is not UTF-8"))?
            .to_owned();
        let new_superior = match req.new_superior {
            Some(s) => Some(Box::new(self.parse_dn(s)?)),
            None => None,
        };
        if let Some(glued) = self.glued_below(&dn)? {
            return Err(Outcome::new(
                ResultCode::AFFECTS_MULTIPLE_DSAS,
                format!(
                    "the naming context {} below {} is its own database and would move with it",
                    glued.original(),
                    dn.original()
                ),
            ));
        }
        if let Some(superior) = &new_superior {
            // Moving an entry writes below its new parent.
            self.require(who, superior, None, Level::Write, groups)?;
            if self.context_of(superior) != self.context_of(&dn) {
                return Err(Outcome::new(
                    ResultCode::AFFECTS_MULTIPLE_DSAS,
                    format!(
                        "{} and {} are in different naming contexts, each its own database: move the entry by adding it there and deleting it here",
                        dn.original(),
                        superior.original()
                    ),
                ));
            }
        }
        Ok(Command::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn: req.delete_old_rdn,
            new_superior,
            operational: self.operational_changes(who),
        })
    }
}

/// The root DSE is the server's, not an entry of a naming context: a
/// write to it is unwillingToPerform with slapd's words (the store has
/// no key for the empty DN, and answered 80 "MDB_BAD_VALSIZE").
fn not_the_root(dn: &Dn, refusal: &str) -> Result<(), Outcome> {
    if dn.is_root() {
        return Err(Outcome::new(ResultCode::UNWILLING_TO_PERFORM, refusal));
    }
    Ok(())
}
