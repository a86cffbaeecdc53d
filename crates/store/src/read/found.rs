//! A record a search found, as its caller takes it: decoded into an
//! [`Entry`], or read where it lies ([`FoundRecord`]) by a caller that
//! only copies its attributes out (the directory encoding a search
//! result, its access checked by DN and type: decoding the entry, then
//! dropping it, cost about 3,600 of a base search's 26,000
//! instructions, callgrind).

use meridian_model::dn::Dn;
use meridian_model::entry::{AttrName, Description, Entry};

use crate::StoreError;
use crate::codec::{self, RawValues};
use crate::names::{Name, NameSource};

/// A record that matched a search ([`crate::Snapshot::search_found`]).
pub struct Found<'f> {
    pub(super) record: &'f [u8],
    pub(super) names: &'f dyn NameSource,
    /// Its DN, when the scope check made it already.
    pub(super) dn: Option<Dn>,
    /// Makes the DN from the stored text otherwise (reusing the base's,
    /// or the last match's parent).
    pub(super) make_dn: &'f mut dyn FnMut(&[u8]) -> Result<Dn, StoreError>,
}

impl<'f> Found<'f> {
    /// The entry, decoded.
    pub fn entry(self) -> Result<Entry, StoreError> {
        let Found {
            record,
            names,
            dn,
            make_dn,
        } = self;
        codec::decode_with(record, names, |text| match dn {
            Some(dn) => Ok(dn),
            None => make_dn(text),
        })
    }

    /// The entry's DN, made once: [`Found::entry`] keeps it.
    pub fn dn(&mut self) -> Result<&Dn, StoreError> {
        let dn = match self.dn.take() {
            Some(dn) => dn,
            None => (self.make_dn)(codec::decode_dn(self.record)?)?,
        };
        Ok(self.dn.insert(dn))
    }

    /// The record, to be read in place; `None` for a record of the
    /// first format, which [`Found::entry`] then decodes.
    pub fn record(&self) -> Option<FoundRecord<'f>> {
        Some(FoundRecord {
            record: self.record,
            dn: codec::format_2_dn(self.record)?,
            names: self.names.known(),
        })
    }
}

/// A record read in place: its DN as written and its attributes as
/// stored, in the order an [`Entry`] decoded from it holds them.
pub struct FoundRecord<'r> {
    record: &'r [u8],
    dn: &'r [u8],
    /// The snapshot's name table.
    names: &'r [Name],
}

/// One attribute of a [`FoundRecord`].
pub struct StoredAttribute<'a, 'r> {
    /// Its type and options.
    pub desc: &'r Description,
    /// Its name as written ([`AttrName::text`]).
    pub name: &'r AttrName,
    /// Its values, as stored: those left unread are stepped over.
    pub values: &'a mut RawValues<'r>,
}

impl<'r> FoundRecord<'r> {
    /// The DN as its creator wrote it.
    pub fn dn(&self) -> &'r [u8] {
        self.dn
    }

    /// Hands `each` the attributes, in order, reading the record once.
    /// False if the record cannot be read in place: it names an
    /// attribute newer than the snapshot's name table or one the schema
    /// no longer knows (or is damaged), found only after `each` had the
    /// attributes before it. The caller then takes the entry decoded
    /// ([`Found::entry`]), which reads such names or reports the damage.
    #[must_use]
    pub fn for_each_attribute(&self, mut each: impl FnMut(StoredAttribute<'_, 'r>)) -> bool {
        let names = self.names;
        codec::walk(self.record, |number, values| {
            let name = names.get(number as usize)?;
            each(StoredAttribute {
                desc: name.desc.as_ref()?,
                name: &name.spelled,
                values,
            });
            Some(())
        })
        .is_some()
    }
}
