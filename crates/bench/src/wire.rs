//! The client side of the wire: connecting, scanning responses only as
//! far as the bench needs (message ID, operation, result code), and a
//! blocking-style request/answer for binds.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use meridian_ber::{Reader, Tag, frame};
use meridian_proto::message::{encode_simple_bind, tags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a response PDU is, as far as the bench cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response<'a> {
    /// A SearchResultEntry or SearchResultReference: more to come.
    Entry,
    /// An IntermediateResponse: more to come.
    Intermediate,
    /// The final response of a request.
    Done {
        /// resultCode.
        code: u32,
        /// diagnosticMessage.
        message: &'a [u8],
    },
    /// An unsolicited notification (message ID 0): the server is closing.
    Notice {
        /// resultCode.
        code: u32,
        /// diagnosticMessage.
        message: &'a [u8],
    },
}

/// Reads the message ID and kind of a complete response PDU.
pub fn scan(pdu: &[u8]) -> Result<(i32, Response<'_>), meridian_ber::Error> {
    let malformed = meridian_ber::Error::Malformed;
    let message = Reader::new(pdu).read()?;
    let mut fields = Reader::new(message.contents);
    let id = fields.integer(Tag::INTEGER, "expected a message ID")?;
    let id = i32::try_from(id).map_err(|_| malformed("message ID out of range"))?;
    let op = fields.read()?;
    let response = match op.tag {
        t if t == tags::SEARCH_RESULT_ENTRY || t == tags::SEARCH_RESULT_REFERENCE => {
            Response::Entry
        }
        t if t == tags::INTERMEDIATE_RESPONSE => Response::Intermediate,
        _ => {
            let mut result = Reader::new(op.contents);
            let code = result.integer(Tag::ENUMERATED, "expected a resultCode")?;
            let code = u32::try_from(code).map_err(|_| malformed("resultCode out of range"))?;
            result.expect(Tag::OCTET_STRING, "expected a matchedDN")?;
            let message = result.expect(Tag::OCTET_STRING, "expected a diagnosticMessage")?;
            if id == 0 {
                Response::Notice { code, message }
            } else {
                Response::Done { code, message }
            }
        }
    };
    Ok((id, response))
}

/// `ldap://HOST[:PORT][/]` to a socket address (port 389 by default).
pub fn resolve(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url.strip_prefix("ldap://").ok_or_else(|| {
        anyhow!(
            "server URL must be ldap://HOST[:PORT], not {url:?} (ldaps:// is not supported yet)"
        )
    })?;
    let host = rest.trim_end_matches('/');
    let address = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_owned()
    } else {
        format!("{host}:389")
    };
    std::net::ToSocketAddrs::to_socket_addrs(&address)
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .ok_or_else(|| anyhow!("{address} resolves to no address"))
}

/// Opens a connection with Nagle off (requests go out when written).
pub async fn connect(address: SocketAddr, timeout: Duration) -> anyhow::Result<TcpStream> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
        .await
        .map_err(|_| anyhow!("cannot connect to {address}: no answer within {timeout:?}"))?
        .with_context(|| format!("cannot connect to {address}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Binds with `dn`/`password` as message 1; an error says why the server
/// refused.
pub async fn bind(
    stream: &mut TcpStream,
    dn: &str,
    password: &str,
    max_pdu: usize,
) -> anyhow::Result<()> {
    let mut request = Vec::new();
    encode_simple_bind(&mut request, 1, dn.as_bytes(), password.as_bytes());
    stream.write_all(&request).await?;
    let mut buf = Vec::with_capacity(256);
    let pdu = read_pdu(stream, &mut buf, max_pdu).await?;
    match scan(&pdu)? {
        (1, Response::Done { code: 0, .. }) => Ok(()),
        (_, Response::Done { code, message } | Response::Notice { code, message }) => bail!(
            "bind as {dn:?} refused: {} ({code}){}",
            crate::stats::code_name(i64::from(code)),
            if message.is_empty() {
                String::new()
            } else {
                format!(": {}", String::from_utf8_lossy(message))
            }
        ),
        _ => bail!("bind as {dn:?}: unexpected answer"),
    }
}

/// Reads one whole PDU (for the simple exchanges: binds, one-shot
/// operations).
pub async fn read_pdu(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max_pdu: usize,
) -> anyhow::Result<Vec<u8>> {
    loop {
        match frame::pdu_length(buf, max_pdu) {
            Ok(len) => {
                let pdu = buf.drain(..len).collect();
                return Ok(pdu);
            }
            Err(e) if e.is_incomplete() => {}
            Err(e) => bail!("malformed response: {e}"),
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    }
}

#[cfg(test)]
mod tests {
    use meridian_proto::message::encode_result;
    use meridian_proto::{LdapResult, ResultCode};

    use super::*;

    #[test]
    fn scans_results_entries_and_notices() {
        let mut pdu = Vec::new();
        encode_result(
            &mut pdu,
            77,
            tags::MODIFY_RESPONSE,
            &LdapResult::new(ResultCode(32), b"gone"),
        );
        assert_eq!(
            scan(&pdu).unwrap(),
            (
                77,
                Response::Done {
                    code: 32,
                    message: b"gone"
                }
            )
        );
        let mut notice = Vec::new();
        meridian_proto::message::encode_notice_of_disconnection(&mut notice, ResultCode(2), b"bye");
        assert_eq!(
            scan(&notice).unwrap(),
            (
                0,
                Response::Notice {
                    code: 2,
                    message: b"bye"
                }
            )
        );
        assert!(scan(&[0x30, 0x03, 0x02, 0x01, 0x05]).is_err());
        assert!(scan(b"").is_err());
    }

    #[test]
    fn urls_resolve() {
        assert_eq!(resolve("ldap://127.0.0.1:3890").unwrap().port(), 3890);
        assert_eq!(resolve("ldap://127.0.0.1/").unwrap().port(), 389);
        assert!(
            resolve("http://x")
                .unwrap_err()
                .to_string()
                .contains("ldap://")
        );
    }
}
