//! The stored form of an entry (the `id2entry` value). Format 2, written
//! by this version:
//!
//! ```text
//! u8      format version (2)
//! varint  length of the DN, then the DN as the client wrote it (UTF-8)
//! varint  number of attributes
//!   varint  the attribute's name number (`names.rs`: `cn;lang-de` as written)
//!   varint  number of values
//!     varint  length of the value, then the value bytes
//! ```
//!
//! Format 1, still read, had the name's length and text where format 2
//! has its number. Varints are LEB128. Values are kept exactly as given;
//! normalised keys live only in the indexes. The version byte lets a
//! later format sit beside these without a flag day.

use std::cell::Cell;

use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::{Attribute, Description, Entry};
use meridian_model::filter::{
    AttrName, AttributeVisitor, Target, ValuesVisitor, Wanted, visit_wanted_by_name,
};
use meridian_model::schema::AttrId;

use crate::StoreError;
use crate::names::NameSource;

/// Names as text (read only).
const VERSION_1: u8 = 1;
/// Names as numbers.
const VERSION_2: u8 = 2;

/// Appends `v` as a LEB128 varint (also the journal's lengths).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint from the front of `data` and steps past it; `None`
/// when it is truncated or longer than 64 bits.
pub(crate) fn take_varint(data: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = data.split_first()?;
        *data = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Appends a varint length and the bytes.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encodes an entry in format 2; `number` gives each attribute's name
/// its number (the writer's [`crate::names::Assigner`]).
pub(crate) fn encode(
    entry: &Entry,
    mut number: impl FnMut(usize, &Attribute) -> Result<u32, StoreError>,
) -> Result<Vec<u8>, StoreError> {
    // The record's size, overestimated by at most the varints' slack:
    // written once, never grown.
    const VARINT_MAX: usize = 10;
    let values: usize = entry
        .attributes
        .iter()
        .flat_map(|a| &a.values)
        .map(|v| v.len() + VARINT_MAX)
        .sum();
    let size =
        1 + entry.dn.original().len() + VARINT_MAX * (2 + 2 * entry.attributes.len()) + values;
    let mut out = Vec::with_capacity(size);
    out.push(VERSION_2);
    put_bytes(&mut out, entry.dn.original().as_bytes());
    put_varint(&mut out, entry.attributes.len() as u64);
    for (position, attr) in entry.attributes.iter().enumerate() {
        put_varint(&mut out, u64::from(number(position, attr)?));
        put_varint(&mut out, attr.values.len() as u64);
        for v in &attr.values {
            put_bytes(&mut out, v);
        }
    }
    Ok(out)
}

/// Starts loading every cache line of a record at once. A filter walks
/// a record one varint after the other, each read depending on the one
/// before, so without this each line's cache miss waits for the previous
/// one; with it they overlap (perf: in a server scanning a base larger
/// than its share of the cache, the misses were most of the scan).
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    for line in bytes.chunks(64).skip(1) {
        prefetch_line(line.as_ptr());
    }
}

/// Starts loading the half kilobyte below `bytes`: in a walk of
/// `id2entry` in key order, the next records. LMDB fills a leaf page from
/// its end, so the following keys' records lie just below this one. In
/// the server, where the records are not in the cache when a search
/// starts, this took a seed 002 unindexed search from about 12 ms to
/// 10 ms (a kilobyte did no better). Past the page's start it loads
/// lines nobody reads, a cost of a few wasted loads per page.
#[inline]
pub(crate) fn prefetch_following(bytes: &[u8]) {
    for back in 1..=8usize {
        prefetch_line(bytes.as_ptr().wrapping_sub(64 * back));
    }
}

/// Starts loading every cache line of `items` (any values: only their
/// addresses are used).
#[inline]
pub(crate) fn prefetch_slice<T>(items: &[T]) {
    let start = items.as_ptr().cast::<u8>();
    let end = start.wrapping_add(std::mem::size_of_val(items));
    // From the start of the first line, so the last line is reached too.
    let mut line = start.wrapping_sub(start.addr() % 64);
    while line < end {
        prefetch_line(line);
        line = line.wrapping_add(64);
    }
}

