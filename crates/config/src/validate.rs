//! The checks of every value of a configuration, by section; the first
//! problem found is returned, naming its key.

use std::net::SocketAddr;

use crate::{Config, ConfigError, MAX_DN_CACHE_ENTRIES};

fn invalid(key: &'static str, reason: String) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid { key, reason })
}

impl Config {
    /// Checks every value; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.cluster.validate()?;
        self.check_partitions()?;
        self.groups.validate()?;
        self.check_server()?;
        self.check_ranges()?;
        self.check_directory()?;
        self.check_password_bounds()?;
        self.check_storage()
    }

    /// `cluster.preferred_leaders` names partitions that exist: each key
    /// one of `directory.additional_suffixes` (compared as written, but for
    /// case and spaces; the server matches them as DNs).
    fn check_partitions(&self) -> Result<(), ConfigError> {
        let loose = |dn: &str| dn.to_ascii_lowercase().replace(' ', "");
        for suffix in self.cluster.preferred_leaders.keys() {
            let known = self
                .directory
                .additional_suffixes
                .iter()
                .any(|s| loose(s) == loose(suffix));
            if !known {
                let reason = if loose(suffix) == loose(&self.directory.suffix) {
                    format!(
                        "{suffix:?} is directory.suffix, whose partition's leader is cluster.preferred_leader"
                    )
                } else {
                    format!("{suffix:?} is not one of directory.additional_suffixes")
                };
                return invalid("cluster.preferred_leaders", reason);
            }
        }
        Ok(())
    }

    /// `[server]`'s addresses, and the security and identity choices.
    fn check_server(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        if let Err(e) = s.listen.parse::<SocketAddr>() {
            return invalid(
                "server.listen",
                format!("{:?} is not an IP:PORT address ({e})", s.listen),
            );
        }
        if !s.listen_tls.is_empty()
            && let Err(e) = s.listen_tls.parse::<SocketAddr>()
        {
            return invalid(
                "server.listen_tls",
                format!("{:?} is not an IP:PORT address ({e})", s.listen_tls),
            );
        }
        if !matches!(
            self.security.client_certificates.as_str(),
            "none" | "optional" | "required"
        ) {
            return invalid(
                "security.client_certificates",
                format!(
                    "{:?}: one of \"none\", \"optional\", \"required\"",
                    self.security.client_certificates
                ),
            );
        }
        if self.directory.server_id > 4095 {
            return invalid(
                "directory.server_id",
                format!(
                    "{}: at most 4095 (three hex digits in entryCSN)",
                    self.directory.server_id
                ),
            );
        }
        if self.password_policy.min_classes > 4 {
            return invalid(
                "password_policy.min_classes",
                format!(
                    "{}: there are four classes (lower case, upper case, digits, others)",
                    self.password_policy.min_classes
                ),
            );
        }
        Ok(())
    }

    /// The numeric limits with a range, as one table.
    fn check_ranges(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        let ranges: [(&'static str, usize, usize, usize); 22] = [
            ("server.max_connections", s.max_connections, 1, 1_000_000),
            ("server.max_followers", s.max_followers, 0, 1_000_000),
            ("server.ldapi_mode", s.ldapi_mode as usize, 0, 0o777),
            (
                "server.max_followers_per_connection",
                s.max_followers_per_connection,
                0,
                100_000,
            ),
            (
                "server.max_transaction_updates",
                s.max_transaction_updates,
                1,
                1_000_000,
            ),
            (
                "server.max_transaction_bytes",
                s.max_transaction_bytes,
                1 << 10,
                1 << 34,
            ),
            (
                "server.transaction_timeout_secs",
                usize::try_from(s.transaction_timeout_secs).unwrap_or(usize::MAX),
                1,
                86_400,
            ),
            (
                "server.max_outstanding_per_connection",
                s.max_outstanding_per_connection,
                1,
                1_000_000,
            ),
            // A PDU must at least hold a tiny message; above 2 GiB the
            // BER length field itself is out of reach of common clients.
            ("server.max_pdu_bytes", s.max_pdu_bytes, 64, 1 << 31),
            (
                "server.max_pdu_bytes_anonymous",
                s.max_pdu_bytes_anonymous,
                64,
                1 << 31,
            ),
            (
                "server.max_buffered_bytes",
                s.max_buffered_bytes,
                64 << 10,
                1 << 34,
            ),
            (
                "server.max_partial_pdu_bytes",
                s.max_partial_pdu_bytes,
                1 << 20,
                1 << 40,
            ),
            ("server.max_ber_depth", s.max_ber_depth, 4, 1024),
            ("server.worker_threads", s.worker_threads, 0, 1024),
            (
                "directory.size_limit",
                self.directory.size_limit,
                1,
                usize::MAX,
            ),
            (
                "directory.max_filter_items",
                self.directory.max_filter_items,
                1,
                1_000_000,
            ),
            (
                "directory.max_modify_changes",
                self.directory.max_modify_changes,
                1,
                1_000_000,
            ),
            (
                "directory.max_dn_rdns",
                self.directory.max_dn_rdns,
                1,
                100_000,
            ),
            (
                "security.max_password_values",
                self.security.max_password_values,
                1,
                10_000,
            ),
            (
                "directory.sort_max_keys",
                self.directory.sort_max_keys,
                1,
                64,
            ),
            (
                "directory.sort_memory_bytes",
                self.directory.sort_memory_bytes,
                1 << 20,
                1 << 40,
            ),
            ("log.queue_lines", self.log.queue_lines, 16, 16_777_216),
        ];
        for (key, value, min, max) in ranges {
            if value < min || value > max {
                return invalid(key, format!("{value} is outside {min}..={max}"));
            }
        }
        if self.directory.time_limit_secs == 0 {
            return invalid(
                "directory.time_limit_secs",
                "0 would stop every search at once; give at least 1".into(),
            );
        }
        if s.queue_length_flush_ms == 0 || s.queue_length_flush_ms > 60_000 {
            return invalid(
                "server.queue_length_flush_ms",
                format!("{} is outside 1..=60000", s.queue_length_flush_ms),
            );
        }
        Ok(())
    }

    /// `[directory]`: DNs, dynamic entries' TTLs, the cost of new
    /// password hashes, proxy authorizers, the data folder.
    fn check_directory(&self) -> Result<(), ConfigError> {
        let d = &self.directory;
        let suffixes = d
            .additional_suffixes
            .iter()
            .map(|s| ("directory.additional_suffixes", s));
        for (key, dn) in [
            ("directory.suffix", &d.suffix),
            ("directory.admin_dn", &d.admin_dn),
        ]
        .into_iter()
        .chain(suffixes)
        {
            match meridian_proto::dn::SyntacticDn::parse(dn) {
                Ok(parsed) if parsed.is_root() => {
                    return invalid(key, "must not be the empty DN".into());
                }
                Ok(_) => {}
                Err(e) => return invalid(key, format!("{dn:?} is not a valid DN: {e}")),
            }
        }
        if d.dynamic_min_ttl_secs == 0
            || d.dynamic_min_ttl_secs > d.dynamic_default_ttl_secs
            || d.dynamic_default_ttl_secs > d.dynamic_max_ttl_secs
        {
            return invalid(
                "directory.dynamic_default_ttl_secs",
                format!(
                    "need 1 <= dynamic_min_ttl_secs ({}) <= dynamic_default_ttl_secs ({}) <= dynamic_max_ttl_secs ({})",
                    d.dynamic_min_ttl_secs, d.dynamic_default_ttl_secs, d.dynamic_max_ttl_secs
                ),
            );
        }
        if !(8..=4_194_304).contains(&d.password_hash_memory_kib) {
            return invalid(
                "directory.password_hash_memory_kib",
                format!(
                    "{} is outside 8..=4194304 (4 GiB)",
                    d.password_hash_memory_kib
                ),
            );
        }
        if d.bind_cache_entries > 1_000_000 {
            return invalid(
                "directory.bind_cache_entries",
                format!(
                    "{} is above 1000000 (about 50 MB of digests); 0 turns the cache off",
                    d.bind_cache_entries
                ),
            );
        }
        if !(1..=100).contains(&d.password_hash_iterations) {
            return invalid(
                "directory.password_hash_iterations",
                format!("{} is outside 1..=100", d.password_hash_iterations),
            );
        }
        if d.dynamic_sweep_secs == 0 || d.dynamic_sweep_secs > 86_400 {
            return invalid(
                "directory.dynamic_sweep_secs",
                format!("{} is outside 1..=86400", d.dynamic_sweep_secs),
            );
        }
        for (i, who) in d.proxy_authorizers.iter().enumerate() {
            let dn = who
                .strip_prefix("dn:")
                .or_else(|| who.strip_prefix("group:"));
            let valid = dn.is_some_and(|dn| {
                meridian_proto::dn::SyntacticDn::parse(dn).is_ok_and(|parsed| !parsed.is_root())
            });
            if !valid {
                return Err(ConfigError::Invalid {
                    key: "directory.proxy_authorizers",
                    reason: format!("entry {i}, {who:?}: expected dn:DN or group:DN"),
                });
            }
        }
        if d.data_dir.as_os_str().is_empty() {
            return invalid("directory.data_dir", "must not be empty".into());
        }
        Ok(())
    }

    /// `security.password_max_*`: the server's own hashes must verify.
    fn check_password_bounds(&self) -> Result<(), ConfigError> {
        let d = &self.directory;
        let sec = &self.security;
        if d.password_hash_memory_kib > sec.password_max_memory_kib {
            return invalid(
                "security.password_max_memory_kib",
                format!(
                    "{} is below directory.password_hash_memory_kib ({}): the server's own hashes would not verify",
                    sec.password_max_memory_kib, d.password_hash_memory_kib
                ),
            );
        }
        if d.password_hash_iterations > sec.password_max_iterations {
            return invalid(
                "security.password_max_iterations",
                format!(
                    "{} is below directory.password_hash_iterations ({}): the server's own hashes would not verify",
                    sec.password_max_iterations, d.password_hash_iterations
                ),
            );
        }
        if sec.password_max_lanes == 0 || sec.password_max_bcrypt_cost > 31 {
            return invalid(
                "security.password_max_lanes",
                "lanes must be at least 1 (and password_max_bcrypt_cost at most 31)".into(),
            );
        }
        Ok(())
    }

    /// `[storage]`.
    fn check_storage(&self) -> Result<(), ConfigError> {
        let st = &self.storage;
        if st.map_size_bytes < (1 << 20) {
            return invalid(
                "storage.map_size_bytes",
                format!("{} is below 1 MiB", st.map_size_bytes),
            );
        }
        if st.change_feed_batches == 0 || st.change_feed_batches > 1 << 20 {
            return invalid(
                "storage.change_feed_batches",
                format!("{} is outside 1..=1048576", st.change_feed_batches),
            );
        }
        if st.sync_session_log > 10_000_000 {
            return invalid(
                "storage.sync_session_log",
                format!("{} is above 10000000", st.sync_session_log),
            );
        }
        if st.max_batch == 0 || st.max_batch > 1_000_000 {
            return invalid(
                "storage.max_batch",
                format!("{} is outside 1..=1000000", st.max_batch),
            );
        }
        if st.journal_checkpoint_bytes < 4096 {
            return invalid(
                "storage.journal_checkpoint_bytes",
                format!("{} is below 4096", st.journal_checkpoint_bytes),
            );
        }
        if st.queue_depth == 0 {
            return invalid("storage.queue_depth", "must be at least 1".into());
        }
        if st.dn_cache_entries > MAX_DN_CACHE_ENTRIES {
            return invalid(
                "storage.dn_cache_entries",
                format!(
                    "{} is above {MAX_DN_CACHE_ENTRIES} (each takes 64 bytes: 32 for the \
                     writer's table, 32 for the readers')",
                    st.dn_cache_entries
                ),
            );
        }
        for (attr, kinds) in &st.indexes {
            if kinds.is_empty() {
                return invalid(
                    "storage.indexes",
                    format!("{attr}: list at least one of eq, pres, sub"),
                );
            }
        }
        Ok(())
    }
}
