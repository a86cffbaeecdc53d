//! `meridian cluster status | add-learner | promote | remove |
//! transfer-leader`: a running node administered over LDAP.
//!
//! The channel is the node's LDAP port: the command binds as the
//! directory administrator and sends Meridian's cluster administration
//! extended operation (`meridian_proto::extended::oid::CLUSTER_ADMIN`),
//! whose value is the command in text, so `ldapexop` works as well:
//!
//! ```text
//! ldapexop -H ldap://127.0.0.1:3389 -D cn=admin,dc=example,dc=com -w ... \
//!     '2.25.241941608197083682915838068312096323903.5.1:transfer-leader 2'
//! ```
//!
//! Nothing is open by default: the server serves the operation to the
//! administrator only, and only when it runs a cluster node. Any node
//! takes any command; a change is sent on to the leader.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_proto::extended::oid::CLUSTER_ADMIN;
use meridian_proto::message::{LdapMessage, ProtocolOp};
use meridian_proto::{DecodeLimits, ExtendedRequest, ResultCode};
use meridian_replication::ReadRefused;
use meridian_replication::{AdminCommand, AdminError};
use meridian_server::{ClusterAnswer, ClusterHooks, ReadWait};

use super::{Partition, Partitions};
use tokio::io::AsyncWriteExt as _;

/// A command and the partition it is for (`None`: every partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Addressed {
    pub(crate) command: AdminCommand,
    /// The suffix of the partition (naming context) whose Raft group
    /// carries the command out.
    pub(crate) partition: Option<String>,
}

/// A command's text form: the request value of the extended operation;
/// a partition's suffix, when named, follows the command's own words.
pub(crate) fn render(addressed: &Addressed) -> String {
    let command = match &addressed.command {
        AdminCommand::Status => "status".into(),
        AdminCommand::AddLearner { id, peer, ldap } => format!("add-learner {id} {peer} {ldap}"),
        AdminCommand::Promote { id } => format!("promote {id}"),
        AdminCommand::Remove { id } => format!("remove {id}"),
        AdminCommand::TransferLeader { id } => format!("transfer-leader {id}"),
    };
    match &addressed.partition {
        Some(suffix) => format!("{command} {suffix}"),
        None => command,
    }
}

const USAGE: &str = "status | add-learner ID PEER-ADDRESS LDAP-URL | promote ID | remove ID | transfer-leader ID, each followed by a partition's suffix or nothing (every partition)";

/// Reads a command's text form.
pub(crate) fn parse(text: &str) -> Result<Addressed, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let id = |word: &str| -> Result<u64, String> {
        word.parse()
            .map_err(|_| format!("{word:?} is not a node ID (a number)"))
    };
    let (command, rest) = match words.as_slice() {
        ["status", rest @ ..] => (AdminCommand::Status, rest),
        ["add-learner", node, peer, ldap, rest @ ..] => (
            AdminCommand::AddLearner {
                id: id(node)?,
                peer: (*peer).to_owned(),
                ldap: (*ldap).to_owned(),
            },
            rest,
        ),
        ["promote", node, rest @ ..] => (AdminCommand::Promote { id: id(node)? }, rest),
        ["remove", node, rest @ ..] => (AdminCommand::Remove { id: id(node)? }, rest),
        ["transfer-leader", node, rest @ ..] => {
            (AdminCommand::TransferLeader { id: id(node)? }, rest)
        }
        _ => {
            return Err(format!(
                "{text:?} is not a cluster command; the value is one of: {USAGE}"
            ));
        }
    };
    // A suffix may hold spaces (`o=Example Corp`): the rest, as written.
    let partition = (!rest.is_empty()).then(|| rest.join(" "));
    Ok(Addressed { command, partition })
}

/// The server's hooks: requests carried out, and reads gated, by this
/// node's Raft groups.
pub(crate) struct NodeAdmin {
    pub(crate) partitions: Partitions,
    /// To read a partition named in a command as a DN.
    pub(crate) schema: Arc<Schema>,
    /// `cluster.conflicts = "first-wins"`: a matter for the server's
    /// write path, not for replication, which applies whatever the log
    /// holds.
    pub(crate) first_wins: bool,
}

impl NodeAdmin {
    /// The partitions `addressed` names: the one of its suffix, or all.
    fn addressed(&self, addressed: &Addressed) -> Result<Vec<&Partition>, String> {
        let Some(text) = &addressed.partition else {
            return Ok(self.partitions.iter().collect());
        };
        let dn = Dn::parse(text.as_bytes(), &self.schema)
            .map_err(|e| format!("{text:?} is not a DN: {e}"))?;
        let found = self.partitions.iter().find(|p| p.dn.same_entry(&dn));
        let known: Vec<&str> = self.partitions.iter().map(|p| p.suffix.as_str()).collect();
        found.map(|p| vec![p]).ok_or_else(|| {
            format!(
                "{text:?} is not a partition of this cluster; they are: {}",
                known.join("; ")
            )
        })
    }
}

