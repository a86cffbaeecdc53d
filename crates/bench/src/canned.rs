//! A server that answers every request with a canned success, doing as
//! little as a server can: it measures the bench client's own ceiling
//! (issue: "the client must never be the bottleneck").
//!
//! One thread per connection reads whatever has arrived, answers every
//! whole request in it (the response type matching the request, the
//! message ID copied) and writes the answers with one syscall. A search
//! gets one small entry and its SearchResultDone, so the client's entry
//! path is exercised too. An UnbindRequest or a malformed PDU closes the
//! connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use meridian_ber::{Reader, Tag, frame};
use meridian_proto::message::{encode_result, tags};
use meridian_proto::{
    LdapMessage, LdapResult, PartialAttribute, ProtocolOp, SearchResultEntry, Seq,
};

/// Largest request the canned server reads.
const MAX_REQUEST: usize = 1 << 20;

/// What the canned server counts.
#[derive(Debug, Default)]
pub struct CannedStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// CPU time its connection threads used, in microseconds (added as
    /// each ends), so a caller in the same process can tell the server's
    /// share of the process's CPU from the client's.
    pub cpu_us: AtomicU64,
}

/// Accepts connections on `listener` until `stop` is set (checked at
/// each accept; the caller wakes it with a last connection).
pub fn serve(listener: &TcpListener, stop: &Arc<AtomicBool>, stats: &Arc<CannedStats>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = stream else { continue };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let stats = Arc::clone(stats);
        let _ = std::thread::Builder::new()
            .name("canned-conn".into())
            .spawn(move || {
                answer(stream);
                let used = crate::procstat::this_thread_cpu_seconds().unwrap_or(0.0);
                stats
                    .cpu_us
                    .fetch_add((used * 1e6) as u64, Ordering::Relaxed);
            });
    }
}

/// The response tag for a request tag, `None` for requests without one.
fn response_tag(request: Tag) -> Option<Tag> {
    Some(match request {
        t if t == tags::BIND_REQUEST => tags::BIND_RESPONSE,
        t if t == tags::SEARCH_REQUEST => tags::SEARCH_RESULT_DONE,
        t if t == tags::MODIFY_REQUEST => tags::MODIFY_RESPONSE,
        t if t == tags::ADD_REQUEST => tags::ADD_RESPONSE,
        t if t == tags::DEL_REQUEST => tags::DEL_RESPONSE,
        t if t == tags::MODIFY_DN_REQUEST => tags::MODIFY_DN_RESPONSE,
        t if t == tags::COMPARE_REQUEST => tags::COMPARE_RESPONSE,
        t if t == tags::EXTENDED_REQUEST => tags::EXTENDED_RESPONSE,
        _ => return None,
    })
}

fn answer(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut input = vec![0u8; 256 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    let mut output = Vec::with_capacity(256 * 1024);
    let entry_values: [&[u8]; 1] = [b"canned"];
    let entry_attributes = [PartialAttribute {
        ty: b"cn",
        values: Seq::from_items(&entry_values),
    }];
    loop {
        let Ok(n) = stream.read(input.get_mut(end..).unwrap_or(&mut [])) else {
            return;
        };
        if n == 0 {
            return;
        }
        end += n;
        loop {
            let window = input.get(start..end).unwrap_or(&[]);
            let len = match frame::pdu_length(window, MAX_REQUEST) {
                Ok(len) => len,
                Err(e) if e.is_incomplete() => break,
                Err(_) => return,
            };
            let Some((id, tag)) = request_head(window.get(..len).unwrap_or(&[])) else {
                return;
            };
            start += len;
            if tag == tags::UNBIND_REQUEST {
                let _ = stream.write_all(&output);
                return;
            }
            let Some(response) = response_tag(tag) else {
                continue;
            };
            if tag == tags::SEARCH_REQUEST {
                LdapMessage {
                    message_id: id,
                    op: ProtocolOp::SearchResultEntry(SearchResultEntry {
                        dn: b"cn=canned",
                        attributes: Seq::from_items(&entry_attributes),
                    }),
                    controls: Seq::empty(),
                }
                .encode(&mut output);
            }
            encode_result(&mut output, id, response, &LdapResult::success());
        }
        if !output.is_empty() {
            if stream.write_all(&output).is_err() {
                return;
            }
            output.clear();
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == input.len() {
            input.copy_within(start..end, 0);
            (start, end) = (0, end - start);
        }
    }
}

fn request_head(pdu: &[u8]) -> Option<(i32, Tag)> {
    let message = Reader::new(pdu).read().ok()?;
    let mut fields = Reader::new(message.contents);
    let id = fields.integer(Tag::INTEGER, "message ID").ok()?;
    Some((i32::try_from(id).ok()?, fields.peek_tag()?))
}
