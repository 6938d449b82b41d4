//! Proto3 JSON for Berth's messages, for contracts spoken over plain HTTP instead of gRPC (the fleet service's
//! `http` provisioner, webhooks): the canonical mapping of https://protobuf.dev/programming-guides/json/
//! (lowerCamelCase names, fields at their default omitted, enums by name, 64-bit integers as strings,
//! `google.protobuf.Struct` and the other well-known types in their own forms). Each message is mapped through its
//! descriptor in the embedded descriptor set, so that the JSON follows the `.proto` files without hand-written
//! serde that could drift from them.

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions};
use tonic::codegen::http;

/// Why a message could not be written as JSON or read from it.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// The embedded descriptor set does not describe the message: a build of this crate out of step with itself.
    #[error("{0} is not described by Berth's descriptor set")]
    Undescribed(String),
    /// The message holds what JSON cannot (a non-finite number in a `google.protobuf.Value`).
    #[error("{message} cannot be written as JSON: {problem}")]
    Unwritable { message: String, problem: String },
    /// The text is not the message in proto3 JSON.
    #[error("not a {message} in proto3 JSON: {problem}")]
    Unreadable { message: String, problem: String },
}

/// `message` in proto3 JSON.
pub fn to_json<M: Message + Name>(message: &M) -> Result<Vec<u8>, JsonError> {
    write(message, &SerializeOptions::new())
}

/// `message` in proto3 JSON as a grpc-gateway configured like Agones' SDK server writes it (the JSON its HTTP
/// clients read): field names as in the `.proto` (snake_case) and every field, set or not.
pub fn to_gateway_json<M: Message + Name>(message: &M) -> Result<Vec<u8>, JsonError> {
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    write(message, &options)
}

/// The HTTP status grpc-gateway answers a gRPC code with (499 for CANCELLED, as it writes a client's going away).
pub fn gateway_http_status(code: tonic::Code) -> u16 {
    use tonic::Code;
    match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::Unauthenticated => 401,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    }
}

/// An error as grpc-gateway writes it: `{"code": <gRPC code>, "message": …, "details": []}`.
pub fn gateway_error_json(status: &tonic::Status) -> serde_json::Value {
    serde_json::json!({"code": status.code() as i32, "message": status.message(), "details": []})
}

