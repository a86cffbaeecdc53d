//! Reading inputs: one thread per input cuts it into raw records (LDIF
//! text or BER PDUs) and hands them on in chunks; parsing happens on the
//! workers. The format is told by the first byte: `0x30` (an LDAPMessage
//! SEQUENCE) or `0x68` (a bare AddRequest) is BER, anything else LDIF.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use meridian_ldif::{AttrValue, Body, DescriptionText, Limits, RawRecord, Splitter};
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp};

/// Raw records handed to workers at a time: amortises channel costs.
pub(crate) const CHUNK: usize = 256;

/// Where a record came from, for error messages: `input:line` for LDIF,
/// `input: PDU n (byte offset)` for BER.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) input: Arc<str>,
    pub(crate) at: Position,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Position {
    Line(u64),
    Pdu { number: u64, offset: u64 },
}

impl Origin {
    /// Line `line` of `input`.
    pub(crate) fn line(input: &Arc<str>, line: u64) -> Origin {
        Origin {
            input: Arc::clone(input),
            at: Position::Line(line),
        }
    }

    /// PDU `number`, at byte `offset`, of `input`.
    pub(crate) fn pdu(input: &Arc<str>, number: u64, offset: u64) -> Origin {
        Origin {
            input: Arc::clone(input),
            at: Position::Pdu { number, offset },
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Position::Line(line) => write!(f, "{}:{line}", self.input),
            Position::Pdu { number, offset } => {
                write!(f, "{}: PDU {number} (byte {offset})", self.input)
            }
        }
    }
}

/// One record, not yet parsed.
pub(crate) enum Raw {
    Ldif(RawRecord),
    /// A whole BER PDU: an LDAPMessage, or a bare AddRequest.
    Ber {
        number: u64,
        offset: u64,
        pdu: Vec<u8>,
    },
}

/// A record as an add: its DN and its `(description, value)` pairs in
/// input order, whichever format it came in.
pub(crate) struct AddRecord {
    pub(crate) origin: Origin,
    pub(crate) dn: Vec<u8>,
    pub(crate) values: Values,
}

/// Descriptions and values, one value each, in input order (as the LDIF
/// reader gives them, so an LDIF record's list is moved, not rebuilt).
pub(crate) type Values = Vec<AttrValue>;

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

impl Raw {
    /// The add this record asks for; `Ok(None)` for a record of comments
    /// only. Change records other than add are refused: import loads
    /// entries.
    pub(crate) fn into_add(
        self,
        input: &Arc<str>,
        limits: &Limits,
    ) -> Result<Option<AddRecord>, Refused> {
        match self {
            Raw::Ldif(raw) => {
                let origin = Origin::line(input, raw.line);
                let record = match meridian_ldif::parse_record(&raw, input, limits) {
                    Ok(None) => return Ok(None),
                    Ok(Some(record)) => record,
                    // A syntax error names its own line.
                    Err(e) => {
                        return Err(Refused {
                            origin: Origin::line(input, e.line),
                            message: e.message,
                        });
                    }
                };
                let attrs = match record.body {
                    Body::Content(attrs) | Body::Add(attrs) => attrs,
                    other => {
                        let kind = match other {
                            Body::Delete => "delete",
                            Body::ModRdn { .. } => "modrdn",
                            _ => "modify",
                        };
                        return Err(Refused {
                            origin,
                            message: format!(
                                "a `changetype: {kind}` record: import loads entries (apply changes with ldapmodify)"
                            ),
                        });
                    }
                };
                Ok(Some(AddRecord {
                    origin,
                    dn: record.dn,
                    values: attrs,
                }))
            }
            Raw::Ber {
                number,
                offset,
                pdu,
            } => {
                let origin = Origin::pdu(input, number, offset);
                match ber_add(pdu, limits) {
                    Ok((dn, values)) => Ok(Some(AddRecord { origin, dn, values })),
                    Err(message) => Err(Refused { origin, message }),
                }
            }
        }
    }
}

/// The DN and values of an LDAPMessage holding an AddRequest, or of a
/// bare AddRequest.
fn ber_add(mut pdu: Vec<u8>, limits: &Limits) -> Result<(Vec<u8>, Values), String> {
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
    let decode_limits = DecodeLimits {
        max_pdu_bytes: limits.max_record_bytes.saturating_add(16),
        ..DecodeLimits::default()
    };
    let message = LdapMessage::decode(&pdu, &decode_limits).map_err(|e| format!("bad PDU: {e}"))?;
    let ProtocolOp::AddRequest(add) = message.op else {
        return Err("not an AddRequest: import loads entries".into());
    };
    let mut values = Vec::new();
    for attribute in add.attributes.iter() {
        let description = std::str::from_utf8(attribute.ty)
            .map(DescriptionText::from)
            .map_err(|_| "an attribute description that is not UTF-8".to_owned())?;
        for value in attribute.values.iter() {
            values.push(AttrValue {
                description: description.clone(),
                value: value.to_vec(),
            });
        }
    }
    Ok((add.dn.to_vec(), values))
}

