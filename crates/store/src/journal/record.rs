//! A journal record: the payload of a frame (`frame.rs`), holding the
//! commands of a committed batch.
//!
//! ```text
//! payload  u8 format (1) ‖ u64 BE sequence number ‖ varint count ‖ commands
//! ```
//!
//! A command is a tag byte and its fields; DNs and attribute names are
//! kept as the client wrote them and parsed again on replay, so a
//! replayed command is the command that was applied (the store's
//! determinism makes its effect the same). Lengths are varints as in the
//! entry codec.

use std::borrow::Cow;
use std::sync::Arc;

use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::{AttrName, Attribute, Description, Entry};
use meridian_model::modify::{ModOp, Modification};

use super::frame::{self, FRAME_HEADER};
use crate::codec::{put_bytes, put_varint, take_varint};
use crate::{Command, Operational, StoreError};

const FORMAT: u8 = 1;
/// `Guarded`, `ReadBack` and `Unchanged` wrap one command; nothing nests deeper than
/// this, and a record that does is corrupt (no unbounded recursion).
const MAX_NESTING: u32 = 4;

mod tag {
    pub(super) const ADD: u8 = 1;
    pub(super) const DELETE: u8 = 2;
    pub(super) const DELETE_SUBTREE: u8 = 3;
    pub(super) const MODIFY: u8 = 4;
    pub(super) const MODIFY_DN: u8 = 5;
    pub(super) const GUARDED: u8 = 6;
    pub(super) const REBUILD_INDEXES: u8 = 7;
    pub(super) const ADD_MANY: u8 = 8;
    pub(super) const READ_BACK: u8 = 9;
    pub(super) const SET_LOAD_STATE: u8 = 10;
    /// `Add` with `prechecked` (`ADD` is without: the journals written
    /// before the flag existed read as they always did).
    pub(super) const ADD_PRECHECKED: u8 = 11;
    pub(super) const BUILD_INDEXES: u8 = 12;
    pub(super) const UNCHANGED: u8 = 13;
    pub(super) const TRANSACTION: u8 = 14;
}

/// A batch's commands go into records of about this size: a batch of
/// large entries becomes several records (replaying them one transaction
/// each gives the same database: commands are deterministic and their
/// order is kept).
const RECORD_TARGET: usize = 64 << 20;
/// Room for a payload's format, sequence number and count.
const PAYLOAD_HEAD: usize = 1 + 8 + 10;

/// A point in a [`Batch`] to roll back to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchMark {
    records: usize,
    last_bytes: usize,
    last_count: u64,
}

/// The commands of one committed batch, as records to be framed.
pub(crate) struct Batch {
    /// Each record's encoded commands and their number; the last one is
    /// still filling.
    records: Vec<(Vec<u8>, u64)>,
    /// [`RECORD_TARGET`], smaller in tests.
    target: usize,
}

impl Batch {
    pub(crate) fn new() -> Batch {
        Batch {
            records: Vec::new(),
            target: RECORD_TARGET,
        }
    }

    /// A new, empty batch with the same record size.
    pub(crate) fn emptied(&self) -> Batch {
        Batch {
            records: Vec::new(),
            target: self.target,
        }
    }

    /// Where the batch stands, to go back to should the transaction
    /// about to be tried fail (a batch may take several transactions:
    /// `writer::commit_commands`).
    pub(crate) fn mark(&self) -> BatchMark {
        let last = self.records.last();
        BatchMark {
            records: self.records.len(),
            last_bytes: last.map_or(0, |(bytes, _)| bytes.len()),
            last_count: last.map_or(0, |(_, count)| *count),
        }
    }

