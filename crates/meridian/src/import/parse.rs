//! Worker side: a raw record to a checked entry with its operational
//! attributes, exactly as an LDAP add of it would be checked (but as the
//! server writes, so operational attributes from an export are kept).

use std::sync::Arc;

use meridian_directory::Directory;
use meridian_ldif::{Body, Limits, parse_record};
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp};
use meridian_store::Command;

use super::input::{Origin, Position, Raw};

/// A record ready for the store.
pub(crate) struct Parsed {
    pub(crate) origin: Origin,
    pub(crate) entry: Entry,
}

/// A record that cannot be loaded, and why.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) origin: Origin,
    pub(crate) message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// What workers share.
pub(crate) struct Checker {
    pub(crate) directory: Arc<Directory>,
    pub(crate) suffix: Dn,
    pub(crate) limits: Limits,
}

impl Checker {
    /// `None` for a record of comments only.
    pub(crate) fn check(&self, input: &Arc<str>, raw: Raw) -> Option<Result<Parsed, Refused>> {
        let (origin, entry) = match raw {
            Raw::Ldif(raw) => {
                let mut origin = Origin {
                    input: Arc::clone(input),
                    at: Position::Line(raw.line),
                };
                let entry = match parse_record(&raw, input, &self.limits) {
                    Ok(None) => return None,
                    Ok(Some(record)) => self.ldif_entry(record),
                    Err(e) => {
                        // A syntax error names its own line.
                        origin.at = Position::Line(e.line);
                        Err(e.message)
                    }
                };
                (origin, entry)
            }
            Raw::Ber {
                number,
                offset,
                pdu,
            } => {
                let origin = Origin {
                    input: Arc::clone(input),
                    at: Position::Pdu { number, offset },
                };
                (origin, self.ber_entry(pdu))
            }
        };
        let result = entry
            .and_then(|entry| self.complete(entry))
            .map(|entry| Parsed {
                origin: origin.clone(),
                entry,
            })
            .map_err(|message| Refused { origin, message });
        Some(result)
    }

    fn ldif_entry(&self, record: meridian_ldif::Record) -> Result<Entry, String> {
        let attrs = match record.body {
            Body::Content(attrs) | Body::Add(attrs) => attrs,
            other => {
                let kind = match other {
                    Body::Delete => "delete",
                    Body::ModRdn { .. } => "modrdn",
                    _ => "modify",
                };
                return Err(format!(
                    "a `changetype: {kind}` record: import loads entries (apply changes with ldapmodify)"
                ));
            }
        };
        let schema = self.directory.schema();
        let dn = Dn::parse(&record.dn, schema)
            .map_err(|e| format!("dn `{}`: {e}", String::from_utf8_lossy(&record.dn)))?;
        Entry::from_values(
            dn,
            attrs.into_iter().map(|a| (a.description, a.value)),
            schema,
        )
        .map_err(|e| e.to_string())
    }

    fn ber_entry(&self, mut pdu: Vec<u8>) -> Result<Entry, String> {
        if pdu.first() == Some(&0x68) {
            // A bare AddRequest: give it the LDAPMessage envelope
            // (SEQUENCE { messageID 1, protocolOp }) the decoder expects.
            let mut message = Vec::with_capacity(pdu.len() + 9);
            let body_len = pdu.len() + 3;
            message.push(0x30);
            if body_len < 0x80 {
                message.push(body_len as u8);
            } else {
                message.push(0x84);
                message.extend_from_slice(&(body_len as u32).to_be_bytes());
            }
            message.extend_from_slice(&[0x02, 0x01, 0x01]);
            message.append(&mut pdu);
            pdu = message;
        }
        let limits = DecodeLimits {
            max_pdu_bytes: self.limits.max_record_bytes.saturating_add(16),
            ..DecodeLimits::default()
        };
        let message = LdapMessage::decode(&pdu, &limits).map_err(|e| format!("bad PDU: {e}"))?;
        let ProtocolOp::AddRequest(add) = message.op else {
            return Err("not an AddRequest: import loads entries".into());
        };
        let schema = self.directory.schema();
        let dn = Dn::parse(add.dn, schema)
            .map_err(|e| format!("dn `{}`: {e}", String::from_utf8_lossy(add.dn)))?;
        Entry::new(
            dn,
            add.attributes.iter().map(|a| (a.ty, a.values.iter())),
            schema,
        )
        .map_err(|e| e.to_string())
    }

    /// The schema check and operational attributes; entries outside the
    /// naming context are refused here, so a store's noSuchObject later
    /// always means a parent not (yet) loaded.
    fn complete(&self, entry: Entry) -> Result<Entry, String> {
        if !entry.dn.rdns().ends_with(self.suffix.rdns()) {
            return Err(format!(
                "{} is outside the naming context {}",
                entry.dn.original(),
                self.suffix.original()
            ));
        }
        let name = entry.dn.original().to_owned();
        let failed = |o: meridian_directory::Outcome| format!("{name}: {} ({})", o.message, o.code);
        let entry = self.directory.prepare_import(entry).map_err(failed)?;
        // Clear-text passwords are hashed as an LDAP add would hash them
        // (on this worker, in parallel); hashed ones are kept as given.
        let mut add = Command::Add { entry };
        if self.directory.needs_hashing(&add) {
            add = self.directory.hash_passwords(add).map_err(failed)?;
        }
        match add {
            Command::Add { entry } => Ok(entry),
            _ => Err(format!("{name}: hashing its password changed the command")),
        }
    }
}
