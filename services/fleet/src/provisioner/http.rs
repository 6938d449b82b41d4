//! The `http` provisioner: instances are launched and stopped by the operator's own hosting API (as a studio's back
//! end drives ODIN Fleet's REST API), which Berth POSTs proto3 JSON requests to, with a bearer token and a timeout.
//! The contract (paths, messages, how each HTTP status is read) is `proto/berth/fleet/v1/hosting.proto`.
//!
//! The handle of an instance is what the API's launch answered, as it is. The requests that follow carry it and
//! the Berth ids, so that the API finds an instance by either, as a replica that did not launch it, or whose
//! launching replica died before it recorded the handle, needs. One HTTP client serves every request, so that
//! connections to the API are kept and reused.
//!
//! Its parameters (`launch_configuration.provisioner_parameters`) are the API's: passed through unread, checked
//! only for being JSON (`berth_domain::fleet::parameters::passed_through`).

use std::time::Duration;

use berth_proto::fleet::v1 as pb;
use berth_proto::json;
use futures::FutureExt;
use futures::future::BoxFuture;
use prost::{Message, Name};
use reqwest::{StatusCode, Url};

use super::{Instance, LaunchSpec, ProvisionError, Provisioner};

/// How much of a failed answer's body goes into the error, in bytes.
const MESSAGE_MAX: usize = 1024;
/// The longest handle Berth records, in characters (the contract's limit).
const HANDLE_MAX: usize = 1024;

/// Launches instances through an operator's hosting API.
#[derive(Clone, Debug)]
pub struct HttpProvisioner {
    client: reqwest::Client,
    url: Url,
    token: Option<String>,
}

/// Why the client could not be built: TLS could not be set up on this host.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the http provisioner's client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// What the API answered to a request.
enum Answer<T> {
    Done(T),
    /// 404 with a `HostingError`: the API knows no such instance.
    Unknown,
}

/// Why a request failed.
enum Failure {
    /// No answer came, or one that could not be read: the request may or may not have been acted on.
    Lost(String),
    /// The request could not be written, or the API refused or failed it.
    Failed(String),
}

impl Failure {
    fn into_error(self) -> ProvisionError {
        match self {
            Failure::Lost(message) | Failure::Failed(message) => ProvisionError(message),
        }
    }
}