/// Asks the CPU to load the cache line at `at` (any address).
#[inline]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of every x86_64 CPU, and a prefetch is only
        // a hint: it never faults, even on an address outside the map,
        // and changes no state we can observe.
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[derive(Clone)]
struct Cursor<'a> {
    data: &'a [u8],
}

fn corrupt(what: &str) -> StoreError {
    StoreError::corrupt(format_args!("entry record: {what}"))
}

// The scan's readers (`next_*`) answer `Option`: a `Result` carrying a
// `StoreError` is a wide value, and moving it through the stack for every
// varint stalled the scan on store forwarding (perf annotate: 40 % of an
// unindexed search on one load). Decoding wraps them with an error.
impl<'a> Cursor<'a> {
    /// Inlined: a scan reads some fifty varints per entry, nearly all
    /// one byte long (perf: a third of an unindexed search's CPU went to
    /// the call when it was out of line).
    #[inline]
    fn next_varint(&mut self) -> Option<u64> {
        // Nearly every length is below 128: one byte (the scan's hot path).
        if let Some((&b, rest)) = self.data.split_first()
            && b < 0x80
        {
            self.data = rest;
            return Some(u64::from(b));
        }
        self.long_varint()
    }

    #[cold]
    #[inline(never)]
    fn long_varint(&mut self) -> Option<u64> {
        take_varint(&mut self.data)
    }

    /// A length and that many bytes.
    #[inline]
    fn next_bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.next_varint()?).ok()?;
        if len > self.data.len() {
            return None;
        }
        let (head, rest) = self.data.split_at(len);
        self.data = rest;
        Some(head)
    }

    /// Steps over `n` length-prefixed values.
    #[inline]
    fn skip_values(&mut self, n: u64) -> Option<()> {
        for _ in 0..n {
            self.next_bytes()?;
        }
        Some(())
    }

    fn varint(&mut self) -> Result<u64, StoreError> {
        self.next_varint()
            .ok_or_else(|| corrupt("truncated or overlong varint"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        self.next_bytes()
            .ok_or_else(|| corrupt("length past the end"))
    }
}

/// The format version and the cursor after it.
fn open(bytes: &[u8]) -> Result<(u8, Cursor<'_>), StoreError> {
    open_known(bytes).ok_or_else(|| {
        corrupt(if bytes.is_empty() {
            "empty"
        } else {
            "unknown format version"
        })
    })
}

/// The DN text a stored record carries, as it was written; `None` for
/// a record that cannot be read.
pub(crate) fn stored_dn(bytes: &[u8]) -> Option<&[u8]> {
    let (_, mut c) = open_known(bytes)?;
    c.bytes().ok()
}

/// [`open`] for the scan: `None` for an empty record or an unknown format.
#[inline]
fn open_known(bytes: &[u8]) -> Option<(u8, Cursor<'_>)> {
    let (&version, rest) = bytes.split_first()?;
    (version == VERSION_1 || version == VERSION_2).then_some((version, Cursor { data: rest }))
}

impl Cursor<'_> {
    fn number(&mut self) -> Result<u32, StoreError> {
        self.next_number().ok_or_else(|| corrupt("name number"))
    }

    #[inline]
    fn next_number(&mut self) -> Option<u32> {
        u32::try_from(self.next_varint()?).ok()
    }
}

/// The DN of a stored entry, without decoding the rest.
pub fn decode_dn(bytes: &[u8]) -> Result<&[u8], StoreError> {
    open(bytes)?.1.bytes()
}

/// Decodes an entry.
pub(crate) fn decode(bytes: &[u8], names: &dyn NameSource) -> Result<Entry, StoreError> {
    decode_as(bytes, names, None)
}

/// Decodes an entry looked up by `known`: when the stored DN is written
/// exactly as `known` is, `known` is cloned instead of parsed again
/// (parsing and normalising the DN was half of decoding a record for a
/// modify, perf). A DN written differently (`UID=a` for `uid=a`) is
/// parsed, so the entry keeps the DN as its creator wrote it.
pub(crate) fn decode_as(
    bytes: &[u8],
    names: &dyn NameSource,
    known: Option<&Dn>,
) -> Result<Entry, StoreError> {
    decode_with(bytes, names, |text| match known {
        Some(known) if known.original().as_bytes() == text => Ok(known.clone()),
        _ => parse_stored_dn(text, names.schema()),
    })
}

