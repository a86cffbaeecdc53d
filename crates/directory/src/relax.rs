//! The Relax Rules control (OpenLDAP's 1.3.6.1.4.1.4203.666.5.12,
//! draft-zeilenga-ldap-relax): the administrator writes entries as the
//! server itself would, operational attributes included: entryUUID,
//! entryCSN, the timestamps and the names of creator and modifier, as a
//! copy of another directory carries them (`meridian migrate --follow`
//! keeps an OpenLDAP server's this way, as slapd's own syncrepl does).
//! Anyone else is refused: these attributes are the server's record of
//! what happened.

use meridian_model::entry::{Entry, WrittenBy};
use meridian_proto::{AddRequest, ModifyRequest, ResultCode};
use meridian_store::Command;

use crate::{Directory, Identity, Outcome};

fn administrator_only(who: &Identity) -> Result<(), Outcome> {
    if matches!(who, Identity::Admin(_)) {
        Ok(())
    } else {
        Err(Outcome::new(
            ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
            "the relax rules control is the administrator's alone",
        ))
    }
}

impl Directory {
    /// An add under the Relax Rules control: the entry's operational
    /// attributes are kept, and only those it lacks are stamped, as an
    /// import keeps them; its passwords are stored as given (a copy
    /// carries hashes, which no quality check can read).
    pub fn prepare_add_relaxed(
        &self,
        who: &Identity,
        req: &AddRequest<'_>,
    ) -> Result<Command, Outcome> {
        administrator_only(who)?;
        let dn = self.parse_dn(req.dn)?;
        if req.attributes.is_empty() {
            return Err(Outcome::new(
                ResultCode::PROTOCOL_ERROR,
                "no attributes provided",
            ));
        }
        let entry = Entry::new(
            dn,
            req.attributes.iter().map(|a| (a.ty, a.values.iter())),
            &self.schema,
        )?
        .with_rdn_values(&self.schema);
        let checked = entry.check(&self.schema, WrittenBy::Server)?;
        let mut entry = self.stamp_new_entry(entry, checked.structural, who.dn_text(), true)?;
        self.prepare_dynamic_add(&mut entry)?;
        self.note_special(&entry);
        self.observe_csn_of(&entry);
        Ok(Command::Add {
            entry,
            prechecked: true,
        })
    }

    /// A modify under the Relax Rules control: operational attributes
    /// may be written, and those written are not stamped over.
    pub fn prepare_modify_relaxed(
        &self,
        who: &Identity,
        req: &ModifyRequest<'_>,
        permissive: bool,
    ) -> Result<Command, Outcome> {
        administrator_only(who)?;
        self.prepare_modify_as(who, req, permissive, true)
    }

    /// This server's next CSNs come after one a copied entry carries.
    fn observe_csn_of(&self, entry: &Entry) {
        if let Some(csn) = self
            .schema
            .entry_csn_attr()
            .and_then(|attr| entry.get(attr))
            .and_then(|a| a.values.first())
        {
            self.csn.observe(&String::from_utf8_lossy(csn));
        }
    }
}
