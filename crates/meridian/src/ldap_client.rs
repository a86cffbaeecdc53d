//! A small LDAP client for the tools that talk to servers as a client
//! does (`migrate --follow`, `verify --against`): one connection, one
//! request at a time or a stream of a search's answers, on the bench's
//! wire (plain or TLS) and our codec.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use meridian_proto::{
    Control, DecodeLimits, DerefAliases, Filter, LdapMessage, ProtocolOp, ResultCode, Scope,
    SearchRequest, Seq,
};
use tokio::io::AsyncWriteExt;

/// The largest answer taken: an entry with large values, or a Sync Info
/// message with a thousand UUIDs.
const MAX_PDU: usize = 64 << 20;

/// Where a tool connects, and as whom.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) url: String,
    pub(crate) bind_dn: String,
    pub(crate) password: String,
    /// For `ldaps://`: the CA that signed the server's certificate.
    pub(crate) tls_ca_file: Option<PathBuf>,
}

/// An entry as a search returned it, owned.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnedEntry {
    pub(crate) dn: String,
    pub(crate) attributes: Vec<(String, Vec<Vec<u8>>)>,
}

impl OwnedEntry {
    /// The entry of a SearchResultEntry.
    pub(crate) fn of(entry: &meridian_proto::message::SearchResultEntry<'_>) -> OwnedEntry {
        OwnedEntry {
            dn: String::from_utf8_lossy(entry.dn).into_owned(),
            attributes: entry
                .attributes
                .iter()
                .map(|a| {
                    (
                        String::from_utf8_lossy(a.ty).into_owned(),
                        a.values.iter().map(<[u8]>::to_vec).collect(),
                    )
                })
                .collect(),
        }
    }

    /// The values of `name` (no options), compared case-insensitively.
    pub(crate) fn values(&self, name: &str) -> Option<&[Vec<u8>]> {
        self.attributes
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The values of `name` as text (none: empty).
    pub(crate) fn texts(&self, name: &str) -> Vec<String> {
        self.values(name)
            .unwrap_or_default()
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }
}

/// One connection, bound.
pub(crate) struct Client {
    conn: meridian_bench::wire::Conn,
    buf: Vec<u8>,
    next_id: i32,
    pub(crate) url: String,
}

impl Client {
    /// Connects to `endpoint` and binds.
    pub(crate) async fn open(endpoint: &Endpoint) -> anyhow::Result<Client> {
        let conn = connect_bound(endpoint, Duration::from_secs(10), MAX_PDU).await?;
        Ok(Client {
            conn,
            buf: Vec::new(),
            next_id: 2,
            url: endpoint.url.clone(),
        })
    }