    /// Forgets the commands pushed since `mark`.
    pub(crate) fn roll_back(&mut self, mark: BatchMark) {
        self.records.truncate(mark.records);
        if let Some((bytes, count)) = self.records.last_mut() {
            bytes.truncate(mark.last_bytes);
            *count = mark.last_count;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// How many records (and sequence numbers) the batch takes.
    pub(crate) fn records(&self) -> u64 {
        self.records.len() as u64
    }

    pub(crate) fn push(&mut self, command: &Command, schema: &Schema) {
        match self.records.last_mut() {
            Some((bytes, count)) if bytes.len() < self.target => {
                put_command(bytes, command, schema);
                *count += 1;
            }
            _ => {
                let mut bytes = Vec::new();
                put_command(&mut bytes, command, schema);
                self.records.push((bytes, 1));
            }
        }
    }

    /// The most bytes [`Batch::seal`] can make of the batch as it is
    /// (a count's varint is taken at its widest): what the writer claims
    /// in the journal before it commits (`space.rs`).
    pub(crate) fn framed_bound(&self) -> u64 {
        self.records
            .iter()
            .map(|(bytes, _)| (FRAME_HEADER + PAYLOAD_HEAD + bytes.len()) as u64)
            .sum()
    }

    /// The framed records, numbered from `first_seq`, one after another.
    /// Fails only for a single command too large for a frame (4 GiB).
    pub(crate) fn seal(&self, first_seq: u64) -> Result<Vec<u8>, StoreError> {
        let total: usize = self
            .records
            .iter()
            .map(|(bytes, _)| FRAME_HEADER + PAYLOAD_HEAD + bytes.len())
            .sum();
        let mut frames = Vec::with_capacity(total);
        for ((bytes, count), seq) in self.records.iter().zip(first_seq..) {
            frame::put_frame(&mut frames, |payload| {
                payload.push(FORMAT);
                payload.extend_from_slice(&seq.to_be_bytes());
                put_varint(payload, *count);
                payload.extend_from_slice(bytes);
            })?;
        }
        Ok(frames)
    }
}

/// The sequence number of a payload and its commands.
pub(crate) fn decode_payload(
    payload: &[u8],
    schema: &Schema,
) -> Result<(u64, Vec<Command>), StoreError> {
    let mut r = PayloadCursor { data: payload };
    if r.u8()? != FORMAT {
        return Err(corrupt("unknown journal format"));
    }
    let seq = u64::from_be_bytes(r.take(8)?.try_into().map_err(|_| corrupt("sequence"))?);
    Ok((seq, r.counted_commands(schema)?))
}

/// Commands in the record encoding, without a frame or a sequence
/// number: a replicated log entry's payload (`replicated.rs`).
pub(crate) fn encode_commands<'c>(
    commands: impl ExactSizeIterator<Item = &'c Command>,
    schema: &Schema,
) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, commands.len() as u64);
    for command in commands {
        put_command(&mut out, command, schema);
    }
    out
}

/// The commands [`encode_commands`] made.
pub(crate) fn decode_commands(bytes: &[u8], schema: &Schema) -> Result<Vec<Command>, StoreError> {
    PayloadCursor { data: bytes }.counted_commands(schema)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::corrupt(format_args!("journal record: {what}"))
}

fn put_values(out: &mut Vec<u8>, values: &[Vec<u8>]) {
    put_varint(out, values.len() as u64);
    for v in values {
        put_bytes(out, v);
    }
}

fn put_entry(out: &mut Vec<u8>, entry: &Entry, schema: &Schema) {
    put_bytes(out, entry.dn.original().as_bytes());
    put_varint(out, entry.attributes.len() as u64);
    for a in &entry.attributes {
        put_bytes(out, a.name(schema).as_bytes());
        put_values(out, &a.values);
    }
}

fn put_operational(out: &mut Vec<u8>, operational: &Operational) {
    put_varint(out, operational.len() as u64);
    for (name, values) in operational {
        put_bytes(out, name.as_bytes());
        put_values(out, values);
    }
}