/// What a reader thread sends: records, or the error that ended its input.
pub(crate) enum Chunk {
    Records { input: Arc<str>, records: Vec<Raw> },
    Failed { origin: Origin, message: String },
}

/// Reads `path` (a file, a FIFO, or `-` for standard input) to the end,
/// sending chunks; returns when the input ends, fails, or the receiver
/// has gone (the load stopped).
pub(crate) fn read_input(path: &Path, limits: Limits, out: &SyncSender<Chunk>) {
    let name: Arc<str> = path.display().to_string().into();
    let fail = |at: Position, message: String| {
        let origin = Origin {
            input: Arc::clone(&name),
            at,
        };
        let _ = out.send(Chunk::Failed { origin, message });
    };
    let reader: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        match File::open(path) {
            Ok(file) => Box::new(file),
            Err(e) => return fail(Position::Line(0), format!("cannot open: {e}")),
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let first = match reader.fill_buf() {
        Ok(buf) => buf.first().copied(),
        Err(e) => return fail(Position::Line(0), format!("read error: {e}")),
    };
    let result = match first {
        None => Ok(()),
        Some(0x30 | 0x68) => read_ber(reader, &name, limits, out),
        Some(_) => read_ldif(reader, &name, limits, out),
    };
    if let Err((at, message)) = result {
        fail(at, message);
    }
}

type ReadResult = Result<(), (Position, String)>;

/// The input, buffered.
type Input = BufReader<Box<dyn Read + Send>>;

/// Whether a chunk should go now: it is full, or the input has nothing
/// more buffered, so the next read may wait (a FIFO whose writer is slow
/// or idle must not hold back the records already read).
fn chunk_ready(records: &[Raw], input: &Input) -> bool {
    records.len() == CHUNK || (!records.is_empty() && input.buffer().is_empty())
}

fn read_ldif(
    reader: Input,
    name: &Arc<str>,
    limits: Limits,
    out: &SyncSender<Chunk>,
) -> ReadResult {
    let mut splitter = Splitter::new(reader, Arc::clone(name), limits);
    let mut records = Vec::with_capacity(CHUNK);
    loop {
        match splitter.next_raw() {
            Ok(Some(raw)) => records.push(Raw::Ldif(raw)),
            Ok(None) => break,
            Err(e) => {
                send(out, name, &mut records);
                return Err((Position::Line(e.line), e.message));
            }
        }
        if chunk_ready(&records, splitter.get_ref()) && !send(out, name, &mut records) {
            return Ok(());
        }
    }
    send(out, name, &mut records);
    Ok(())
}

fn read_ber(
    mut reader: Input,
    name: &Arc<str>,
    limits: Limits,
    out: &SyncSender<Chunk>,
) -> ReadResult {
    let mut records = Vec::with_capacity(CHUNK);
    let (mut number, mut offset) = (0u64, 0u64);
    loop {
        number += 1;
        let at = Position::Pdu { number, offset };
        let mut pdu = Vec::new();
        // The header: tag, then a length of at most 5 bytes.
        let total = loop {
            let mut byte = [0u8];
            match reader.read(&mut byte) {
                Ok(0) if pdu.is_empty() => {
                    send(out, name, &mut records);
                    return Ok(());
                }
                Ok(0) => return Err((at, "the input ends inside a PDU header".into())),
                Ok(_) => pdu.push(byte[0]),
                Err(e) => return Err((at, format!("read error: {e}"))),
            }
            match meridian_ber::frame::parse_header(&pdu) {
                Ok((tag, header, length)) => {
                    if tag.0 != 0x30 && tag.0 != 0x68 {
                        return Err((
                            at,
                            format!("not an LDAPMessage or AddRequest (tag 0x{:02x})", tag.0),
                        ));
                    }
                    let total = header as u64 + length;
                    if total > limits.max_record_bytes as u64 {
                        return Err((
                            at,
                            format!(
                                "a {total}-byte PDU, over the {}-byte limit",
                                limits.max_record_bytes
                            ),
                        ));
                    }
                    // Bounded by the limit, a usize.
                    break total as usize;
                }
                Err(meridian_ber::Error::Incomplete { .. }) => continue,
                Err(e) => return Err((at, format!("not a BER PDU: {e}"))),
            }
        };
        let header = pdu.len();
        pdu.resize(total, 0);
        if let Err(e) = reader.read_exact(pdu.get_mut(header..).unwrap_or_default()) {
            return Err((at, format!("the input ends inside a PDU: {e}")));
        }
        offset += total as u64;
        records.push(Raw::Ber {
            number,
            offset: offset - total as u64,
            pdu,
        });
        if chunk_ready(&records, &reader) && !send(out, name, &mut records) {
            return Ok(());
        }
    }
}

/// Sends the chunk (if any); false if the load has stopped listening.
fn send(out: &SyncSender<Chunk>, name: &Arc<str>, records: &mut Vec<Raw>) -> bool {
    if records.is_empty() {
        return true;
    }
    let records = std::mem::replace(records, Vec::with_capacity(CHUNK));
    out.send(Chunk::Records {
        input: Arc::clone(name),
        records,
    })
    .is_ok()
}
