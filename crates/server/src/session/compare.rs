//! Compare, and the assertion control on it; under `cluster.reads =
//! "linearizable"`, on its own task once the read may be served.

use std::sync::Arc;

use meridian_directory::{Directory, Identity, Outcome};
use meridian_proto::controls::decode_assertion;
use meridian_proto::message::{encode_result, tags};
use meridian_proto::{CompareRequest, Filter, ResultCode};

use super::reply::{Reply, ldap_result, log_access, referral_urls};
use super::search::before_read;
use super::{Action, Session};
use crate::outbound::{Outbound, ResponseBatch};

impl Session {
    pub(super) fn compare_request(
        &mut self,
        cmp: &CompareRequest<'_>,
        assertion: Option<(&Filter<'_>, &[u8])>,
        reply: Reply<'_>,
        out: &Arc<Outbound>,
    ) -> Action {
        let ctx = reply.ctx;
        let wait = match before_read(ctx) {
            Ok(wait) => wait,
            Err(answer) => return reply.result(cmp.dn, answer.code, answer.message.as_bytes()),
        };
        let Some(wait) = wait else {
            let outcome = compare(&ctx.directory, &self.identity, cmp, assertion.map(|a| a.0));
            return reply.outcome(cmp.dn, &outcome);
        };
        // The request outlives the read buffer: copied, the assertion
        // kept encoded and decoded again (it was valid) on the task.
        let (dn, attr, value) = (
            cmp.dn.to_vec(),
            cmp.ava.attr.to_vec(),
            cmp.ava.value.to_vec(),
        );
        let assertion = assertion.map(|(_, encoded)| encoded.to_vec());
        let (identity, directory) = (self.identity.clone(), Arc::clone(&ctx.directory));
        let (outbound, depth) = (Arc::clone(out), ctx.limits.max_depth);
        let (id, log) = (
            reply.id,
            (ctx.access_log, self.conn_id, reply.op_name, reply.started),
        );
        tokio::spawn(async move {
            let outcome = match wait.await {
                Err(answer) => Outcome::new(answer.code, answer.message),
                Ok(()) => {
                    let cmp = CompareRequest {
                        dn: &dn,
                        ava: meridian_proto::Ava {
                            attr: &attr,
                            value: &value,
                        },
                    };
                    match assertion.as_ref().map(|encoded| {
                        decode_assertion(Some(encoded), meridian_proto::Depth::new(depth))
                    }) {
                        Some(Err(e)) => Outcome::new(
                            ResultCode::PROTOCOL_ERROR,
                            format!("assertion control: {e}"),
                        ),
                        Some(Ok(filter)) => compare(&directory, &identity, &cmp, Some(&filter)),
                        None => compare(&directory, &identity, &cmp, None),
                    }
                }
            };
            let mut batch = ResponseBatch::default();
            let urls = referral_urls(&outcome);
            encode_result(
                &mut batch.bytes,
                id,
                tags::COMPARE_RESPONSE,
                &ldap_result(&outcome, &urls),
            );
            batch.completed = 1;
            outbound.push(&mut batch);
            let (access_log, conn, op_name, started) = log;
            log_access(
                access_log,
                conn,
                id,
                op_name,
                &dn,
                Some(outcome.code),
                started,
            );
        });
        Action::Spawned
    }
}

/// The assertion, then the comparison.
fn compare(
    directory: &Directory,
    identity: &Identity,
    cmp: &CompareRequest<'_>,
    assertion: Option<&Filter<'_>>,
) -> Outcome {
    if let Some(filter) = assertion
        && let Err(outcome) = directory.check_assertion(identity, cmp.dn, filter)
    {
        return outcome;
    }
    directory.compare(identity, cmp)
}
