//! Searches: the first step on the reader, the rest as a streamed
//! search on its own task that waits for the client and yields between
//! steps; the paged results control.

use std::sync::Arc;
use std::time::Instant;

use meridian_directory::{
    ControlValue, Directory, Identity, Outcome, PageRequest, SearchControls, SearchCursor,
    SearchDone, Step,
};
use meridian_proto::controls::{PagedResults, oid as control_oid};
use meridian_proto::{Control, LdapMessage, ProtocolOp, ResultCode, Scope, SearchRequest};

use super::controls::RequestControls;
use super::reply::{Reply, ldap_result, log_search, referral_urls};
use super::{Action, Session};
use crate::inflight::{InFlight, Kind, Stop};
use crate::outbound::{Outbound, ResponseBatch};
use crate::{ServerContext, monitor};

impl Session {
    pub(super) fn search_request(
        &mut self,
        search: &SearchRequest<'_>,
        controls: &RequestControls<'_>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let ctx = reply.ctx;
        // Parsed once, by the directory's parser (which reuses the parent
        // of the DN it parsed last), and handed to the search's first step.
        let base = match ctx.directory.parse_dn(search.base) {
            Ok(dn) => dn,
            Err(e) => return reply.result(search.base, e.code, e.message.as_bytes()),
        };
        if monitor::holds(&base, ctx.monitor_root.as_ref()) {
            let (code, message) = monitor::search(
                &ctx.directory,
                &self.identity,
                search,
                &base,
                ctx.monitor_root.as_ref(),
                reply.id,
                &mut reply.batch.bytes,
            );
            return reply.result(search.base, code, message.as_bytes());
        }
        if controls.sync.is_some() || controls.persistent.is_some() {
            return self.follow_search(search, base, controls, reply, out);
        }
        let matched_values = controls.matched_values;
        // The root DSE and the subschema entry: a list of one, which the
        // sort and VLV controls leave as it is (as slapd, whose sssvlv
        // overlay serves databases only); matched values apply (a client
        // asks cn=Subschema for one attribute type's definition so).
        if let (Scope::Base, Some(entry)) = (search.scope, ctx.published.lookup(&base, &ctx.schema))
        {
            let depth = meridian_proto::Depth::new(ctx.limits.max_depth);
            let values = matched_values
                .and_then(|value| {
                    meridian_proto::controls::decode_values_return_filter(Some(value), depth).ok()
                })
                .map(|items| meridian_model::filter::ValuesFilter::compile(&items, &ctx.schema));
            ctx.published.search(
                &entry,
                search,
                &ctx.schema,
                values.as_ref(),
                reply.id,
                &mut reply.batch.bytes,
            );
            return reply.result(b"", ResultCode::SUCCESS, b"");
        }
        let controls = SearchControls {
            sort: controls.sort,
            vlv: controls.vlv,
            page: controls.page,
            manage_dsa_it: controls.manage_dsa_it,
            matched_values,
        };
        // `cluster.reads`: a read that must wait runs on its own task.
        let wait = match before_read(ctx) {
            Ok(wait) => wait,
            Err(answer) => {
                return reply.result(search.base, answer.code, answer.message.as_bytes());
            }
        };
        if let Some(wait) = wait {
            let stream = StreamedSearch {
                request: OwnedSearch::new(search, controls),
                identity: self.identity.clone(),
                directory: Arc::clone(&ctx.directory),
                outbound: Arc::clone(out),
                cursor: SearchCursor::with_base(base),
                id: reply.id,
                in_flight: self.running.start(reply.id, Kind::Search),
                access_log: ctx.access_log,
                conn: self.conn_id,
                started: reply.started,
                wait: Some(wait),
            };
            tokio::spawn(stream.run());
            return Action::Spawned;
        }
        // The first step runs here; a result larger than one step's budget
        // continues on a task that waits for the client to read. The batch
        // may already hold the answers of earlier requests of this pass:
        // the step's budget does not count them (the reader bounds the
        // batch itself).
        let mut cursor = SearchCursor::with_base(base);
        let step = ctx.directory.search_step(
            &self.identity,
            search,
            reply.id,
            &mut reply.batch.bytes,
            controls,
            &mut cursor,
            SEARCH_STEP_BYTES,
        );
        match step {
            Step::Done(done) => reply.search_done(search, &done),
            Step::More => {
                let stream = StreamedSearch {
                    request: OwnedSearch::new(search, controls),
                    identity: self.identity.clone(),
                    directory: Arc::clone(&ctx.directory),
                    outbound: Arc::clone(out),
                    cursor,
                    id: reply.id,
                    in_flight: self.running.start(reply.id, Kind::Search),
                    access_log: ctx.access_log,
                    conn: self.conn_id,
                    started: reply.started,
                    wait: None,
                };
                tokio::spawn(stream.run());
                Action::Spawned
            }
        }
    }
}