/// A record's stored DN text parsed (the empty text is the root's).
pub(crate) fn parse_stored_dn(text: &[u8], schema: &Schema) -> Result<Dn, StoreError> {
    if text.is_empty() {
        Ok(Dn::root())
    } else {
        Ok(Dn::parse(text, schema)?)
    }
}

/// Decodes an entry whose DN `make_dn` makes from the stored text (a
/// search reuses the parent of the last match's DN: siblings share it).
pub(crate) fn decode_with(
    bytes: &[u8],
    names: &dyn NameSource,
    make_dn: impl FnOnce(&[u8]) -> Result<Dn, StoreError>,
) -> Result<Entry, StoreError> {
    let schema = names.schema();
    let (version, mut c) = open(bytes)?;
    let dn = make_dn(c.bytes()?)?;
    let count = c.varint()?;
    if version == VERSION_1 {
        let mut attrs: Vec<(&[u8], Vec<&[u8]>)> = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            let name = c.bytes()?;
            attrs.push((name, values(&mut c)?));
        }
        if !c.data.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        return Ok(Entry::new(dn, attrs, schema)?);
    }
    let mut attributes: Vec<Attribute> = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        // The names in memory are read in place; only a name newer than
        // the table comes through `name`, whose `Result<Cow>`, made and
        // dropped per attribute, cost about 1,200 of a base search's
        // 27,000 instructions (callgrind).
        let number = c.number()?;
        let fetched;
        let name = match names.known().get(number as usize) {
            Some(name) => name,
            None => {
                fetched = names.name(number)?;
                &*fetched
            }
        };
        let desc = match &name.desc {
            Some(desc) => desc.clone(),
            // The schema lost the type: the same error a parse gives.
            None => Description::parse(name.text.as_bytes(), schema)?,
        };
        // Straight into the attribute's list: no list of borrowed
        // values in between.
        let n = c.varint()?;
        let mut values = meridian_model::entry::Values::with_capacity(n.min(1024) as usize);
        for _ in 0..n {
            values.push(c.bytes()?.to_vec());
        }
        attributes.push(Attribute {
            desc,
            name: name.spelled.clone(),
            values,
        });
    }
    if !c.data.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(Entry { dn, attributes })
}

/// One attribute of a format-2 record, found but not decoded: where its
/// parts lie in the record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawAttribute {
    /// The number of its name ([`crate::names`]).
    pub(crate) number: u32,
    /// Where it begins (its name's number).
    start: usize,
    /// Where its values begin (their count).
    values: usize,
    /// Where it ends.
    end: usize,
}

impl RawAttribute {
    /// Its values, in order, in `record`, the record it was found in.
    pub(crate) fn values<'r>(&self, record: &'r [u8]) -> RawValues<'r> {
        let mut cursor = Cursor {
            data: record.get(self.values..self.end).unwrap_or_default(),
        };
        // `locate` read this count and every value once already.
        let left = cursor
            .next_varint()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        RawValues { cursor, left }
    }
}

/// The values of an attribute of a stored record, as stored.
#[derive(Clone)]
pub struct RawValues<'r> {
    cursor: Cursor<'r>,
    left: usize,
}

impl<'r> Iterator for RawValues<'r> {
    type Item = &'r [u8];