    /// Sends a request; its message ID.
    pub(crate) async fn send(
        &mut self,
        op: ProtocolOp<'_>,
        controls: &[Control<'_>],
    ) -> anyhow::Result<i32> {
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(2);
        let mut request = Vec::new();
        LdapMessage {
            message_id: id,
            op,
            controls: Seq::from_items(controls),
        }
        .encode(&mut request);
        self.conn.write_all(&request).await?;
        Ok(id)
    }

    /// The next message the server sends, as its PDU.
    pub(crate) async fn next_pdu(&mut self) -> anyhow::Result<Vec<u8>> {
        meridian_bench::wire::read_pdu(&mut self.conn, &mut self.buf, MAX_PDU)
            .await
            .with_context(|| format!("reading from {}", self.url))
    }

    /// Whether a whole message has arrived and waits to be read.
    pub(crate) fn has_buffered_pdu(&self) -> bool {
        meridian_ber::frame::pdu_length(&self.buf, MAX_PDU).is_ok()
    }

    /// Sends every request of `requests` (each an operation and its
    /// controls, encoded by `encode` into one buffer) in one write, then
    /// waits for all their results, in the requests' order: one round
    /// trip for them all, and the server commits them together.
    pub(crate) async fn call_many<T>(
        &mut self,
        requests: &[T],
        encode: impl Fn(&T, i32, &mut Vec<u8>),
    ) -> anyhow::Result<Vec<(ResultCode, String)>> {
        let sent = self.send_many(requests, encode).await?;
        self.results(sent).await
    }

    /// The first half of [`Client::call_many`]: the requests sent, their
    /// results not yet read (the server works on them meanwhile).
    pub(crate) async fn send_many<T>(
        &mut self,
        requests: &[T],
        encode: impl Fn(&T, i32, &mut Vec<u8>),
    ) -> anyhow::Result<Sent> {
        let mut buf = Vec::new();
        let first = self.next_id;
        for (i, request) in requests.iter().enumerate() {
            let id = first.saturating_add(i32::try_from(i).unwrap_or(i32::MAX));
            encode(request, id, &mut buf);
        }
        self.next_id = first.saturating_add(i32::try_from(requests.len()).unwrap_or(0));
        self.conn.write_all(&buf).await?;
        Ok(Sent {
            first,
            count: requests.len(),
        })
    }

    /// The second half: the results of requests [`Client::send_many`]
    /// sent, in their order.
    pub(crate) async fn results(
        &mut self,
        sent: Sent,
    ) -> anyhow::Result<Vec<(ResultCode, String)>> {
        let Sent { first, count } = sent;
        let mut results: Vec<Option<(ResultCode, String)>> = vec![None; count];
        let mut answered = 0;
        while answered < count {
            let pdu = self.next_pdu().await?;
            let message = decode(&pdu)?;
            let Some(at) = message
                .message_id
                .checked_sub(first)
                .and_then(|at| usize::try_from(at).ok())
            else {
                continue;
            };
            if let (Some(slot), Some(result)) = (results.get_mut(at), final_result(&message.op))
                && slot.is_none()
            {
                *slot = Some(result);
                answered += 1;
            }
        }
        Ok(results.into_iter().flatten().collect())
    }

    /// Sends a request and waits for its result: the code and message.
    pub(crate) async fn call(
        &mut self,
        op: ProtocolOp<'_>,
        controls: &[Control<'_>],
    ) -> anyhow::Result<(ResultCode, String)> {
        let id = self.send(op, controls).await?;
        loop {
            let pdu = self.next_pdu().await?;
            let message = decode(&pdu)?;
            if message.message_id != id {
                continue;
            }
            if let Some(result) = final_result(&message.op) {
                return Ok(result);
            }
        }
    }

    /// Runs a search, calling `each` with every entry; the search's
    /// result is an error unless it succeeded.
    pub(crate) async fn search_each(
        &mut self,
        base: &str,
        scope: Scope,
        filter: Filter<'_>,
        attributes: &[&[u8]],
        each: impl FnMut(OwnedEntry) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.search_each_of(search(base, scope, filter, attributes), each)
            .await
    }

    /// [`Client::search_each`] of a request built by the caller (a size
    /// limit, a time limit).
    pub(crate) async fn search_each_of(
        &mut self,
        request: ProtocolOp<'_>,
        mut each: impl FnMut(OwnedEntry) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        // Borrowed from the request's own data: named only if it fails.
        let base: &[u8] = match &request {
            ProtocolOp::SearchRequest(r) => r.base,
            _ => b"",
        };
        let id = self.send(request, &[]).await?;
        loop {
            let pdu = self.next_pdu().await?;
            let message = decode(&pdu)?;
            if message.message_id != id {
                continue;
            }
            match &message.op {
                ProtocolOp::SearchResultEntry(entry) => each(OwnedEntry::of(entry))?,
                ProtocolOp::SearchResultDone(done) => {
                    if done.code == ResultCode::SUCCESS {
                        return Ok(());
                    }
                    return Err(anyhow::Error::new(Refused {
                        code: done.code,
                        message: String::from_utf8_lossy(done.message).into_owned(),
                    })
                    .context(format!(
                        "{}: searching {:?}",
                        self.url,
                        String::from_utf8_lossy(base)
                    )));
                }
                _ => {}
            }
        }
    }

    /// The entry at `dn` with `attributes`, if the bound identity may see it.
    pub(crate) async fn read_entry(
        &mut self,
        dn: &str,
        attributes: &[&[u8]],
    ) -> anyhow::Result<Option<OwnedEntry>> {
        let mut found = self
            .search_all(dn, Scope::Base, Filter::Present(b"objectClass"), attributes)
            .await?;
        Ok(found.pop())
    }

    /// The entries a search finds.
    pub(crate) async fn search_all(
        &mut self,
        base: &str,
        scope: Scope,
        filter: Filter<'_>,
        attributes: &[&[u8]],
    ) -> anyhow::Result<Vec<OwnedEntry>> {
        let mut found = Vec::new();
        self.search_each(base, scope, filter, attributes, |entry| {
            found.push(entry);
            Ok(())
        })
        .await?;
        Ok(found)
    }
}

/// Requests sent by [`Client::send_many`] whose results are still to be
/// read.
#[derive(Debug)]
#[must_use]
pub(crate) struct Sent {
    first: i32,
    count: usize,
}

/// A connection to `endpoint` (for `ldaps://`, its server certificate
/// checked against the CA file), bound, all within `timeout`.
pub(crate) async fn connect_bound(
    endpoint: &Endpoint,
    timeout: Duration,
    max_pdu: usize,
) -> anyhow::Result<meridian_bench::wire::Conn> {
    let target = meridian_bench::wire::resolve(&endpoint.url)?;
    let tls = if target.tls {
        let Some(ca) = &endpoint.tls_ca_file else {
            bail!("{} is ldaps://: give --tls-ca-file", endpoint.url);
        };
        Some(meridian_bench::tls::Tls::new(
            &target.host,
            Some(ca),
            false,
            None,
        )?)
    } else {
        None
    };
    let mut conn = meridian_bench::wire::connect(target.address, tls.as_ref(), timeout).await?;
    meridian_bench::wire::bind(&mut conn, &endpoint.bind_dn, &endpoint.password, max_pdu)
        .await
        .with_context(|| format!("binding to {}", endpoint.url))?;
    Ok(conn)
}

/// A server's refusal: its result code and message.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) code: ResultCode,
    pub(crate) message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Refused {}

impl Refused {
    /// Whether `error` is a refusal with `code`.
    pub(crate) fn is(error: &anyhow::Error, code: ResultCode) -> bool {
        error
            .downcast_ref::<Refused>()
            .is_some_and(|r| r.code == code)
    }
}

/// A SearchRequest without limits.
pub(crate) fn search<'a>(
    base: &'a str,
    scope: Scope,
    filter: Filter<'a>,
    attributes: &'a [&'a [u8]],
) -> ProtocolOp<'a> {
    ProtocolOp::SearchRequest(SearchRequest {
        base: base.as_bytes(),
        scope,
        deref: DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter,
        attributes: Seq::from_items(attributes),
    })
}

/// Decodes a PDU the server sent.
pub(crate) fn decode(pdu: &[u8]) -> anyhow::Result<LdapMessage<'_>> {
    let limits = DecodeLimits {
        max_pdu_bytes: MAX_PDU,
        ..DecodeLimits::default()
    };
    LdapMessage::decode(pdu, &limits).map_err(|e| anyhow!("a malformed answer: {e}"))
}

/// The result code and message of a final response.
fn final_result(op: &ProtocolOp<'_>) -> Option<(ResultCode, String)> {
    let result = match op {
        ProtocolOp::AddResponse(r)
        | ProtocolOp::DelResponse(r)
        | ProtocolOp::ModifyResponse(r)
        | ProtocolOp::ModifyDnResponse(r)
        | ProtocolOp::SearchResultDone(r)
        | ProtocolOp::CompareResponse(r) => r,
        ProtocolOp::ExtendedResponse(r) => &r.result,
        _ => return None,
    };
    Some((
        result.code,
        String::from_utf8_lossy(result.message).into_owned(),
    ))
}

/// A password from a file (its first line), as OpenLDAP's `-y` reads it.
pub(crate) fn password_from(path: &std::path::Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}