fn put_command(out: &mut Vec<u8>, command: &Command, schema: &Schema) {
    match command {
        Command::Add { entry, prechecked } => {
            out.push(if *prechecked {
                tag::ADD_PRECHECKED
            } else {
                tag::ADD
            });
            put_entry(out, entry, schema);
        }
        Command::Delete { dn } => {
            out.push(tag::DELETE);
            put_bytes(out, dn.original().as_bytes());
        }
        Command::DeleteSubtree { dn } => {
            out.push(tag::DELETE_SUBTREE);
            put_bytes(out, dn.original().as_bytes());
        }
        Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        } => {
            out.push(tag::MODIFY);
            put_bytes(out, dn.original().as_bytes());
            put_varint(out, changes.len() as u64);
            for change in changes {
                out.push(match change.op {
                    ModOp::Add => 0,
                    ModOp::Delete => 1,
                    ModOp::Replace => 2,
                    ModOp::Increment => 3,
                });
                put_bytes(out, change.attr.as_bytes());
                put_values(out, &change.values);
            }
            put_operational(out, operational);
            out.push(u8::from(*permissive));
        }
        Command::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn,
            new_superior,
            operational,
        } => {
            out.push(tag::MODIFY_DN);
            put_bytes(out, dn.original().as_bytes());
            put_bytes(out, new_rdn.as_bytes());
            out.push(u8::from(*delete_old_rdn));
            match new_superior {
                Some(superior) => {
                    out.push(1);
                    put_bytes(out, superior.original().as_bytes());
                }
                None => out.push(0),
            }
            put_operational(out, operational);
        }
        Command::Guarded { assertion, command } => {
            out.push(tag::GUARDED);
            put_bytes(out, assertion);
            put_command(out, command, schema);
        }
        Command::Unchanged { seen, command } => {
            out.push(tag::UNCHANGED);
            put_bytes(out, seen);
            put_command(out, command, schema);
        }
        Command::RebuildIndexes => out.push(tag::REBUILD_INDEXES),
        Command::BuildIndexes {
            from,
            to,
            types,
            complete,
        } => {
            out.push(tag::BUILD_INDEXES);
            put_varint(out, *from);
            put_varint(out, *to);
            put_varint(out, types.len() as u64);
            for oid in types {
                put_bytes(out, oid.as_bytes());
            }
            out.push(u8::from(*complete));
        }
        Command::AddMany {
            entries,
            prechecked,
        } => {
            out.push(tag::ADD_MANY);
            out.push(u8::from(*prechecked));
            put_varint(out, entries.len() as u64);
            for entry in entries.iter() {
                put_entry(out, entry, schema);
            }
        }
        Command::ReadBack { pre, post, command } => {
            out.push(tag::READ_BACK);
            out.push(u8::from(*pre));
            out.push(u8::from(*post));
            put_command(out, command, schema);
        }
        Command::Transaction { commands } => {
            out.push(tag::TRANSACTION);
            put_varint(out, commands.len() as u64);
            for command in commands {
                put_command(out, command, schema);
            }
        }
        Command::SetLoadState(state) => {
            out.push(tag::SET_LOAD_STATE);
            match state {
                Some(text) => {
                    out.push(1);
                    put_bytes(out, text.as_bytes());
                }
                None => out.push(0),
            }
        }
    }
}

struct PayloadCursor<'a> {
    data: &'a [u8],
}

impl<'a> PayloadCursor<'a> {
    /// A count, that many commands, and nothing after them.
    fn counted_commands(&mut self, schema: &Schema) -> Result<Vec<Command>, StoreError> {
        let count = self.varint()?;
        let mut commands = Vec::with_capacity(count.min(4096) as usize);
        for _ in 0..count {
            commands.push(self.command(schema, 0)?);
        }
        if !self.data.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(commands)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if n > self.data.len() {
            return Err(corrupt("length past the end"));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, StoreError> {
        let (&b, rest) = self
            .data
            .split_first()
            .ok_or_else(|| corrupt("truncated"))?;
        self.data = rest;
        Ok(b)
    }

    fn flag(&mut self) -> Result<bool, StoreError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(corrupt("flag")),
        }
    }

    fn varint(&mut self) -> Result<u64, StoreError> {
        take_varint(&mut self.data).ok_or_else(|| corrupt("truncated or overlong varint"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let len = usize::try_from(self.varint()?).map_err(|_| corrupt("length"))?;
        self.take(len)
    }

    fn text(&mut self) -> Result<String, StoreError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| corrupt("text is not UTF-8"))
    }