/// Carries `command` out in each of `partitions` in turn, stopping at the
/// first refusal; the answers are headed by their partition's suffix
/// when the cluster has several.
async fn administer_each(
    partitions: Vec<Partition>,
    several: bool,
    command: AdminCommand,
) -> Result<String, (String, AdminError)> {
    let mut answer = String::new();
    for partition in partitions {
        match partition.node.administer(command.clone()).await {
            Ok(text) if several => {
                answer.push_str(&format!("partition: {}\n{text}", partition.suffix));
                if !answer.ends_with('\n') {
                    answer.push('\n');
                }
            }
            Ok(text) => answer.push_str(&text),
            Err(e) if several => return Err((format!("partition {}: ", partition.suffix), e)),
            Err(e) => return Err((String::new(), e)),
        }
    }
    Ok(answer)
}

impl ClusterHooks for NodeAdmin {
    fn administer(
        &self,
        request: &[u8],
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ClusterAnswer> + Send>> {
        let protocol_error = |message| ClusterAnswer {
            code: ResultCode::PROTOCOL_ERROR,
            message,
            value: None,
        };
        let addressed = std::str::from_utf8(request)
            .map_err(|_| "the request value is not UTF-8 text".to_owned())
            .and_then(parse);
        let addressed = match addressed {
            Ok(addressed) => addressed,
            Err(message) => return Box::pin(std::future::ready(protocol_error(message))),
        };
        let partitions = match self.addressed(&addressed) {
            Ok(partitions) => partitions.into_iter().cloned().collect(),
            Err(message) => {
                return Box::pin(std::future::ready(ClusterAnswer {
                    code: ResultCode::NO_SUCH_OBJECT,
                    message,
                    value: None,
                }));
            }
        };
        let several = self.partitions.len() > 1;
        Box::pin(async move {
            let what = render(&addressed);
            match administer_each(partitions, several, addressed.command).await {
                Ok(text) => {
                    if !what.starts_with("status") {
                        tracing::info!(command = %what, "cluster: {}", text.trim_end());
                    }
                    ClusterAnswer {
                        code: ResultCode::SUCCESS,
                        message: String::new(),
                        value: Some(text.into_bytes()),
                    }
                }
                Err((which, e)) => {
                    let code = match e {
                        AdminError::Refused(_) => ResultCode::UNWILLING_TO_PERFORM,
                        AdminError::Unavailable(_) => ResultCode::UNAVAILABLE,
                    };
                    tracing::warn!(command = %what, "cluster: {which}{e}");
                    ClusterAnswer {
                        code,
                        message: format!("{what}: {which}{e}"),
                        value: None,
                    }
                }
            }
        })
    }

    fn first_wins(&self) -> bool {
        self.first_wins
    }

    /// Every partition's wait: a search may span naming contexts, and
    /// under `cluster.reads = "linearizable"` it must see every write
    /// acknowledged before it began, in any of them.
    fn before_read(&self) -> Result<Option<ReadWait>, ClusterAnswer> {
        let refusal = |refused: ReadRefused| {
            let code = match refused {
                ReadRefused::Stale(_) => ResultCode::BUSY,
                ReadRefused::Unavailable(_) => ResultCode::UNAVAILABLE,
            };
            ClusterAnswer {
                code,
                message: refused.to_string(),
                value: None,
            }
        };
        let mut waits = Vec::new();
        for partition in self.partitions.iter() {
            match partition.node.before_read() {
                Ok(None) => {}
                Ok(Some(wait)) => waits.push(wait),
                Err(refused) => return Err(refusal(refused)),
            }
        }
        if waits.is_empty() {
            return Ok(None);
        }
        // Each partition's round is under way already: waiting for them
        // one after the other takes as long as the slowest.
        Ok(Some(Box::pin(async move {
            for wait in waits {
                wait.await.map_err(refusal)?;
            }
            Ok(())
        })))
    }
}

/// Where and as whom a cluster command is sent.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// The node to ask: ldap://HOST:PORT or ldaps://HOST:PORT (any node;
    /// changes are carried out by the leader).
    #[arg(long, short = 'H', value_name = "URL")]
    url: String,
    /// The directory administrator's DN (`directory.admin_dn`).
    #[arg(short = 'D', long, default_value = "cn=admin,dc=example,dc=com")]
    bind_dn: String,
    /// The administrator's password (or set MERIDIAN_ADMIN_PASSWORD).
    #[arg(short = 'w', long)]
    password: Option<String>,
    /// With an ldaps:// URL: the CA certificates (PEM) the node's
    /// certificate must be signed by.
    #[arg(long, value_name = "FILE")]
    tls_ca_file: Option<std::path::PathBuf>,
    /// The partition (a naming context's suffix) whose Raft group carries
    /// the command out; without it, every partition does, in turn.
    #[arg(long, value_name = "SUFFIX")]
    partition: Option<String>,
    /// How long to wait for the answer, in seconds (a membership change
    /// waits for the leader to commit it).
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
}