impl HttpProvisioner {
    /// A provisioner over the API at `url`, sending `token` as a bearer token when given, each request answered
    /// within `timeout`.
    pub fn new(url: Url, token: Option<String>, timeout: Duration) -> Result<HttpProvisioner, ClientError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(HttpProvisioner { client, url, token })
    }

    /// POSTs `request` to `<url>/<path>` and reads the answer.
    async fn call<Q, A>(&self, path: &str, request: &Q) -> Result<Answer<A>, Failure>
    where
        Q: Message + Name,
        A: Message + Name + Default,
    {
        let url = format!("{}/{path}", self.url.as_str().trim_end_matches('/'));
        let body = json::to_json(request).map_err(|err| Failure::Failed(err.to_string()))?;
        let mut post = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(token) = &self.token {
            post = post.bearer_auth(token);
        }
        let lost = |err: reqwest::Error| {
            let what = if err.is_timeout() {
                "no answer in time"
            } else {
                "no answer"
            };
            // Without the URL, which may carry credentials: the message goes into fleet events.
            Failure::Lost(format!("hosting API {path}: {what}: {}", causes(&err.without_url())))
        };
        let response = post.send().await.map_err(lost)?;
        let status = response.status();
        let text = response.bytes().await.map_err(lost)?;
        match status {
            status if status.is_success() => {
                let text = if text.iter().all(u8::is_ascii_whitespace) {
                    &b"{}"[..]
                } else {
                    &text
                };
                json::from_json(text)
                    .map(Answer::Done)
                    .map_err(|err| Failure::Lost(format!("hosting API {path}: {status}: {err}")))
            }
            // Only the API's own answer, not the page of a wrong URL, says that an instance is gone.
            StatusCode::NOT_FOUND if path != "launch" && json::from_json::<pb::HostingError>(&text).is_ok() => {
                Ok(Answer::Unknown)
            }
            status => Err(Failure::Failed(match message_of(&text) {
                message if message.is_empty() => format!("hosting API {path}: {status}"),
                message => format!("hosting API {path}: {status}: {message}"),
            })),
        }
    }

    async fn launch_now(&self, spec: &LaunchSpec) -> Result<String, ProvisionError> {
        let request = pb::LaunchInstanceRequest {
            fleet_id: spec.fleet_id.clone(),
            location: spec.location.clone(),
            instance_id: spec.instance_id.clone(),
            instance_type: spec.instance_type.clone(),
            launch_configuration: Some(spec.launch.clone()),
            processes: spec
                .processes
                .iter()
                .map(|process| pb::HostedProcess {
                    game_server_id: process.game_server_id.clone(),
                    env: process.env.iter().cloned().collect(),
                })
                .collect(),
        };
        match self.call::<_, pb::LaunchInstanceResponse>("launch", &request).await {
            Ok(Answer::Done(launched)) if launched.handle.chars().count() <= HANDLE_MAX => Ok(launched.handle),
            Ok(Answer::Done(launched)) => {
                let length = launched.handle.chars().count();
                let message =
                    format!("hosting API launch: answered a handle of {length} characters, at most {HANDLE_MAX}");
                Err(self.unlaunch(spec, message).await)
            }
            Ok(Answer::Unknown) => Err(ProvisionError("hosting API launch: 404 Not Found".into())),
            Err(Failure::Lost(message)) => Err(self.unlaunch(spec, message).await),
            Err(failed) => Err(failed.into_error()),
        }
    }

    /// Stops, by its id, an instance the API may have launched but whose handle Berth cannot record, so that
    /// nothing runs that Berth does not know of; answers the launch's failure.
    async fn unlaunch(&self, spec: &LaunchSpec, message: String) -> ProvisionError {
        let instance = Instance {
            fleet_id: &spec.fleet_id,
            instance_id: &spec.instance_id,
            handle: "",
        };
        if let Err(err) = self.stop_now(instance, true).await {
            tracing::warn!(instance = %spec.instance_id, error = %err, "a launch that failed unanswered is not stopped");
        }
        ProvisionError(message)
    }

    async fn running_now(&self, instance: Instance<'_>) -> Result<u32, ProvisionError> {
        let request = pb::DescribeInstanceRequest {
            fleet_id: instance.fleet_id.to_owned(),
            instance_id: instance.instance_id.to_owned(),
            handle: instance.handle.to_owned(),
        };
        match self.call::<_, pb::DescribeInstanceResponse>("describe", &request).await {
            Ok(Answer::Done(described)) => Ok(described.running_processes),
            Ok(Answer::Unknown) => Ok(0),
            Err(failure) => Err(failure.into_error()),
        }
    }

    async fn stop_now(&self, instance: Instance<'_>, kill: bool) -> Result<(), ProvisionError> {
        let request = pb::StopInstanceRequest {
            fleet_id: instance.fleet_id.to_owned(),
            instance_id: instance.instance_id.to_owned(),
            handle: instance.handle.to_owned(),
            kill,
        };
        match self.call::<_, pb::StopInstanceResponse>("stop", &request).await {
            Ok(Answer::Done(_) | Answer::Unknown) => Ok(()),
            Err(failure) => Err(failure.into_error()),
        }
    }
}

impl Provisioner for HttpProvisioner {
    fn launch<'a>(&'a self, spec: &'a LaunchSpec) -> BoxFuture<'a, Result<String, ProvisionError>> {
        self.launch_now(spec).boxed()
    }

    fn running<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Result<u32, ProvisionError>> {
        self.running_now(instance).boxed()
    }

    /// The hosting API says how many processes run, not how the others ended.
    fn exits<'a>(&'a self, _instance: Instance<'a>) -> BoxFuture<'a, Vec<String>> {
        async { Vec::new() }.boxed()
    }

    fn stop<'a>(&'a self, instance: Instance<'a>, kill: bool) -> BoxFuture<'a, Result<(), ProvisionError>> {
        self.stop_now(instance, kill).boxed()
    }
}

/// An error with its causes, which reqwest keeps out of its own message (e.g. "connection refused").
fn causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// The message of a failed answer: its `HostingError` when it is one, else its text, at most `MESSAGE_MAX` bytes.
fn message_of(body: &[u8]) -> String {
    let text = match json::from_json::<pb::HostingError>(body) {
        Ok(error) if !error.message.is_empty() => error.message,
        _ => String::from_utf8_lossy(body).trim().to_owned(),
    };
    if text.len() <= MESSAGE_MAX {
        return text;
    }
    let mut end = MESSAGE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_answer_says_what_the_api_said() {
        assert_eq!(
            message_of(br#"{"message": "no capacity in eu-central"}"#),
            "no capacity in eu-central"
        );
        assert_eq!(message_of(b" upstream timed out\n"), "upstream timed out");
        assert_eq!(message_of(b""), "");
        let long = "é".repeat(MESSAGE_MAX);
        let cut = message_of(long.as_bytes());
        assert!(
            cut.ends_with('…') && cut.len() <= MESSAGE_MAX + '…'.len_utf8(),
            "{}",
            cut.len()
        );
    }
}