    /// A count of items each at least one byte long: never more than the
    /// bytes left, so a damaged count cannot reserve unbounded memory.
    fn count(&mut self) -> Result<usize, StoreError> {
        let n = usize::try_from(self.varint()?).map_err(|_| corrupt("count"))?;
        if n > self.data.len() {
            return Err(corrupt("count past the end"));
        }
        Ok(n)
    }

    /// A list of values, collected into whichever list the caller keeps
    /// (a modification's `Vec`, an attribute's `Values`).
    fn values<C: FromIterator<Vec<u8>>>(&mut self) -> Result<C, StoreError> {
        let n = self.count()?;
        (0..n).map(|_| Ok(self.bytes()?.to_vec())).collect()
    }

    fn dn(&mut self, schema: &Schema) -> Result<Dn, StoreError> {
        let text = self.bytes()?;
        if text.is_empty() {
            return Ok(Dn::root());
        }
        Ok(Dn::parse(text, schema)?)
    }

    fn entry(&mut self, schema: &Schema) -> Result<Entry, StoreError> {
        let dn = self.dn(schema)?;
        let n = self.count()?;
        let mut attributes = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.text()?;
            let desc = Description::parse(name.as_bytes(), schema)?;
            attributes.push(Attribute {
                name: AttrName::new(&name, &desc, schema),
                desc,
                values: self.values()?,
            });
        }
        Ok(Entry { dn, attributes })
    }

    fn operational(&mut self) -> Result<Operational, StoreError> {
        let n = self.count()?;
        (0..n)
            .map(|_| Ok((Cow::Owned(self.text()?), self.values()?)))
            .collect()
    }

    fn inner(&mut self, schema: &Schema, depth: u32) -> Result<Box<Command>, StoreError> {
        if depth >= MAX_NESTING {
            return Err(corrupt("commands nested too deep"));
        }
        Ok(Box::new(self.command(schema, depth + 1)?))
    }

    fn command(&mut self, schema: &Schema, depth: u32) -> Result<Command, StoreError> {
        Ok(match self.u8()? {
            tag::ADD => Command::Add {
                entry: self.entry(schema)?,
                prechecked: false,
            },
            tag::ADD_PRECHECKED => Command::Add {
                entry: self.entry(schema)?,
                prechecked: true,
            },
            tag::DELETE => Command::Delete {
                dn: self.dn(schema)?,
            },
            tag::DELETE_SUBTREE => Command::DeleteSubtree {
                dn: self.dn(schema)?,
            },
            tag::MODIFY => {
                let dn = self.dn(schema)?;
                let n = self.count()?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    let op = match self.u8()? {
                        0 => ModOp::Add,
                        1 => ModOp::Delete,
                        2 => ModOp::Replace,
                        3 => ModOp::Increment,
                        _ => return Err(corrupt("modify operation")),
                    };
                    changes.push(Modification {
                        op,
                        attr: self.text()?,
                        values: self.values()?,
                    });
                }
                Command::Modify {
                    dn,
                    changes,
                    operational: self.operational()?,
                    permissive: self.flag()?,
                }
            }
            tag::MODIFY_DN => Command::ModifyDn {
                dn: self.dn(schema)?,
                new_rdn: self.text()?,
                delete_old_rdn: self.flag()?,
                new_superior: if self.flag()? {
                    Some(Box::new(self.dn(schema)?))
                } else {
                    None
                },
                operational: self.operational()?,
            },
            tag::GUARDED => Command::Guarded {
                assertion: self.bytes()?.to_vec(),
                command: self.inner(schema, depth)?,
            },
            tag::UNCHANGED => Command::Unchanged {
                seen: self.bytes()?.to_vec(),
                command: self.inner(schema, depth)?,
            },
            tag::REBUILD_INDEXES => Command::RebuildIndexes,
            tag::BUILD_INDEXES => Command::BuildIndexes {
                from: self.varint()?,
                to: self.varint()?,
                types: (0..self.count()?)
                    .map(|_| self.text())
                    .collect::<Result<_, _>>()?,
                complete: self.flag()?,
            },
            tag::ADD_MANY => {
                let prechecked = self.flag()?;
                let n = self.count()?;
                let entries = (0..n)
                    .map(|_| self.entry(schema))
                    .collect::<Result<Vec<_>, _>>()?;
                Command::AddMany {
                    entries: Arc::new(entries),
                    prechecked,
                }
            }
            tag::READ_BACK => Command::ReadBack {
                pre: self.flag()?,
                post: self.flag()?,
                command: self.inner(schema, depth)?,
            },
            tag::TRANSACTION => {
                if depth > 0 {
                    return Err(corrupt("a transaction inside another command"));
                }
                let n = self.count()?;
                let commands = (0..n)
                    .map(|_| Ok(*self.inner(schema, depth)?))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                Command::Transaction { commands }
            }
            tag::SET_LOAD_STATE => Command::SetLoadState(if self.flag()? {
                Some(self.text()?)
            } else {
                None
            }),
            _ => return Err(corrupt("unknown command")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::frame::{Frame, Frames};

    fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &[&[u8]])]) -> Entry {
        Entry::new(
            Dn::parse(dn.as_bytes(), schema).unwrap(),
            attrs
                .iter()
                .map(|(n, vs)| (n.as_bytes(), vs.iter().copied())),
            schema,
        )
        .unwrap()
    }

    /// One of every command, with the fields that could be mixed up set
    /// to telling values.
    fn every_command(schema: &Schema) -> Vec<Command> {
        let dn = |s: &str| Dn::parse(s.as_bytes(), schema).unwrap();
        let person = entry(
            schema,
            "cn=J\u{f6}rg M\\2C Smith,dc=example,dc=com",
            &[
                ("objectClass", &[b"person"]),
                ("cn;lang-de", &["J\u{f6}rg".as_bytes()]),
                ("sn", &[b"Smith", b""]),
                ("jpegPhoto", &[&[0u8, 255, 0x80, 10][..]]),
            ],
        );
        let operational: Operational = vec![
            ("modifyTimestamp".into(), vec![b"20261124180000Z".to_vec()]),
            ("entryCSN".into(), vec![vec![1, 2, 3], vec![]]),
        ];
        vec![
            Command::Add {
                entry: person.clone(),
                prechecked: false,
            },
            Command::Add {
                entry: person.clone(),
                prechecked: true,
            },
            Command::Delete {
                dn: dn("uid=a,dc=example,dc=com"),
            },
            Command::DeleteSubtree {
                dn: dn("ou=People,dc=example,dc=com"),
            },
            Command::Modify {
                dn: dn("uid=a,dc=example,dc=com"),
                changes: vec![
                    Modification {
                        op: ModOp::Add,
                        attr: "mail".into(),
                        values: vec![b"a@example.com".to_vec()],
                    },
                    Modification {
                        op: ModOp::Delete,
                        attr: "description;x-tag".into(),
                        values: vec![],
                    },
                    Modification {
                        op: ModOp::Replace,
                        attr: "cn".into(),
                        values: vec![vec![0xC3, 0xA9]; 200],
                    },
                    Modification {
                        op: ModOp::Increment,
                        attr: "uidNumber".into(),
                        values: vec![b"-1".to_vec()],
                    },
                ],
                operational: operational.clone(),
                permissive: true,
            },
            Command::ModifyDn {
                dn: dn("uid=a,dc=example,dc=com"),
                new_rdn: "uid=b".into(),
                delete_old_rdn: true,
                new_superior: Some(Box::new(dn("ou=Other,dc=example,dc=com"))),
                operational: operational.clone(),
            },
            Command::ModifyDn {
                dn: dn("uid=a,dc=example,dc=com"),
                new_rdn: "uid=c+cn=C".into(),
                delete_old_rdn: false,
                new_superior: None,
                operational: vec![],
            },
            Command::Guarded {
                assertion: vec![0x87, 0x0b, b'o', b'b', b'j', b'e', b'c', b't'],
                command: Box::new(Command::ReadBack {
                    pre: true,
                    post: false,
                    command: Box::new(Command::Delete {
                        dn: dn("uid=a,dc=example,dc=com"),
                    }),
                }),
            },
            Command::Unchanged {
                seen: b"20261128114500.000000Z#000000#002#000000".to_vec(),
                command: Box::new(Command::Delete {
                    dn: dn("uid=a,dc=example,dc=com"),
                }),
            },
            Command::RebuildIndexes,
            Command::BuildIndexes {
                from: 1025,
                to: 1537,
                types: vec!["1.3.6.1.1.1.1.0".into(), "2.5.4.3".into()],
                complete: false,
            },
            Command::BuildIndexes {
                from: 1537,
                to: 1537,
                types: Vec::new(),
                complete: true,
            },
            Command::AddMany {
                entries: Arc::new(vec![person.clone(), person]),
                prechecked: true,
            },
            Command::SetLoadState(Some("import of a.ldif".into())),
            Command::SetLoadState(None),
            Command::Transaction {
                commands: vec![
                    Command::Delete {
                        dn: dn("uid=a,dc=example,dc=com"),
                    },
                    Command::ReadBack {
                        pre: false,
                        post: true,
                        command: Box::new(Command::ModifyDn {
                            dn: dn("uid=b,dc=example,dc=com"),
                            new_rdn: "uid=a".into(),
                            delete_old_rdn: true,
                            new_superior: None,
                            operational: vec![],
                        }),
                    },
                ],
            },
            Command::Delete { dn: Dn::root() },
        ]
    }

    fn framed(commands: &[Command], seq: u64, schema: &Schema) -> Vec<u8> {
        let mut batch = Batch::new();
        for c in commands {
            batch.push(c, schema);
        }
        batch.seal(seq).unwrap()
    }

    #[test]
    fn a_large_batch_becomes_several_records_in_order() {
        let schema = Schema::builtin().unwrap();
        let commands = every_command(&schema);
        let mut batch = Batch::new();
        batch.target = 100;
        for c in &commands {
            batch.push(c, &schema);
        }
        assert!(batch.records() > 2, "{}", batch.records());
        let frames = batch.seal(41).unwrap();
        let mut reader = Frames::new(&frames[..], frames.len() as u64);
        let (mut seq, mut decoded) = (41, Vec::new());
        while let Frame::Whole(payload) = reader.next_frame().unwrap() {
            let (s, mut commands) = decode_payload(&payload, &schema).unwrap();
            assert_eq!(s, seq);
            decoded.append(&mut commands);
            seq += 1;
        }
        assert_eq!(reader.offset(), frames.len() as u64);
        assert_eq!(seq, 41 + batch.records());
        assert_eq!(format!("{decoded:#?}"), format!("{commands:#?}"));
    }

    #[test]
    fn every_command_survives_the_round_trip() {
        let schema = Schema::builtin().unwrap();
        let commands = every_command(&schema);
        let frame = framed(&commands, 1 << 40, &schema);
        let mut reader = Frames::new(&frame[..], frame.len() as u64);
        let Frame::Whole(payload) = reader.next_frame().unwrap() else {
            panic!("a sealed batch is a whole frame");
        };
        assert_eq!(reader.offset(), frame.len() as u64);
        assert!(matches!(reader.next_frame().unwrap(), Frame::End));
        let (seq, decoded) = decode_payload(&payload, &schema).unwrap();
        assert_eq!(seq, 1 << 40);
        // Command has no PartialEq: its Debug form shows every field,
        // DNs as written and entries attribute by attribute.
        assert_eq!(format!("{decoded:#?}"), format!("{commands:#?}"));
        assert_eq!(framed(&decoded, 1 << 40, &schema), frame);
    }

    #[test]
    fn a_damaged_payload_with_a_good_checksum_is_an_error_not_a_panic() {
        // What a bug on the writing side would produce: every prefix and
        // every one-byte change of a payload decodes to an error or to
        // commands, never a panic or an allocation of the claimed size.
        let schema = Schema::builtin().unwrap();
        let frame = framed(&every_command(&schema), 7, &schema);
        let payload = &frame[FRAME_HEADER..];
        for cut in 0..payload.len() {
            assert!(decode_payload(&payload[..cut], &schema).is_err());
        }
        for at in 0..payload.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut damaged = payload.to_vec();
                damaged[at] ^= flip;
                let _ = decode_payload(&damaged, &schema);
            }
        }
    }
}