/// Sends `command` to the node `target` names; prints the answer.
pub(crate) fn run(target: &Target, command: &AdminCommand) -> anyhow::Result<()> {
    let password = match &target.password {
        Some(password) => password.clone(),
        None => std::env::var(meridian_server::PASSWORD_ENV).map_err(|_| {
            anyhow!(
                "give the administrator's password with -w or {}",
                meridian_server::PASSWORD_ENV
            )
        })?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the client's runtime")?;
    let answer = runtime.block_on(ask(target, &password, command))?;
    print!("{answer}");
    if !answer.ends_with('\n') {
        println!();
    }
    Ok(())
}

async fn ask(target: &Target, password: &str, command: &AdminCommand) -> anyhow::Result<String> {
    let endpoint = crate::ldap_client::Endpoint {
        url: target.url.clone(),
        bind_dn: target.bind_dn.clone(),
        password: password.to_owned(),
        tls_ca_file: target.tls_ca_file.clone(),
    };
    let addressed = Addressed {
        command: command.clone(),
        partition: target.partition.clone(),
    };
    ask_as(
        &endpoint,
        &addressed,
        Duration::from_secs(target.timeout_secs),
    )
    .await
}

/// Sends `addressed` to the node `endpoint` names, bound as its identity
/// (the console asks as whoever signed in); the node's answer.
pub(crate) async fn ask_as(
    endpoint: &crate::ldap_client::Endpoint,
    addressed: &Addressed,
    timeout: Duration,
) -> anyhow::Result<String> {
    const MAX_PDU: usize = 1 << 20;
    let mut conn = crate::ldap_client::connect_bound(endpoint, timeout, MAX_PDU).await?;
    let text = render(addressed);
    let mut request = Vec::new();
    LdapMessage {
        message_id: 2,
        op: ProtocolOp::ExtendedRequest(ExtendedRequest {
            name: CLUSTER_ADMIN,
            value: Some(text.as_bytes()),
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(&mut request);
    conn.write_all(&request).await?;
    let mut buf = Vec::new();
    let pdu = tokio::time::timeout(
        timeout,
        meridian_bench::wire::read_pdu(&mut conn, &mut buf, MAX_PDU),
    )
    .await
    .map_err(|_| anyhow!("{}: no answer within {timeout:?}", endpoint.url))??;
    let message = LdapMessage::decode(&pdu, &DecodeLimits::default())
        .map_err(|e| anyhow!("{}: a malformed answer: {e}", endpoint.url))?;
    let ProtocolOp::ExtendedResponse(response) = message.op else {
        bail!("{}: an unexpected answer to {text:?}", endpoint.url);
    };
    let code = response.result.code;
    let diagnostic = String::from_utf8_lossy(response.result.message);
    if code == ResultCode::PROTOCOL_ERROR && diagnostic.contains("unsupported extended operation") {
        bail!(
            "{} is not a cluster node (it does not serve cluster administration)",
            endpoint.url
        );
    }
    if code != ResultCode::SUCCESS {
        let name = meridian_bench::stats::code_name(i64::from(code.0));
        bail!("{text}: refused, {name} ({}): {diagnostic}", code.0);
    }
    Ok(String::from_utf8_lossy(response.value.unwrap_or_default()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reads_back_from_its_text() {
        let commands = [
            AdminCommand::Status,
            AdminCommand::AddLearner {
                id: 4,
                peer: "127.0.0.1:7004".into(),
                ldap: "ldap://127.0.0.1:3392".into(),
            },
            AdminCommand::Promote { id: 4 },
            AdminCommand::Remove { id: 3 },
            AdminCommand::TransferLeader { id: 2 },
        ];
        for command in commands {
            for partition in [None, Some("o=Example Corp,c=US".to_owned())] {
                let addressed = Addressed {
                    command: command.clone(),
                    partition,
                };
                assert_eq!(parse(&render(&addressed)), Ok(addressed));
            }
        }
    }

    #[test]
    fn a_malformed_command_names_what_is_wrong() {
        assert!(
            parse("promote")
                .unwrap_err()
                .contains("not a cluster command")
        );
        assert!(parse("promote four").unwrap_err().contains("not a node ID"));
        assert!(parse("").unwrap_err().contains("status |"));
    }
}
