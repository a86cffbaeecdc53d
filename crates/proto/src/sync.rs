//! The values of the change-following controls: LDAP Content
//! Synchronization (RFC 4533: the Sync Request, Sync State and Sync Done
//! controls and the Sync Info intermediate response) and persistent
//! search (draft-ietf-ldapext-psearch-03: the Persistent Search request
//! control and the Entry Change Notification). RFC 4533's module is
//! IMPLICIT TAGS; values equal to a DEFAULT are left out when encoding.

use meridian_ber::{Error, Reader, Result, Tag, Writer};

use crate::controls::sequence_reader;

/// OIDs of the controls and the intermediate response.
pub mod oid {
    /// Sync Request control (RFC 4533 section 2.2).
    pub const SYNC_REQUEST: &[u8] = b"1.3.6.1.4.1.4203.1.9.1.1";
    /// Sync State control (RFC 4533 section 2.3).
    pub const SYNC_STATE: &[u8] = b"1.3.6.1.4.1.4203.1.9.1.2";
    /// Sync Done control (RFC 4533 section 2.4).
    pub const SYNC_DONE: &[u8] = b"1.3.6.1.4.1.4203.1.9.1.3";
    /// Sync Info message, an IntermediateResponse (RFC 4533 section 2.5).
    pub const SYNC_INFO: &[u8] = b"1.3.6.1.4.1.4203.1.9.1.4";
    /// Persistent Search request control.
    pub const PERSISTENT_SEARCH: &[u8] = b"2.16.840.1.113730.3.4.3";
    /// Entry Change Notification response control.
    pub const ENTRY_CHANGE: &[u8] = b"2.16.840.1.113730.3.4.7";
}

/// The Sync Request's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// refreshOnly (1): the content, then SearchResultDone.
    RefreshOnly,
    /// refreshAndPersist (3): the content, then its changes as they
    /// happen, until the client abandons the search.
    RefreshAndPersist,
}

/// The Sync Request control's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncRequest<'a> {
    /// The mode.
    pub mode: SyncMode,
    /// The cookie of an earlier session, to resume from.
    pub cookie: Option<&'a [u8]>,
    /// reloadHint: the client would rather have the content again than
    /// an e-syncRefreshRequired.
    pub reload_hint: bool,
}

impl<'a> SyncRequest<'a> {
    /// Decodes the control's value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "the sync request value must be a SEQUENCE")?;
        let mode = match r.integer(Tag::ENUMERATED, "expected the sync request's mode")? {
            1 => SyncMode::RefreshOnly,
            3 => SyncMode::RefreshAndPersist,
            _ => {
                return Err(Error::Malformed(
                    "the sync mode must be refreshOnly or refreshAndPersist",
                ));
            }
        };
        let cookie = r.optional(Tag::OCTET_STRING)?;
        let reload_hint = match r.optional(Tag::BOOLEAN)? {
            Some(b) => meridian_ber::decode_boolean(b)?,
            None => false,
        };
        r.finish("trailing bytes in the sync request value")?;
        Ok(SyncRequest {
            mode,
            cookie,
            reload_hint,
        })
    }

    /// Encodes the control's value (a client's).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        let mode = match self.mode {
            SyncMode::RefreshOnly => 1,
            SyncMode::RefreshAndPersist => 3,
        };
        w.integer(Tag::ENUMERATED, mode);
        if let Some(cookie) = self.cookie {
            w.octets(Tag::OCTET_STRING, cookie);
        }
        if self.reload_hint {
            w.boolean(Tag::BOOLEAN, true);
        }
        w.end(m);
    }
}

/// The state a Sync State control gives an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncState {
    /// present (0): unchanged since the client's cookie.
    Present = 0,
    /// add (1).
    Add = 1,
    /// modify (2).
    Modify = 2,
    /// delete (3).
    Delete = 3,
}

