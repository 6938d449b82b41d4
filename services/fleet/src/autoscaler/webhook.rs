//! Webhook policies (Agones' webhook autoscaler): the review POSTed as proto3 JSON to the operator's decision
//! service, and its decision read back. Anything but a 2xx reply holding a decision for this review, in time, is a
//! failed evaluation with the reason said, never a proposal.
//!
//! A call may take up to 30 s, longer than a location's lease: it is made apart from the pass that asks for it, and
//! a later pass of the same location takes its answer ([`Webhooks::answer`]), so that a slow decision service never
//! holds a location's reconciling up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_domain::fleet::check::INSTANCES_MAX;
use berth_domain::scaling::policy::WebhookAnswer;
use berth_proto::fleet::v1 as pb;
use berth_proto::json;
use berth_runtime::sync::lock;

/// Which call: the fleet, the location, the policy and its revision (a policy replaced meanwhile asks again).
pub(crate) type Asking = (String, String, String, u64);

/// Calls made or under way; an answer is kept until a pass takes it, or for a minute.
const ANSWER_KEPT: Duration = Duration::from_secs(60);

type Slot = Arc<Mutex<Option<WebhookAnswer>>>;

/// HTTP clients by the CA bundle they trust ('' for the system roots), so that connections are kept between calls,
/// and the calls made apart from the passes that asked for them.
#[derive(Default)]
pub(crate) struct Webhooks {
    clients: Mutex<HashMap<String, reqwest::Client>>,
    calls: Mutex<HashMap<Asking, (Instant, Slot)>>,
}

impl Webhooks {
    /// The answer of the call `asking` names, once it came; until then `None`, and the call is made (once) with
    /// `review`.
    pub(crate) fn answer(
        self: &Arc<Self>,
        asking: Asking,
        policy: &pb::WebhookPolicy,
        review: pb::ScalingWebhookReview,
    ) -> Option<WebhookAnswer> {
        let mut calls = lock(&self.calls);
        calls.retain(|_, (made, _)| made.elapsed() < ANSWER_KEPT);
        if let Some((_, slot)) = calls.get(&asking) {
            let answered = lock(slot).take();
            if answered.is_some() {
                calls.remove(&asking);
            }
            return answered;
        }
        let slot = Slot::default();
        calls.insert(asking, (Instant::now(), slot.clone()));
        let (webhooks, policy) = (self.clone(), policy.clone());
        tokio::spawn(async move {
            let asked = Instant::now();
            let answer = webhooks.ask(&policy, &review).await;
            crate::metrics::webhook_call(answer.is_ok(), asked.elapsed());
            *lock(&slot) = Some(answer);
        });
        None
    }

    /// Asks `policy`'s service for its decision on `review`.
    async fn ask(&self, policy: &pb::WebhookPolicy, review: &pb::ScalingWebhookReview) -> WebhookAnswer {
        let client = self.client(&policy.ca_bundle_pem)?;
        let body = json::to_json(review).map_err(|err| err.to_string())?;
        let mut request = client
            .post(&policy.url)
            .timeout(Duration::from_millis(u64::from(policy.timeout_ms.max(1))))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if !policy.bearer_token.is_empty() {
            request = request.bearer_auth(&policy.bearer_token);
        }
        let response = request.send().await.map_err(|err| {
            if err.is_timeout() {
                format!("the webhook did not answer within {} ms", policy.timeout_ms)
            } else {
                format!("the webhook could not be called: {err}")
            }
        })?;
        let status = response.status();
        let text = response
            .bytes()
            .await
            .map_err(|err| format!("the webhook's reply could not be read: {err}"))?;
        if !status.is_success() {
            return Err(format!("the webhook answered {status}"));
        }
        let decision: pb::ScalingWebhookDecision =
            json::from_json(&text).map_err(|err| format!("the webhook's reply is {err}"))?;
        if decision.review_id != review.review_id {
            return Err(format!(
                "the webhook answered review {:?}, not {:?}",
                decision.review_id, review.review_id
            ));
        }
        match decision.desired_instances {
            Some(n) if n > INSTANCES_MAX => Err(format!(
                "the webhook proposed {n} instances, more than the {INSTANCES_MAX} a location may have"
            )),
            proposal => Ok(proposal),
        }
    }

    fn client(&self, ca_bundle_pem: &str) -> Result<reqwest::Client, String> {
        let mut clients = lock(&self.clients);
        if let Some(client) = clients.get(ca_bundle_pem) {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder();
        if !ca_bundle_pem.is_empty() {
            let roots = reqwest::Certificate::from_pem_bundle(ca_bundle_pem.as_bytes())
                .map_err(|err| format!("the policy's CA bundle cannot be read: {err}"))?;
            builder = builder.tls_built_in_root_certs(false);
            for root in roots {
                builder = builder.add_root_certificate(root);
            }
        }
        let client = builder
            .build()
            .map_err(|err| format!("no HTTP client for the webhook: {err}"))?;
        clients.insert(ca_bundle_pem.to_owned(), client.clone());
        Ok(client)
    }
}