    fn next(&mut self) -> Option<&'r [u8]> {
        self.left = self.left.checked_sub(1)?;
        self.cursor.next_bytes()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for RawValues<'_> {}

/// Hands `each` the attributes of a format-2 record, in order, and
/// answers its DN text; `None` for a record of another format or one
/// that cannot be read (which decoding then reports), or as soon as
/// `each` answers `None`.
pub(crate) fn locate(
    bytes: &[u8],
    mut each: impl FnMut(RawAttribute) -> Option<()>,
) -> Option<&[u8]> {
    let (version, mut c) = open_known(bytes)?;
    if version != VERSION_2 {
        return None;
    }
    let dn = c.next_bytes()?;
    let count = c.next_varint()?;
    let at = |c: &Cursor<'_>| bytes.len() - c.data.len();
    for _ in 0..count {
        let start = at(&c);
        let number = c.next_number()?;
        let values = at(&c);
        let n = c.next_varint()?;
        c.skip_values(n)?;
        each(RawAttribute {
            number,
            start,
            values,
            end: at(&c),
        })?;
    }
    c.data.is_empty().then_some(dn)
}

/// The first value of the attribute of type `attr` without options (as
/// [`Entry::get`] finds it) of a format-2 record, read in place:
/// `Some(None)` when the record has none. `None` when the record cannot
/// be read this way (another format, or a name `table` does not know),
/// for the caller to decode it instead.
pub(crate) fn first_value<'r>(
    record: &'r [u8],
    table: &crate::names::NameTable,
    attr: AttrId,
) -> Option<Option<&'r [u8]>> {
    let mut found = None;
    locate(record, |raw| {
        let desc = table.get(raw.number)?.desc.as_ref()?;
        if found.is_none() && desc.attr == attr && desc.options.is_empty() {
            found = Some(raw.values(record).next());
        }
        Some(())
    })?;
    Some(found.flatten())
}

/// The DN text of a format-2 record; `None` for another format or a
/// record whose DN cannot be read.
pub(crate) fn format_2_dn(bytes: &[u8]) -> Option<&[u8]> {
    let (version, mut c) = open_known(bytes)?;
    (version == VERSION_2).then(|| c.next_bytes()).flatten()
}

/// Hands `each` every attribute of a format-2 record in order, its
/// name's number and its values, reading the record once: values `each`
/// leaves unread are stepped over. `None` for a record of another
/// format or one that cannot be read, or as soon as `each` answers
/// `None`.
pub(crate) fn walk<'r>(
    bytes: &'r [u8],
    mut each: impl FnMut(u32, &mut RawValues<'r>) -> Option<()>,
) -> Option<()> {
    let (version, mut c) = open_known(bytes)?;
    if version != VERSION_2 {
        return None;
    }
    c.next_bytes()?;
    let count = c.next_varint()?;
    for _ in 0..count {
        let number = c.next_number()?;
        let left = usize::try_from(c.next_varint()?).ok()?;
        let mut values = RawValues { cursor: c, left };
        each(number, &mut values)?;
        while values.left > 0 {
            values.next()?;
        }
        c = values.cursor;
    }
    c.data.is_empty().then_some(())
}

/// A format-2 record of the DN text `dn`, the attributes `kept` of the
/// record `old` copied as stored, then the attributes `added` (name
/// number and values): the bytes [`encode`] gives for the entry they
/// make, since it writes every attribute as `kept` holds it. Kept
/// attributes that lie one after the other in `old` are copied at once.
pub(crate) fn encode_spliced<'v>(
    old: &[u8],
    dn: &[u8],
    kept: impl Iterator<Item = RawAttribute> + Clone,
    added: impl Iterator<Item = (u32, &'v [Vec<u8>])> + Clone,
) -> Vec<u8> {
    const VARINT_MAX: usize = 10;
    // The kept attributes and the DN are parts of `old`.
    let added_size: usize = added
        .clone()
        .map(|(_, values)| {
            2 * VARINT_MAX + values.iter().map(|v| VARINT_MAX + v.len()).sum::<usize>()
        })
        .sum();
    let mut out = Vec::with_capacity(old.len() + VARINT_MAX + added_size);
    out.push(VERSION_2);
    put_bytes(&mut out, dn);
    put_varint(
        &mut out,
        (kept.clone().count() + added.clone().count()) as u64,
    );
    let mut run: Option<(usize, usize)> = None;
    for attr in kept {
        match &mut run {
            Some((_, end)) if *end == attr.start => *end = attr.end,
            _ => {
                if let Some(bytes) = run.and_then(|(start, end)| old.get(start..end)) {
                    out.extend_from_slice(bytes);
                }
                run = Some((attr.start, attr.end));
            }
        }
    }
    if let Some(bytes) = run.and_then(|(start, end)| old.get(start..end)) {
        out.extend_from_slice(bytes);
    }
    for (number, values) in added {
        put_varint(&mut out, u64::from(number));
        put_varint(&mut out, values.len() as u64);
        for v in values {
            put_bytes(&mut out, v);
        }
    }
    out
}