/// Encodes a Sync State control's value: the state, the entry's UUID
/// (16 octets), and a cookie when the message moves the client's on.
pub fn encode_sync_state(buf: &mut Vec<u8>, state: SyncState, uuid: &[u8], cookie: Option<&[u8]>) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::ENUMERATED, state as i64);
    w.octets(Tag::OCTET_STRING, uuid);
    if let Some(cookie) = cookie {
        w.octets(Tag::OCTET_STRING, cookie);
    }
    w.end(m);
}

/// A Sync State control's value, decoded (a consumer's view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncStateValue<'a> {
    /// The entry's state.
    pub state: SyncState,
    /// Its UUID (16 octets).
    pub uuid: &'a [u8],
    /// The cookie, when the message moves the consumer's on.
    pub cookie: Option<&'a [u8]>,
}

impl<'a> SyncStateValue<'a> {
    /// Decodes the control's value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "the sync state value must be a SEQUENCE")?;
        let state = match r.integer(Tag::ENUMERATED, "expected the sync state")? {
            0 => SyncState::Present,
            1 => SyncState::Add,
            2 => SyncState::Modify,
            3 => SyncState::Delete,
            _ => return Err(Error::Malformed("unknown sync state")),
        };
        let uuid = r.expect(Tag::OCTET_STRING, "expected the entry's UUID")?;
        let cookie = r.optional(Tag::OCTET_STRING)?;
        r.finish("trailing bytes in the sync state value")?;
        Ok(SyncStateValue {
            state,
            uuid,
            cookie,
        })
    }
}

/// Decodes a Sync Done control's value: the cookie and refreshDeletes.
pub fn decode_sync_done(value: Option<&[u8]>) -> Result<(Option<&[u8]>, bool)> {
    let mut r = sequence_reader(value, "the sync done value must be a SEQUENCE")?;
    let cookie = r.optional(Tag::OCTET_STRING)?;
    let refresh_deletes = match r.optional(Tag::BOOLEAN)? {
        Some(b) => meridian_ber::decode_boolean(b)?,
        None => false,
    };
    r.finish("trailing bytes in the sync done value")?;
    Ok((cookie, refresh_deletes))
}

/// Encodes a Sync Done control's value.
pub fn encode_sync_done(buf: &mut Vec<u8>, cookie: Option<&[u8]>, refresh_deletes: bool) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    if let Some(cookie) = cookie {
        w.octets(Tag::OCTET_STRING, cookie);
    }
    if refresh_deletes {
        w.boolean(Tag::BOOLEAN, true);
    }
    w.end(m);
}

/// A Sync Info message's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncInfo<'a> {
    /// newcookie [0].
    NewCookie(&'a [u8]),
    /// refreshDelete [1]: the refresh's delete phase ends (or the whole
    /// refresh, with `done`).
    RefreshDelete {
        /// The cookie.
        cookie: Option<&'a [u8]>,
        /// refreshDone.
        done: bool,
    },
    /// refreshPresent [2]: the present phase ends.
    RefreshPresent {
        /// The cookie.
        cookie: Option<&'a [u8]>,
        /// refreshDone.
        done: bool,
    },
    /// syncIdSet [3]: entries, by UUID, deleted (`refresh_deletes`) or
    /// present.
    IdSet {
        /// The cookie.
        cookie: Option<&'a [u8]>,
        /// refreshDeletes.
        refresh_deletes: bool,
        /// The 16-octet UUIDs.
        uuids: Vec<&'a [u8]>,
    },
}

