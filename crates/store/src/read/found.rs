//! A record a search found, as its caller takes it: decoded into an
//! [`Entry`], or read where it lies ([`FoundRecord`]) by a caller that
//! only copies its attributes out (the directory encoding a search
//! result for the administrator: no access check reads the entry, and
//! decoding it, then dropping it, cost about 3,600 of a base search's
//! 26,000 instructions, callgrind).

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

    /// The record read in place; `None` when it cannot be (a record of
    /// the first format, or one naming an attribute newer than the
    /// snapshot's name table or unknown to the schema), which
    /// [`Found::entry`] then decodes.
    pub fn record(&self) -> Option<FoundRecord<'f>> {
        let names = self.names.known();
        let dn = codec::locate(self.record, |attr| {
            names
                .get(attr.number as usize)
                .and_then(|name| name.desc.as_ref())
                .map(|_| ())
        })?;
        Some(FoundRecord {
            record: self.record,
            dn,
            names,
        })
    }
}

/// A record read in place: its DN as written and its attributes as
/// stored, in the order an [`Entry`] decoded from it holds them.
pub struct FoundRecord<'r> {
    record: &'r [u8],
    dn: &'r [u8],
    /// Every name the record uses is here, with its description.
    names: &'r [Name],
}

/// One attribute of a [`FoundRecord`].
pub struct StoredAttribute<'r> {
    /// Its type and options.
    pub desc: &'r Description,
    /// Its name as written ([`AttrName::text`]).
    pub name: &'r AttrName,
    /// Its values, as stored.
    pub values: RawValues<'r>,
}

impl<'r> FoundRecord<'r> {
    /// The DN as its creator wrote it.
    pub fn dn(&self) -> &'r [u8] {
        self.dn
    }

    /// Hands `each` the attributes, in order.
    pub fn for_each_attribute(&self, mut each: impl FnMut(StoredAttribute<'r>)) {
        let (record, names) = (self.record, self.names);
        // `Found::record` walked the record and found every name.
        codec::locate(record, |attr| {
            let name = names.get(attr.number as usize)?;
            each(StoredAttribute {
                desc: name.desc.as_ref()?,
                name: &name.spelled,
                values: attr.values(record),
            });
            Some(())
        });
    }
}