/// Bytes of entries one search step produces before yielding; and the
/// most bytes a streaming search lets wait in the outbound buffer.
pub(super) const SEARCH_STEP_BYTES: usize = 256 * 1024;
pub(super) const SEARCH_ROOM_BYTES: usize = 1024 * 1024;

/// A search request copied out of the read buffer, for a search that
/// outlives one pass of the connection's reader.
pub(super) struct OwnedSearch {
    pub(super) base: Vec<u8>,
    pub(super) scope: Scope,
    pub(super) deref: meridian_proto::DerefAliases,
    pub(super) size_limit: i32,
    pub(super) time_limit: i32,
    pub(super) types_only: bool,
    pub(super) filter: Vec<u8>,
    pub(super) attributes: Vec<Vec<u8>>,
    pub(super) page: Option<(i32, Vec<u8>)>,
    pub(super) manage_dsa_it: bool,
    pub(super) matched_values: Option<Vec<u8>>,
    pub(super) sort: Option<OwnedControl>,
    pub(super) vlv: Option<OwnedControl>,
}

/// A request control copied out of the read buffer.
pub(super) struct OwnedControl {
    critical: bool,
    value: Option<Vec<u8>>,
}

impl OwnedControl {
    fn new(control: ControlValue<'_>) -> Self {
        OwnedControl {
            critical: control.critical,
            value: control.value.map(<[u8]>::to_vec),
        }
    }

    fn borrow(&self) -> ControlValue<'_> {
        ControlValue {
            critical: self.critical,
            value: self.value.as_deref(),
        }
    }
}

impl OwnedSearch {
    pub(super) fn new(req: &SearchRequest<'_>, controls: SearchControls<'_>) -> Self {
        let mut filter = Vec::new();
        req.filter.to_ber(&mut filter);
        OwnedSearch {
            base: req.base.to_vec(),
            scope: req.scope,
            deref: req.deref,
            size_limit: req.size_limit,
            time_limit: req.time_limit,
            types_only: req.types_only,
            filter,
            attributes: req.attributes.iter().map(<[u8]>::to_vec).collect(),
            page: controls.page.map(|p| (p.size, p.cookie.to_vec())),
            manage_dsa_it: controls.manage_dsa_it,
            matched_values: controls.matched_values.map(<[u8]>::to_vec),
            sort: controls.sort.map(OwnedControl::new),
            vlv: controls.vlv.map(OwnedControl::new),
        }
    }

    /// Calls `f` with borrowed views of the request.
    pub(super) fn with<R>(
        &self,
        f: impl FnOnce(&SearchRequest<'_>, SearchControls<'_>) -> R,
    ) -> Option<R> {
        // Validated when the request was decoded; the depth bound only
        // guards against a bug here.
        let filter =
            meridian_proto::Filter::from_ber(&self.filter, meridian_proto::Depth::new(1024))
                .ok()?;
        let attributes: Vec<&[u8]> = self.attributes.iter().map(Vec::as_slice).collect();
        let req = SearchRequest {
            base: &self.base,
            scope: self.scope,
            deref: self.deref,
            size_limit: self.size_limit,
            time_limit: self.time_limit,
            types_only: self.types_only,
            filter,
            attributes: meridian_proto::Seq::from_items(&attributes),
        };
        let page = self.page.as_ref().map(|(size, cookie)| PageRequest {
            size: *size,
            cookie,
        });
        Some(f(
            &req,
            SearchControls {
                page,
                manage_dsa_it: self.manage_dsa_it,
                matched_values: self.matched_values.as_deref(),
                sort: self.sort.as_ref().map(OwnedControl::borrow),
                vlv: self.vlv.as_ref().map(OwnedControl::borrow),
            },
        ))
    }
}

/// The rest of a large search, on its own task.
pub(super) struct StreamedSearch {
    pub(super) request: OwnedSearch,
    pub(super) identity: Identity,
    pub(super) directory: Arc<Directory>,
    pub(super) outbound: Arc<Outbound>,
    pub(super) cursor: SearchCursor,
    pub(super) id: i32,
    /// Marked finished when the search ends; Abandon and Cancel stop it.
    pub(super) in_flight: Arc<InFlight>,
    pub(super) access_log: bool,
    pub(super) conn: u64,
    pub(super) started: Instant,
    /// What `cluster.reads` has the search wait for before its first step.
    pub(super) wait: Option<crate::ReadWait>,
}