impl<'a> SyncInfo<'a> {
    /// Encodes the value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        match self {
            SyncInfo::NewCookie(cookie) => w.octets(Tag::context(0, false), cookie),
            SyncInfo::RefreshDelete { cookie, done }
            | SyncInfo::RefreshPresent { cookie, done } => {
                let number = if matches!(self, SyncInfo::RefreshDelete { .. }) {
                    1
                } else {
                    2
                };
                let m = w.start(Tag::context(number, true));
                if let Some(cookie) = cookie {
                    w.octets(Tag::OCTET_STRING, cookie);
                }
                if !done {
                    w.boolean(Tag::BOOLEAN, false);
                }
                w.end(m);
            }
            SyncInfo::IdSet {
                cookie,
                refresh_deletes,
                uuids,
            } => {
                let m = w.start(Tag::context(3, true));
                if let Some(cookie) = cookie {
                    w.octets(Tag::OCTET_STRING, cookie);
                }
                if *refresh_deletes {
                    w.boolean(Tag::BOOLEAN, true);
                }
                let set = w.start(Tag::SET);
                for uuid in uuids {
                    w.octets(Tag::OCTET_STRING, uuid);
                }
                w.end(set);
                w.end(m);
            }
        }
    }

    /// Decodes the value (a client's view; the tests read what we send).
    pub fn decode(value: &'a [u8]) -> Result<Self> {
        let mut outer = Reader::new(value);
        let tlv = outer.read()?;
        outer.finish("trailing bytes in the sync info value")?;
        let mut r = Reader::new(tlv.contents);
        let cookie = |r: &mut Reader<'a>| r.optional(Tag::OCTET_STRING);
        let flag = |r: &mut Reader<'a>, default: bool| -> Result<bool> {
            Ok(match r.optional(Tag::BOOLEAN)? {
                Some(b) => meridian_ber::decode_boolean(b)?,
                None => default,
            })
        };
        let info = match tlv.tag {
            t if t == Tag::context(0, false) => return Ok(SyncInfo::NewCookie(tlv.contents)),
            t if t == Tag::context(1, true) => SyncInfo::RefreshDelete {
                cookie: cookie(&mut r)?,
                done: flag(&mut r, true)?,
            },
            t if t == Tag::context(2, true) => SyncInfo::RefreshPresent {
                cookie: cookie(&mut r)?,
                done: flag(&mut r, true)?,
            },
            t if t == Tag::context(3, true) => {
                let cookie = cookie(&mut r)?;
                let refresh_deletes = flag(&mut r, false)?;
                let mut set = Reader::new(r.expect(Tag::SET, "expected syncUUIDs")?);
                let mut uuids = Vec::new();
                while !set.is_empty() {
                    uuids.push(set.expect(Tag::OCTET_STRING, "expected a syncUUID")?);
                }
                SyncInfo::IdSet {
                    cookie,
                    refresh_deletes,
                    uuids,
                }
            }
            _ => return Err(Error::Malformed("unknown sync info choice")),
        };
        r.finish("trailing bytes in the sync info value")?;
        Ok(info)
    }
}

/// Change types of persistent search, as the bits of `changeTypes` and
/// the values of the Entry Change Notification's `changeType`.
pub mod change_type {
    /// An entry added.
    pub const ADD: u8 = 1;
    /// An entry deleted.
    pub const DELETE: u8 = 2;
    /// An entry modified.
    pub const MODIFY: u8 = 4;
    /// An entry renamed or moved.
    pub const MOD_DN: u8 = 8;
    /// Every type.
    pub const ALL: u8 = ADD | DELETE | MODIFY | MOD_DN;
}

/// The Persistent Search control's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistentSearch {
    /// The changes wanted, a mask of [`change_type`] bits.
    pub change_types: u8,
    /// Only changes: the entries as they are now are not sent first.
    pub changes_only: bool,
    /// Each change carries an Entry Change Notification control.
    pub return_ecs: bool,
}

impl PersistentSearch {
    /// Decodes the control's value.
    pub fn decode(value: Option<&[u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "the persistent search value must be a SEQUENCE")?;
        let types = r.integer(Tag::INTEGER, "expected changeTypes")?;
        if !(1..=i64::from(change_type::ALL)).contains(&types) {
            return Err(Error::Malformed(
                "changeTypes must name at least one of add (1), delete (2), modify (4), modDN (8)",
            ));
        }
        let changes_only = r.boolean(Tag::BOOLEAN, "expected changesOnly")?;
        let return_ecs = r.boolean(Tag::BOOLEAN, "expected returnECs")?;
        r.finish("trailing bytes in the persistent search value")?;
        Ok(PersistentSearch {
            change_types: types as u8,
            changes_only,
            return_ecs,
        })
    }

