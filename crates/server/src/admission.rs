//! Who may open a connection: at most `server.max_connections` in all
//! and `server.max_connections_per_ip` from one address. Over either, the
//! client gets a Notice of Disconnection `busy` naming the limit, and the
//! log says so at most once a second (a flood of refusals must not become
//! a flood of log lines).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use meridian_proto::ResultCode;
use meridian_proto::message::encode_notice_of_disconnection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The connection limits of one listener.
#[derive(Debug)]
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    max_connections: usize,
    /// 0: no per-address limit.
    per_ip: usize,
    open_by_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    /// Seconds since the epoch of the last refusal logged.
    last_logged: AtomicU64,
}

/// A connection admitted: its slots are returned when this is dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    _slot: OwnedSemaphorePermit,
    ip: IpAddr,
    open_by_ip: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(map) = &self.open_by_ip {
            let mut open = map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = open.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    open.remove(&self.ip);
                }
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(max_connections: usize, per_ip: usize) -> Admission {
        Admission {
            slots: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            per_ip,
            open_by_ip: Arc::new(Mutex::new(HashMap::new())),
            last_logged: AtomicU64::new(0),
        }
    }

    /// Admits a connection from `peer`, or says which limit refuses it.
    pub(crate) fn admit(&self, peer: SocketAddr) -> Result<Admitted, String> {
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return Err(format!(
                "too many connections: the limit is {} (server.max_connections)",
                self.max_connections
            ));
        };
        let ip = peer.ip();
        if self.per_ip == 0 {
            return Ok(Admitted {
                _slot: slot,
                ip,
                open_by_ip: None,
            });
        }
        let mut open = self
            .open_by_ip
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= self.per_ip {
            return Err(format!(
                "too many connections from {ip}: the limit is {} (server.max_connections_per_ip)",
                self.per_ip
            ));
        }
        *n += 1;
        Ok(Admitted {
            _slot: slot,
            ip,
            open_by_ip: Some(Arc::clone(&self.open_by_ip)),
        })
    }

    /// Tells a refused client why (busy) and closes; logs at most one
    /// refusal a second.
    pub(crate) async fn refuse(
        &self,
        stream: crate::connection::Socket,
        peer: SocketAddr,
        why: String,
    ) {
        // Throttles a log line; never stored.
        #[allow(clippy::disallowed_methods)]
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.last_logged.swap(now, Ordering::Relaxed) != now {
            tracing::warn!(%peer, reason = %why, "connection refused (logged at most once a second)");
        }
        let mut buf = Vec::new();
        encode_notice_of_disconnection(&mut buf, ResultCode::BUSY, why.as_bytes());
        stream.say_and_close(&buf).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_in_all_and_per_address_and_slots_come_back() {
        let admission = Admission::new(3, 2);
        let a: SocketAddr = "10.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1000".parse().unwrap();
        let first = admission.admit(a).unwrap();
        let _second = admission.admit(a).unwrap();
        let refused = admission.admit(a).unwrap_err();
        assert!(refused.contains("max_connections_per_ip"), "{refused}");
        let _third = admission.admit(b).unwrap();
        let refused = admission.admit(b).unwrap_err();
        assert!(refused.contains("server.max_connections)"), "{refused}");
        drop(first);
        let _again = admission.admit(a).unwrap();
        assert!(admission.admit(a).is_err());
    }
}