/// One part of a stored entry, as [`visit`] hands them out.
#[derive(Debug, Clone, Copy)]
pub enum StoredPart<'a> {
    /// The DN as the client wrote it (first).
    Dn(&'a [u8]),
    /// One value, with its attribute's name as written and its type
    /// (`None` if the schema no longer knows it).
    Value {
        /// The attribute description as written (`cn;lang-de`).
        name: &'a str,
        /// The attribute type.
        attr: Option<AttrId>,
        /// The value.
        value: &'a [u8],
    },
}

/// Hands `each` the DN and every value of a stored record, in order,
/// building nothing.
pub(crate) fn visit(
    bytes: &[u8],
    names: &dyn NameSource,
    each: &mut dyn FnMut(StoredPart<'_>),
) -> Result<(), StoreError> {
    let schema = names.schema();
    let (version, mut c) = open(bytes)?;
    each(StoredPart::Dn(c.bytes()?));
    let count = c.varint()?;
    for _ in 0..count {
        if version == VERSION_1 {
            let raw = c.bytes()?;
            let attr = Description::parse(raw, schema).ok().map(|d| d.attr);
            let text = std::str::from_utf8(raw).map_err(|_| corrupt("attribute name"))?;
            visit_values(&mut c, text, attr, each)?;
        } else {
            let name = names.name(c.number()?)?;
            let attr = name.desc.as_ref().map(|d| d.attr);
            visit_values(&mut c, &name.text, attr, each)?;
        }
    }
    if !c.data.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(())
}

fn visit_values(
    c: &mut Cursor<'_>,
    name: &str,
    attr: Option<AttrId>,
    each: &mut dyn FnMut(StoredPart<'_>),
) -> Result<(), StoreError> {
    let n = c.varint()?;
    for _ in 0..n {
        let value = c.bytes()?;
        each(StoredPart::Value { name, attr, value });
    }
    Ok(())
}

/// A scan column's row for `record` ([`crate::columns`]): the same
/// format with an empty DN and only the attributes whose name number
/// `keep` accepts, appended to `out`. Returns whether it kept any; a
/// record with none appends nothing. A format-1 record (names as text)
/// is appended whole, since its names are not numbered: a row may hold
/// more than the column's attributes, never less.
pub(crate) fn project(
    record: &[u8],
    keep: &mut dyn FnMut(u32) -> bool,
    out: &mut Vec<u8>,
) -> Result<bool, StoreError> {
    let (version, mut c) = open(record)?;
    if version == VERSION_1 {
        out.extend_from_slice(record);
        return Ok(true);
    }
    c.bytes()?;
    let count = c.varint()?;
    let start = out.len();
    out.push(VERSION_2);
    put_bytes(out, b"");
    let mut kept = 0u64;
    let mut attributes = Vec::new();
    for _ in 0..count {
        let number = c
            .next_number()
            .ok_or_else(|| corrupt("attribute name number"))?;
        let n = c.varint()?;
        let values = c.data;
        c.skip_values(n)
            .ok_or_else(|| corrupt("length past the end"))?;
        if keep(number) {
            kept += 1;
            put_varint(&mut attributes, u64::from(number));
            put_varint(&mut attributes, n);
            let used = values.len() - c.data.len();
            attributes.extend_from_slice(values.get(..used).unwrap_or_default());
        }
    }
    if kept == 0 {
        out.truncate(start);
        return Ok(false);
    }
    put_varint(out, kept);
    out.extend_from_slice(&attributes);
    Ok(true)
}

/// A value count and the values after it.
fn values<'a>(c: &mut Cursor<'a>) -> Result<Vec<&'a [u8]>, StoreError> {
    let n = c.varint()?;
    let mut values = Vec::with_capacity(n.min(1024) as usize);
    for _ in 0..n {
        values.push(c.bytes()?);
    }
    Ok(values)
}

/// What one search has learnt about the store's attribute names: for
/// each item of its filter ([`Wanted::slot`]) and each name number of the
/// in-memory table, whether the name is the item's attribute. Filled as
/// names are met, so a scan tests each name once per search instead of
/// once per record (perf: the name tests were a third of an unindexed
/// scan).
pub(crate) struct Relevance {
    /// Name numbers per slot (the table's length when the search began).
    numbers: usize,
    /// `slot * numbers + number`: 0 not yet known, 1 no, 2 yes.
    cells: Vec<Cell<u8>>,
}