    /// Encodes the control's value (a client's).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(self.change_types));
        w.boolean(Tag::BOOLEAN, self.changes_only);
        w.boolean(Tag::BOOLEAN, self.return_ecs);
        w.end(m);
    }
}

/// Encodes an Entry Change Notification's value: the change's type, and
/// for a rename the entry's DN before it.
pub fn encode_entry_change(buf: &mut Vec<u8>, change: u8, previous_dn: Option<&[u8]>) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::ENUMERATED, i64::from(change));
    if let Some(dn) = previous_dn {
        w.octets(Tag::OCTET_STRING, dn);
    }
    w.end(m);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_sync_request_round_trips() {
        for request in [
            SyncRequest {
                mode: SyncMode::RefreshOnly,
                cookie: None,
                reload_hint: false,
            },
            SyncRequest {
                mode: SyncMode::RefreshAndPersist,
                cookie: Some(b"rid=001,csn=20261129000000.000000Z#000000#000#000000"),
                reload_hint: true,
            },
        ] {
            let mut buf = Vec::new();
            request.encode(&mut buf);
            assert_eq!(SyncRequest::decode(Some(&buf)).unwrap(), request);
        }
    }

    #[test]
    fn sync_state_and_done_values_round_trip() {
        let uuid = [9u8; 16];
        let mut buf = Vec::new();
        encode_sync_state(&mut buf, SyncState::Modify, &uuid, Some(b"rid=001"));
        let value = SyncStateValue::decode(Some(&buf)).unwrap();
        assert_eq!(value.state, SyncState::Modify);
        assert_eq!(value.uuid, uuid);
        assert_eq!(value.cookie, Some(b"rid=001".as_slice()));
        let mut buf = Vec::new();
        encode_sync_done(&mut buf, Some(b"c"), true);
        assert_eq!(
            decode_sync_done(Some(&buf)).unwrap(),
            (Some(b"c".as_slice()), true)
        );
    }

    #[test]
    fn a_sync_request_with_another_mode_is_malformed() {
        // SEQUENCE { ENUMERATED 2 }
        assert!(SyncRequest::decode(Some(&[0x30, 0x03, 0x0a, 0x01, 0x02])).is_err());
        assert!(SyncRequest::decode(None).is_err());
    }

    #[test]
    fn sync_info_messages_round_trip() {
        let uuid = [7u8; 16];
        for info in [
            SyncInfo::NewCookie(b"rid=001"),
            SyncInfo::RefreshDelete {
                cookie: Some(b"c"),
                done: true,
            },
            SyncInfo::RefreshPresent {
                cookie: None,
                done: false,
            },
            SyncInfo::IdSet {
                cookie: None,
                refresh_deletes: true,
                uuids: vec![&uuid, &uuid],
            },
        ] {
            let mut buf = Vec::new();
            info.encode(&mut buf);
            assert_eq!(SyncInfo::decode(&buf).unwrap(), info);
        }
    }

    #[test]
    fn a_persistent_search_round_trips_and_needs_a_change_type() {
        let request = PersistentSearch {
            change_types: change_type::ADD | change_type::MOD_DN,
            changes_only: true,
            return_ecs: false,
        };
        let mut buf = Vec::new();
        request.encode(&mut buf);
        assert_eq!(PersistentSearch::decode(Some(&buf)).unwrap(), request);
        let none = PersistentSearch {
            change_types: 0,
            ..request
        };
        let mut buf = Vec::new();
        none.encode(&mut buf);
        assert!(PersistentSearch::decode(Some(&buf)).is_err());
    }
}
