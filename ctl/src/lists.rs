//! The records `get`, `describe` and `apply` read: every record of a kind, page by page until the last, or one
//! record whole.

use std::future::Future;

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::session::v1 as session;
use berth_proto::session::v1::describe_player_sessions_request::Selector;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_sdk::AuthedChannel;

use crate::context::{Context, Service};
use crate::error::CtlError;

/// Records a page at a time: `page` answers one page and the token of the next ('' after the last).
pub async fn all_pages<T, F, Fut>(ctx: &Context, service: Service, mut page: F) -> Result<Vec<T>, CtlError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), tonic::Status>>,
{
    let mut records = Vec::new();
    let mut token = String::new();
    loop {
        let (found, next) = page(token).await.map_err(ctx.refusal(service))?;
        records.extend(found);
        if next.is_empty() {
            return Ok(records);
        }
        token = next;
    }
}

/// Every fleet, in id order.
pub async fn fleets(ctx: &Context, client: &FleetServiceClient<AuthedChannel>) -> Result<Vec<fleet::Fleet>, CtlError> {
    all_pages(ctx, Service::Fleet, |page_token| {
        let mut client = client.clone();
        async move {
            let request = fleet::ListFleetsRequest {
                page_token,
                ..Default::default()
            };
            let page = client.list_fleets(request).await?.into_inner();
            Ok((page.fleets, page.next_page_token))
        }
    })
    .await
}

/// Every queue, in name order.
pub async fn queues(
    ctx: &Context,
    client: &QueueServiceClient<AuthedChannel>,
) -> Result<Vec<placement::Queue>, CtlError> {
    all_pages(ctx, Service::Placement, |page_token| {
        let mut client = client.clone();
        async move {
            let request = placement::ListQueuesRequest {
                page_token,
                ..Default::default()
            };
            let page = client.list_queues(request).await?.into_inner();
            Ok((page.queues, page.next_page_token))
        }
    })
    .await
}

/// Every scaling policy of `fleet_id`.
pub async fn policies(
    ctx: &Context,
    client: &ScalingServiceClient<AuthedChannel>,
    fleet_id: &str,
) -> Result<Vec<fleet::ScalingPolicy>, CtlError> {
    all_pages(ctx, Service::Fleet, |page_token| {
        let (mut client, fleet_id) = (client.clone(), fleet_id.to_owned());
        async move {
            let request = fleet::DescribeScalingPoliciesRequest {
                fleet_id,
                page_token,
                ..Default::default()
            };
            let page = client.describe_scaling_policies(request).await?.into_inner();
            Ok((page.policies, page.next_page_token))
        }
    })
    .await
}

/// One fleet, as DescribeFleet answers it.
pub async fn fleet(ctx: &Context, fleet_id: &str) -> Result<fleet::Fleet, CtlError> {
    let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
    let request = fleet::DescribeFleetRequest {
        fleet_id: fleet_id.to_owned(),
    };
    let answer = client
        .describe_fleet(request)
        .await
        .map_err(ctx.refusal(Service::Fleet))?;
    answer
        .into_inner()
        .fleet
        .ok_or_else(|| missing(Service::Fleet, "fleet"))
}

/// The instances of a fleet's location (only `instance_id`, when it names one).
pub async fn instances(
    ctx: &Context,
    fleet_id: &str,
    location: &str,
    instance_id: String,
) -> Result<Vec<fleet::Instance>, CtlError> {
    let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
    let request = fleet::DescribeInstancesRequest {
        fleet_id: fleet_id.to_owned(),
        location: location.to_owned(),
        instance_id,
    };
    let answer = client
        .describe_instances(request)
        .await
        .map_err(ctx.refusal(Service::Fleet))?;
    Ok(answer.into_inner().instances)
}

/// Every player session `selector` picks, every page read.
pub async fn player_sessions(ctx: &Context, selector: Selector) -> Result<Vec<session::PlayerSession>, CtlError> {
    let client = PlayerSessionServiceClient::new(ctx.channel(Service::Session).await?);
    all_pages(ctx, Service::Session, |page_token| {
        let (mut client, selector) = (client.clone(), selector.clone());
        async move {
            let request = session::DescribePlayerSessionsRequest {
                selector: Some(selector),
                page_token,
                ..Default::default()
            };
            let page = client.describe_player_sessions(request).await?.into_inner();
            Ok((page.player_sessions, page.next_page_token))
        }
    })
    .await
}

/// A record the service should have sent and did not: a fault of the service, said as such.
pub fn missing(service: Service, what: &str) -> CtlError {
    CtlError::Refused {
        service: service.name(),
        code: tonic::Code::Internal,
        message: format!("the answer holds no {what}"),
    }
}