impl Relevance {
    /// The most cells a search keeps (a filter of a thousand items over a
    /// thousand names); beyond it names are tested each time.
    const MAX_CELLS: usize = 1 << 20;

    pub(crate) fn new(slots: usize, numbers: usize) -> Relevance {
        let cells = slots.saturating_mul(numbers);
        let (numbers, cells) = if cells <= Self::MAX_CELLS {
            (numbers, cells)
        } else {
            (0, 0)
        };
        Relevance {
            numbers,
            cells: vec![Cell::new(0); cells],
        }
    }

    /// Whether name `number` is item `slot`'s attribute; `test` answers
    /// the first time.
    #[inline]
    fn is_wanted(&self, slot: usize, number: u32, test: impl FnOnce() -> bool) -> bool {
        let number = number as usize;
        let cell = (number < self.numbers)
            .then(|| self.cells.get(slot * self.numbers + number))
            .flatten();
        match cell.map(Cell::get) {
            Some(1) => false,
            Some(2) => true,
            _ => {
                let wanted = test();
                if let Some(cell) = cell {
                    cell.set(if wanted { 2 } else { 1 });
                }
                wanted
            }
        }
    }
}

/// A stored entry evaluated where it lies: filters run on the record's
/// bytes, and only entries that match are decoded into an [`Entry`].
/// A malformed record yields no attributes (the full decode reports it).
pub(crate) struct RawEntry<'a, 'r> {
    bytes: &'a [u8],
    names: &'r dyn NameSource,
    relevance: &'r Relevance,
}

impl<'a, 'r> RawEntry<'a, 'r> {
    /// Wraps a stored record; `relevance` belongs to the search.
    pub(crate) fn new(
        bytes: &'a [u8],
        names: &'r dyn NameSource,
        relevance: &'r Relevance,
    ) -> Self {
        RawEntry {
            bytes,
            names,
            relevance,
        }
    }

    /// Whether name `number` is `wanted`'s attribute, from the name table.
    fn name_is_wanted(&self, number: u32, wanted: &Wanted, schema: &Schema) -> bool {
        let Ok(name) = self.names.name(number) else {
            return false;
        };
        let name = match &name.desc {
            Some(desc) => AttrName::Resolved(desc),
            None => AttrName::Raw(name.text.as_bytes()),
        };
        wanted.matches(name, schema)
    }

    /// The format and the cursor positioned at the attribute count.
    #[inline]
    fn attributes_cursor(&self) -> Option<(u8, Cursor<'a>)> {
        let (version, mut c) = open_known(self.bytes)?;
        c.next_bytes()?;
        Some((version, c))
    }
}

/// The values of one stored attribute, read lazily.
struct Values<'a> {
    cursor: Cursor<'a>,
    left: u64,
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.cursor.next_bytes()
    }
}

impl Target for RawEntry<'_, '_> {
    fn visit_wanted(&self, schema: &Schema, wanted: &Wanted, visit: &mut ValuesVisitor<'_>) {
        let Some((version, mut c)) = self.attributes_cursor() else {
            return;
        };
        if version == VERSION_1 {
            return visit_wanted_by_name(self, schema, wanted, visit);
        }
        let Some(count) = c.next_varint() else { return };
        for _ in 0..count {
            let (Some(number), Some(n)) = (c.next_number(), c.next_varint()) else {
                return;
            };
            let mut values = Values {
                cursor: Cursor { data: c.data },
                left: n,
            };
            if c.skip_values(n).is_none() {
                return;
            }
            let wanted_here = self.relevance.is_wanted(wanted.slot(), number, || {
                self.name_is_wanted(number, wanted, schema)
            });
            if wanted_here && !visit(&mut values) {
                return;
            }
        }
    }

