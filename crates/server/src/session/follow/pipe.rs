//! What a follower sends through: its final results, Sync Info messages,
//! and its searches run step by step with their entries relabelled.

use std::sync::Arc;

use meridian_directory::follow::{self, Asked, Found, Label};
use meridian_directory::{Directory, Identity, Outcome, SearchCursor, SearchDone, Step};
use meridian_proto::message::IntermediateResponse;
use meridian_proto::sync::{SyncInfo, oid as sync_oid};
use meridian_proto::{Control, LdapMessage, ProtocolOp, ResultCode, Seq};

use crate::inflight::{InFlight, Stop};
use crate::outbound::{Outbound, ResponseBatch};
use crate::session::reply::ldap_result;
use crate::session::search::{OwnedSearch, SEARCH_ROOM_BYTES, SEARCH_STEP_BYTES};

/// Why a following search stopped before its end.
pub(super) enum Stopped {
    /// Abandoned, or the connection is gone: nothing more is sent.
    Silently,
    /// It ended with this SearchResultDone, sent.
    Done(SearchDone),
}

/// What a follower sends through, and how it runs a search.
pub(super) struct Pipe {
    pub(super) directory: Arc<Directory>,
    pub(super) identity: Identity,
    pub(super) outbound: Arc<Outbound>,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) id: i32,
}

impl Pipe {
    /// Sends a SearchResultDone with `control`, which ends the operation.
    pub(super) fn done(
        &self,
        outcome: Outcome,
        control: Option<Control<'_>>,
        entries: u64,
    ) -> SearchDone {
        let mut batch = ResponseBatch::default();
        let urls: Vec<&[u8]> = Vec::new();
        let controls: Vec<Control<'_>> = control.into_iter().collect();
        LdapMessage {
            message_id: self.id,
            op: ProtocolOp::SearchResultDone(ldap_result(&outcome, &urls)),
            controls: Seq::from_items(&controls),
        }
        .encode(&mut batch.bytes);
        batch.completed = 1;
        self.outbound.push(&mut batch);
        let mut done = SearchDone::new(outcome);
        done.entries = entries;
        done
    }

    pub(super) fn fail(
        &self,
        code: ResultCode,
        message: impl Into<String>,
        entries: u64,
    ) -> Stopped {
        Stopped::Done(self.done(Outcome::new(code, message), None, entries))
    }

    /// Waits for room in the outbound buffer, honouring Abandon and
    /// Cancel.
    pub(super) async fn ready(&self, entries: u64) -> Result<(), Stopped> {
        if !self.outbound.wait_room(SEARCH_ROOM_BYTES).await {
            return Err(Stopped::Silently);
        }
        match self.in_flight.stop_requested() {
            None => Ok(()),
            Some(stop) => Err(self.stopped(stop, entries)),
        }
    }

    pub(super) fn stopped(&self, stop: Stop, entries: u64) -> Stopped {
        match stop {
            Stop::Abandon => {
                // No response; the operation's permit comes back.
                let mut batch = ResponseBatch {
                    completed: 1,
                    ..ResponseBatch::default()
                };
                self.outbound.push(&mut batch);
                Stopped::Silently
            }
            Stop::Cancel => self.fail(
                ResultCode::CANCELED,
                "canceled by the client's Cancel request (RFC 3909)",
                entries,
            ),
        }
    }

    /// Runs `request` to its end, each step's entries relabelled by
    /// `decide` and sent; returns its result, not sent.
    pub(super) async fn search(
        &self,
        request: &OwnedSearch,
        asked: Asked,
        entries: &mut u64,
        mut decide: impl FnMut(&Found<'_>) -> Option<Label>,
    ) -> Result<SearchDone, Stopped> {
        let Some(base) = request
            .with(|req, _| self.directory.parse_dn(req.base).ok())
            .flatten()
        else {
            return Err(self.fail(
                ResultCode::INVALID_DN_SYNTAX,
                "the base DN does not parse",
                0,
            ));
        };
        let mut cursor = SearchCursor::with_base(base);
        let mut scratch = Vec::new();
        loop {
            self.ready(*entries).await?;
            scratch.clear();
            let step = request.with(|req, controls| {
                self.directory.search_step(
                    &self.identity,
                    req,
                    self.id,
                    &mut scratch,
                    controls,
                    &mut cursor,
                    SEARCH_STEP_BYTES,
                )
            });
            let mut batch = ResponseBatch::default();
            *entries += follow::relabel(&scratch, &mut batch.bytes, asked, &mut decide) as u64;
            self.outbound.push(&mut batch);
            match step {
                Some(Step::More) => tokio::task::yield_now().await,
                Some(Step::Done(done)) => return Ok(done),
                None => return Err(self.fail(ResultCode::OTHER, "search state lost", *entries)),
            }
        }
    }

    /// Sends a Sync Info message.
    pub(super) fn sync_info(&self, info: &SyncInfo<'_>) {
        let mut value = Vec::new();
        info.encode(&mut value);
        let mut batch = ResponseBatch::default();
        LdapMessage {
            message_id: self.id,
            op: ProtocolOp::IntermediateResponse(IntermediateResponse {
                name: Some(sync_oid::SYNC_INFO),
                value: Some(&value),
            }),
            controls: Seq::empty(),
        }
        .encode(&mut batch.bytes);
        self.outbound.push(&mut batch);
    }
}
