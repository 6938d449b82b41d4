//! Every record of a kind, read page by page until the last: what `get` prints and what `apply` compares with.

use std::future::Future;

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
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
