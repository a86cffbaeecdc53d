//! Persistent-search consumers for benchmarks (`meridian bench
//! followers`): N connections, each with a persistent search of every
//! change below a base (changesOnly, no notifications), counting the
//! entries delivered until the time is up. Entries are counted from the
//! frame alone (the protocolOp's tag), so a consumer costs the client
//! one read per batch of changes and almost nothing per change, and the
//! server's delivery, not the client, is what is measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use meridian_ber::{Reader, Tag, Writer, frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The persistent search control (draft-ietf-ldapext-psearch-03).
const PERSISTENT_SEARCH: &[u8] = b"2.16.840.1.113730.3.4.3";
/// SearchResultEntry's tag.
const SEARCH_RESULT_ENTRY: u8 = 0x64;
/// SearchResultDone's tag: the server ended the search.
const SEARCH_RESULT_DONE: u8 = 0x65;

/// What to follow, and how long.
#[derive(Debug, Clone)]
pub struct Followers {
    /// `ldap://HOST:PORT`.
    pub url: String,
    /// Bind DN and password of every consumer.
    pub bind_dn: String,
    /// See `bind_dn`.
    pub password: String,
    /// The subtree followed.
    pub base: String,
    /// Consumers (connections).
    pub consumers: usize,
    /// How long they follow.
    pub duration: Duration,
}

/// What the consumers received.
#[derive(Debug, Clone, Default)]
pub struct Delivered {
    /// Entries received, by consumer.
    pub per_consumer: Vec<u64>,
    /// Consumers whose search the server ended (dropped as too slow).
    pub ended: usize,
    /// The seconds counted.
    pub seconds: f64,
}

impl Delivered {
    /// Entries received per second, all consumers together.
    pub fn total_rate(&self) -> f64 {
        self.per_consumer.iter().sum::<u64>() as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// Runs the consumers; each counts until the duration is over.
pub async fn follow(config: &Followers) -> anyhow::Result<Delivered> {
    let endpoint = crate::wire::resolve(&config.url)?;
    let counts: Arc<Vec<AtomicU64>> =
        Arc::new((0..config.consumers).map(|_| AtomicU64::new(0)).collect());
    let ended = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..config.consumers {
        let mut conn =
            crate::wire::connect(endpoint.address, None, Duration::from_secs(10)).await?;
        crate::wire::bind(&mut conn, &config.bind_dn, &config.password, 1 << 20).await?;
        let mut request = Vec::new();
        encode_persistent_search(&mut request, &config.base);
        conn.write_all(&request).await?;
        let (counts, ended) = (Arc::clone(&counts), Arc::clone(&ended));
        tasks.spawn(async move {
            let mut buf = Vec::with_capacity(1 << 20);
            let mut chunk = vec![0u8; 256 * 1024];
            loop {
                let Ok(n) = conn.read(&mut chunk).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                let (entries, done, used) = count_entries(&buf);
                buf.drain(..used);
                if let Some(count) = counts.get(i) {
                    count.fetch_add(entries, Ordering::Relaxed);
                }
                if done {
                    ended.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        });
    }
    let before: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    tokio::time::sleep(config.duration).await;
    let per_consumer = counts
        .iter()
        .zip(before)
        .map(|(c, b)| c.load(Ordering::Relaxed) - b)
        .collect();
    tasks.abort_all();
    Ok(Delivered {
        per_consumer,
        ended: usize::try_from(ended.load(Ordering::Relaxed)).unwrap_or(usize::MAX),
        seconds: config.duration.as_secs_f64(),
    })
}

/// The SearchResultEntry messages in the whole PDUs at the start of
/// `buf`, whether a SearchResultDone came, and the bytes they take.
fn count_entries(buf: &[u8]) -> (u64, bool, usize) {
    let (mut entries, mut used) = (0, 0);
    while let Some(rest) = buf.get(used..) {
        let Ok(length) = frame::pdu_length(rest, usize::MAX) else {
            break;
        };
        let Some(pdu) = rest.get(..length) else {
            break;
        };
        used += length;
        match protocol_op_tag(pdu) {
            Some(SEARCH_RESULT_ENTRY) => entries += 1,
            Some(SEARCH_RESULT_DONE) => return (entries, true, used),
            _ => {}
        }
    }
    (entries, false, used)
}

/// The tag of a message's protocolOp.
fn protocol_op_tag(pdu: &[u8]) -> Option<u8> {
    let mut outer = Reader::new(pdu);
    let message = outer.expect(Tag::SEQUENCE, "message").ok()?;
    let mut inner = Reader::new(message);
    inner.expect(Tag::INTEGER, "message ID").ok()?;
    inner.peek_tag().map(|t| t.0)
}

/// Message 2: a subtree search of `base` for every entry, with the
/// persistent search control (every change type, changes only, no
/// Entry Change Notifications).
fn encode_persistent_search(buf: &mut Vec<u8>, base: &str) {
    let mut value = Vec::new();
    {
        let mut w = Writer::new(&mut value);
        let m = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, 15);
        w.boolean(Tag::BOOLEAN, true);
        w.boolean(Tag::BOOLEAN, false);
        w.end(m);
    }
    let mut w = Writer::new(buf);
    let message = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, 2);
    let search = w.start(Tag::application(3, true));
    w.octets(Tag::OCTET_STRING, base.as_bytes());
    w.integer(Tag::ENUMERATED, 2);
    w.integer(Tag::ENUMERATED, 0);
    w.integer(Tag::INTEGER, 0);
    w.integer(Tag::INTEGER, 0);
    w.boolean(Tag::BOOLEAN, false);
    w.octets(Tag::context(7, false), b"objectClass");
    let attributes = w.start(Tag::SEQUENCE);
    w.end(attributes);
    w.end(search);
    let controls = w.start(Tag::context(0, true));
    let control = w.start(Tag::SEQUENCE);
    w.octets(Tag::OCTET_STRING, PERSISTENT_SEARCH);
    w.boolean(Tag::BOOLEAN, true);
    w.octets(Tag::OCTET_STRING, &value);
    w.end(control);
    w.end(controls);
    w.end(message);
}

/// Runs [`follow`] on a runtime of its own.
pub fn run(config: &Followers) -> anyhow::Result<Delivered> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the consumers' runtime")?;
    runtime.block_on(follow(config))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_are_counted_by_their_frames() {
        let mut buf = Vec::new();
        encode_persistent_search(&mut buf, "dc=example,dc=com");
        assert_eq!(protocol_op_tag(&buf), Some(0x63));
        let entry = [0x30, 0x07, 0x02, 0x01, 0x02, 0x64, 0x02, 0x04, 0x00];
        let mut stream = entry.repeat(3);
        stream.extend_from_slice(&entry[..4]);
        assert_eq!(count_entries(&stream), (3, false, 27));
    }
}
