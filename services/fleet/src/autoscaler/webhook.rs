//! Webhook policies (Agones' webhook autoscaler): the review POSTed as proto3 JSON to the operator's decision
//! service, and its decision read back. Anything but a 2xx reply holding a decision for this review, in time, is a
//! failed evaluation with the reason said, never a proposal.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use berth_domain::fleet::check::INSTANCES_MAX;
use berth_domain::scaling::policy::WebhookAnswer;
use berth_proto::fleet::v1 as pb;
use berth_proto::json;

/// HTTP clients by the CA bundle they trust ('' for the system roots), so that connections are kept between calls.
#[derive(Default)]
pub(crate) struct Webhooks {
    clients: Mutex<HashMap<String, reqwest::Client>>,
}

impl Webhooks {
    /// Asks `policy`'s service for its decision on `review`.
    pub(crate) async fn ask(&self, policy: &pb::WebhookPolicy, review: &pb::ScalingWebhookReview) -> WebhookAnswer {
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
        let mut clients = self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
