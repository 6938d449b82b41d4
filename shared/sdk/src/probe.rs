//! Asks a Berth service, without a token, whether it is serving (`grpc.health.v1`) and which services it
//! offers (gRPC reflection v1): what an operator, a load balancer or `make run` checks first.

use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// The health of `service` ("" for the whole process).
pub async fn serving_status(channel: Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    let response = HealthClient::new(channel).check(request).await?;
    Ok(response.into_inner().status())
}

/// The full names of the services the server lists by reflection.
pub async fn list_services(channel: Channel) -> Result<Vec<String>, tonic::Status> {
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::once(request))
        .await?
        .into_inner();
    match responses
        .message()
        .await?
        .and_then(|response| response.message_response)
    {
        Some(MessageResponse::ListServicesResponse(list)) => {
            Ok(list.service.into_iter().map(|service| service.name).collect())
        }
        Some(MessageResponse::ErrorResponse(err)) => Err(tonic::Status::new(err.error_code.into(), err.error_message)),
        _ => Err(tonic::Status::internal("reflection answered without a service list")),
    }
}