/// `status` as grpc-gateway answers it over HTTP: the HTTP status of its code, [`gateway_error_json`] as the body.
pub fn gateway_error_response(status: &tonic::Status) -> http::Response<String> {
    let mut response = http::Response::new(gateway_error_json(status).to_string());
    *response.status_mut() = http::StatusCode::from_u16(gateway_http_status(status.code()))
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn write<M: Message + Name>(message: &M, options: &SerializeOptions) -> Result<Vec<u8>, JsonError> {
    let descriptor = descriptor::<M>()?;
    let unwritable = |problem: String| JsonError::Unwritable {
        message: M::full_name(),
        problem,
    };
    let mut dynamic = DynamicMessage::new(descriptor);
    dynamic
        .transcode_from(message)
        .map_err(|err| unwritable(err.to_string()))?;
    let mut out = serde_json::Serializer::new(Vec::new());
    dynamic
        .serialize_with_options(&mut out, options)
        .map_err(|err| unwritable(err.to_string()))?;
    Ok(out.into_inner())
}

/// The message `json` holds in proto3 JSON. Fields it does not know are skipped, so that the other side of a
/// contract may send more than this build knows.
pub fn from_json<M: Message + Name + Default>(json: &[u8]) -> Result<M, JsonError> {
    read(json, false)
}

/// As [`from_json`], but a field the message does not have is an error: for text a person wrote (a manifest), where
/// an unknown field is a typo to point out rather than something newer to pass over.
pub fn from_json_strict<M: Message + Name + Default>(json: &[u8]) -> Result<M, JsonError> {
    read(json, true)
}

fn read<M: Message + Name + Default>(json: &[u8], deny_unknown_fields: bool) -> Result<M, JsonError> {
    let descriptor = descriptor::<M>()?;
    let unreadable = |problem: String| JsonError::Unreadable {
        message: M::full_name(),
        problem,
    };
    let mut input = serde_json::Deserializer::from_slice(json);
    let options = DeserializeOptions::new().deny_unknown_fields(deny_unknown_fields);
    let dynamic = DynamicMessage::deserialize_with_options(descriptor, &mut input, &options)
        .map_err(|err| unreadable(err.to_string()))?;
    input.end().map_err(|err| unreadable(err.to_string()))?;
    dynamic.transcode_to().map_err(|err| unreadable(err.to_string()))
}

fn descriptor<M: Name>() -> Result<MessageDescriptor, JsonError> {
    static POOL: OnceLock<Option<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET).ok())
        .as_ref()
        .and_then(|pool| pool.get_message_by_name(&M::full_name()))
        .ok_or_else(|| JsonError::Undescribed(M::full_name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::v1 as pb;
    use prost_types::value::Kind;
    use prost_types::{Struct, Value};

    #[test]
    fn follows_the_proto3_json_mapping() {
        let parameters = Struct {
            fields: [(
                "image".to_owned(),
                Value {
                    kind: Some(Kind::StringValue("arena:7".into())),
                },
            )]
            .into(),
        };
        let request = pb::LaunchInstanceRequest {
            fleet_id: "arena".into(),
            instance_id: "i-1".into(),
            launch_configuration: Some(pb::ServerLaunchConfiguration {
                launch_path: "/srv/arena".into(),
                parameters: String::new(),
                provisioner_parameters: Some(parameters),
            }),
            processes: vec![pb::HostedProcess {
                game_server_id: "i-1-0".into(),
                env: [("BERTH_FLEET_ID".to_owned(), "arena".to_owned())].into(),
            }],
            ..Default::default()
        };
        let json = to_json(&request).unwrap();
        let text: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            text,
            serde_json::json!({
                "fleetId": "arena",
                "instanceId": "i-1",
                "launchConfiguration": {"launchPath": "/srv/arena", "provisionerParameters": {"image": "arena:7"}},
                "processes": [{"gameServerId": "i-1-0", "env": {"BERTH_FLEET_ID": "arena"}}],
            })
        );
        assert_eq!(from_json::<pb::LaunchInstanceRequest>(&json).unwrap(), request);
    }

    #[test]
    fn reads_proto_names_skips_unknown_fields_and_refuses_the_malformed() {
        let read: pb::DescribeInstanceResponse = from_json(br#"{"running_processes": 2, "state": "RUNNING"}"#).unwrap();
        assert_eq!(read.running_processes, 2);
        assert_eq!(
            from_json::<pb::StopInstanceResponse>(b"{}").unwrap(),
            pb::StopInstanceResponse {}
        );
        let err = from_json::<pb::DescribeInstanceResponse>(br#"{"runningProcesses": -1}"#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("not a berth.fleet.v1.DescribeInstanceResponse in proto3 JSON"),
            "{err}"
        );
        assert!(from_json::<pb::LaunchInstanceResponse>(b"{} trailing").is_err());
    }

    #[test]
    fn the_gateway_form_names_fields_as_the_proto_does_and_writes_every_one() {
        let server = crate::agones::sdk::GameServer {
            object_meta: Some(crate::agones::sdk::game_server::ObjectMeta {
                name: "gs-1".into(),
                creation_timestamp: 1_700_000_000,
                ..Default::default()
            }),
            ..Default::default()
        };
        let text: serde_json::Value = serde_json::from_slice(&to_gateway_json(&server).unwrap()).unwrap();
        assert_eq!(text["object_meta"]["name"], "gs-1");
        assert_eq!(text["object_meta"]["creation_timestamp"], "1700000000");
        assert_eq!(text["object_meta"]["labels"], serde_json::json!({}));
        assert_eq!(text["object_meta"]["uid"], "");
        assert_eq!(text["status"], serde_json::Value::Null, "an unset message stays null");
    }

    #[test]
    fn a_non_finite_number_is_an_error() {
        let launch = pb::ServerLaunchConfiguration {
            provisioner_parameters: Some(Struct {
                fields: [(
                    "cpus".to_owned(),
                    Value {
                        kind: Some(Kind::NumberValue(f64::NAN)),
                    },
                )]
                .into(),
            }),
            ..Default::default()
        };
        assert!(matches!(to_json(&launch), Err(JsonError::Unwritable { .. })));
    }
}