    fn visit_attributes(&self, _schema: &Schema, visit: &mut AttributeVisitor<'_>) {
        let Some((version, mut c)) = self.attributes_cursor() else {
            return;
        };
        let Some(count) = c.next_varint() else { return };
        let known = self.names.known();
        for _ in 0..count {
            let stored;
            let name = if version == VERSION_1 {
                let Some(text) = c.next_bytes() else { return };
                AttrName::Raw(text)
            } else {
                let Some(number) = c.next_number() else {
                    return;
                };
                let name = match known.get(number as usize) {
                    Some(name) => name,
                    None => {
                        let Ok(name) = self.names.name(number) else {
                            return;
                        };
                        stored = name;
                        &*stored
                    }
                };
                match &name.desc {
                    Some(desc) => AttrName::Resolved(desc),
                    None => AttrName::Raw(name.text.as_bytes()),
                }
            };
            let Some(n) = c.next_varint() else { return };
            let values_start = Cursor { data: c.data };
            // Skip the values on the main cursor first.
            if c.skip_values(n).is_none() {
                return;
            }
            let mut values = Values {
                cursor: values_start,
                left: n,
            };
            if !visit(name, &mut values) {
                return;
            }
        }
    }

    fn dn_values(&self, schema: &Schema) -> Vec<(AttrId, Vec<u8>)> {
        decode_dn(self.bytes)
            .ok()
            .filter(|dn| !dn.is_empty())
            .and_then(|dn| Dn::parse(dn, schema).ok())
            .map(|dn| {
                dn.rdn_values()
                    .iter()
                    .flat_map(|rdn| rdn.iter())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::NameTable;

    #[test]
    fn round_trip_in_both_formats() {
        let schema = Schema::builtin().unwrap();
        let dn = Dn::parse(b"uid=jdoe,ou=People,dc=example,dc=com", &schema).unwrap();
        let attrs: &[(&str, &[&[u8]])] = &[
            ("objectClass", &[b"inetOrgPerson"]),
            ("cn;lang-de", &["J\u{f6}hn".as_bytes()]),
            ("jpegPhoto", &[&[0u8, 255, 1, 2][..], &[7u8; 300][..]]),
            // Not the primary name's spelling: kept as written.
            ("SN", &[b"Doe"]),
        ];
        let e = Entry::new(
            dn,
            attrs
                .iter()
                .map(|(n, vs)| (n.as_bytes(), vs.iter().copied())),
            &schema,
        )
        .unwrap();
        let table = NameTable::of(
            &["sn", "jpegPhoto", "objectClass", "cn;lang-de", "SN"],
            &schema,
        );
        let bytes = encode(&e, |_, a| Ok(table.number_of(a.name(&schema)).unwrap())).unwrap();
        let names = (table, &schema);
        assert_eq!(decode(&bytes, &names).unwrap(), e);
        assert_eq!(
            decode_dn(&bytes).unwrap(),
            b"uid=jdoe,ou=People,dc=example,dc=com"
        );
        // One byte per name: the record holds no name text.
        assert!(!bytes.windows(9).any(|w| w == b"jpegPhoto"));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], &names).is_err());
        }

        // Format 1 (names as text), as older databases hold it.
        let mut v1 = vec![1u8];
        put_bytes(&mut v1, e.dn.original().as_bytes());
        put_varint(&mut v1, e.attributes.len() as u64);
        for a in &e.attributes {
            put_bytes(&mut v1, a.name(&schema).as_bytes());
            put_varint(&mut v1, a.values.len() as u64);
            for v in &a.values {
                put_bytes(&mut v1, v);
            }
        }
        assert_eq!(decode(&v1, &names).unwrap(), e);

        // One value read in place, as `Entry::get` finds it: the type
        // without options, its first value; none of a type not there; the
        // format-1 record is left to decoding.
        let (table, _) = &names;
        let attr = |name: &str| schema.attribute_id(name).unwrap();
        assert_eq!(
            first_value(&bytes, table, attr("sn")),
            Some(Some(&b"Doe"[..]))
        );
        assert_eq!(first_value(&bytes, table, attr("cn")), Some(None));
        assert_eq!(first_value(&bytes, table, attr("mail")), Some(None));
        assert_eq!(
            first_value(&bytes, table, attr("jpegPhoto")),
            Some(Some(&[0u8, 255, 1, 2][..]))
        );
        assert_eq!(first_value(&v1, table, attr("sn")), None);
    }
}
