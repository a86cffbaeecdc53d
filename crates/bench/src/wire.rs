//! The client side of the wire: connecting, scanning responses only as
//! far as the bench needs (message ID, operation, result code), and a
//! blocking-style request/answer for binds.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use meridian_ber::{Reader, Tag, frame};
use meridian_proto::message::{encode_simple_bind, tags};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::tls::Tls;

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

/// Where a URL points.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The resolved address.
    pub address: SocketAddr,
    /// The host as written (the TLS server name by default).
    pub host: String,
    /// `ldaps://`.
    pub tls: bool,
}

/// `ldap://HOST[:PORT][/]` (port 389) or `ldaps://HOST[:PORT][/]` (636).
pub fn resolve(url: &str) -> anyhow::Result<Endpoint> {
    let (rest, tls, default_port) = if let Some(rest) = url.strip_prefix("ldap://") {
        (rest, false, 389)
    } else if let Some(rest) = url.strip_prefix("ldaps://") {
        (rest, true, 636)
    } else {
        bail!("server URL must be ldap://HOST[:PORT] or ldaps://HOST[:PORT], not {url:?}");
    };
    let authority = rest.trim_end_matches('/');
    let (host, address) = match authority.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.ends_with(':') => {
            (host, authority.to_owned())
        }
        _ => (authority, format!("{authority}:{default_port}")),
    };
    let address = std::net::ToSocketAddrs::to_socket_addrs(&address)
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .ok_or_else(|| anyhow!("{address} resolves to no address"))?;
    Ok(Endpoint {
        address,
        host: host.to_owned(),
        tls,
    })
}

/// A connection, plain or TLS.
#[derive(Debug)]
pub enum Conn {
    /// `ldap://`.
    Plain(TcpStream),
    /// `ldaps://`.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Opens a connection (Nagle off: requests go out when written), with
/// the TLS handshake when `tls` is given; both within `timeout`.
pub async fn connect(
    address: SocketAddr,
    tls: Option<&Tls>,
    timeout: Duration,
) -> anyhow::Result<Conn> {
    let open = async {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("cannot connect to {address}"))?;
        stream.set_nodelay(true)?;
        match tls {
            None => Ok(Conn::Plain(stream)),
            Some(tls) => {
                let stream = tls
                    .connector
                    .connect(tls.server_name.clone(), stream)
                    .await
                    .with_context(|| format!("TLS handshake with {address} failed"))?;
                Ok(Conn::Tls(Box::new(stream)))
            }
        }
    };
    tokio::time::timeout(timeout, open)
        .await
        .map_err(|_| anyhow!("cannot connect to {address}: no answer within {timeout:?}"))?
}

/// Binds with `dn`/`password` as message 1; an error says why the server
/// refused.
pub async fn bind<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
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
pub async fn read_pdu<S: AsyncRead + Unpin>(
    stream: &mut S,
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
        let plain = resolve("ldap://127.0.0.1:3890").unwrap();
        assert_eq!(
            (plain.address.port(), plain.tls, plain.host.as_str()),
            (3890, false, "127.0.0.1")
        );
        assert_eq!(resolve("ldap://127.0.0.1/").unwrap().address.port(), 389);
        let tls = resolve("ldaps://localhost").unwrap();
        assert_eq!(
            (tls.address.port(), tls.tls, tls.host.as_str()),
            (636, true, "localhost")
        );
        assert!(
            resolve("http://x")
                .unwrap_err()
                .to_string()
                .contains("ldap://")
        );
    }
}