impl StreamedSearch {
    pub(super) async fn run(mut self) {
        let in_flight = Arc::clone(&self.in_flight);
        let (access_log, conn, id, started) = (self.access_log, self.conn, self.id, self.started);
        let done = self.steps().await;
        in_flight.finish();
        self.request.with(|search, _| {
            log_search(access_log, conn, id, search, done.as_ref(), started);
        });
    }

    /// Runs the search to its end: its SearchResultDone, `None` if it
    /// sent none (abandoned, or the connection closed).
    pub(super) async fn steps(&mut self) -> Option<SearchDone> {
        if let Some(wait) = self.wait.take()
            && let Err(answer) = wait.await
        {
            let done = SearchDone::new(Outcome::new(answer.code, answer.message));
            let mut batch = ResponseBatch::default();
            encode_search_done(&mut batch.bytes, self.id, &done);
            batch.completed = 1;
            self.outbound.push(&mut batch);
            return Some(done);
        }
        loop {
            if !self.outbound.wait_room(SEARCH_ROOM_BYTES).await {
                return None;
            }
            match self.in_flight.stop_requested() {
                None => {}
                Some(Stop::Abandon) => {
                    // No response; the operation's permit comes back.
                    let mut batch = ResponseBatch {
                        completed: 1,
                        ..ResponseBatch::default()
                    };
                    self.outbound.push(&mut batch);
                    return None;
                }
                Some(Stop::Cancel) => {
                    let done = SearchDone::new(Outcome::new(
                        ResultCode::CANCELED,
                        "canceled by the client's Cancel request (RFC 3909)",
                    ));
                    let mut batch = ResponseBatch::default();
                    encode_search_done(&mut batch.bytes, self.id, &done);
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(done);
                }
            }
            let mut batch = ResponseBatch::default();
            let step = self.request.with(|req, controls| {
                self.directory.search_step(
                    &self.identity,
                    req,
                    self.id,
                    &mut batch.bytes,
                    controls,
                    &mut self.cursor,
                    SEARCH_STEP_BYTES,
                )
            });
            match step {
                Some(Step::More) => {
                    self.outbound.push(&mut batch);
                    // A step ends after at most a few milliseconds of work;
                    // let the worker serve other connections before the next.
                    tokio::task::yield_now().await;
                }
                Some(Step::Done(done)) => {
                    encode_search_done(&mut batch.bytes, self.id, &done);
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(done);
                }
                None => {
                    let done =
                        SearchDone::new(Outcome::new(ResultCode::OTHER, "search state lost"));
                    encode_search_done(&mut batch.bytes, self.id, &done);
                    batch.completed = 1;
                    self.outbound.push(&mut batch);
                    return Some(done);
                }
            }
        }
    }
}

/// Appends a SearchResultDone with the response controls `done` holds:
/// paged results (RFC 2696), sort (RFC 2891), virtual list view.
pub(super) fn encode_search_done(buf: &mut Vec<u8>, id: i32, done: &SearchDone) {
    use meridian_proto::sorting::{SortResult, VlvResponse};
    let mut page_value = Vec::new();
    if let Some((size, cookie)) = &done.page {
        PagedResults {
            size: *size,
            cookie,
        }
        .encode(&mut page_value);
    }
    let mut sort_value = Vec::new();
    if let Some((code, attr)) = &done.sort {
        SortResult {
            code: *code,
            attr: attr.as_deref(),
        }
        .encode(&mut sort_value);
    }
    let mut vlv_value = Vec::new();
    if let Some(vlv) = &done.vlv {
        VlvResponse {
            target_position: vlv.target_position,
            content_count: vlv.content_count,
            result: vlv.result,
            context: None,
        }
        .encode(&mut vlv_value);
    }
    let mut controls: Vec<Control<'_>> = Vec::new();
    for (present, oid, value) in [
        (done.sort.is_some(), control_oid::SORT_RESPONSE, &sort_value),
        (done.vlv.is_some(), control_oid::VLV_RESPONSE, &vlv_value),
        (done.page.is_some(), control_oid::PAGED_RESULTS, &page_value),
    ] {
        if present {
            controls.push(Control {
                oid,
                critical: false,
                value: Some(value),
            });
        }
    }
    let urls = referral_urls(&done.outcome);
    LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchResultDone(ldap_result(&done.outcome, &urls)),
        controls: meridian_proto::Seq::from_items(&controls),
    }
    .encode(buf);
}

/// What `cluster.reads` asks of a read on this server: nothing (a single
/// server, or `session`), a wait, or a refusal.
pub(super) fn before_read(
    ctx: &ServerContext,
) -> Result<Option<crate::ReadWait>, crate::ClusterAnswer> {
    match &ctx.cluster_hooks {
        Some(hook) => hook.0.before_read(),
        None => Ok(None),
    }
}
