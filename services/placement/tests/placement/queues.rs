//! QueueService through real gRPC against a real Redis: queues as records — created over existing fleets, described,
//! listed a page at a time, updated by racing callers without losing a change, deleted at a revision — and every
//! refusal changing nothing.

use std::collections::BTreeSet;

use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::{self as pb};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_testkit::{RunningService, TestRedis, anywhere_fleet, spawn_service, token};
use tokio::task::JoinSet;
use tonic::Code;
use tonic_types::StatusExt;

type Client = QueueServiceClient<AuthedChannel>;

/// A placement service over `redis` with fleets arena-eu and arena-us; the service, and a client as `role`.
async fn queues(redis: &TestRedis, role: Role) -> (RunningService, Client) {
    let store = Store::connect(&redis.config()).await.unwrap();
    for fleet_id in ["arena-eu", "arena-us"] {
        anywhere_fleet(&store, fleet_id, &["local"]).await;
    }
    let args = berth_placement::PlacementArgs {
        claim_timeout_ms: 60_000,
        claim_sweep_ms: 1000,
        ..Default::default()
    };
    let service = spawn_service(berth_placement::service(store.clone(), &args), store).await;
    let channel = berth_sdk::connect(&service.endpoint(), &token(role, None))
        .await
        .unwrap();
    (service, QueueServiceClient::new(channel))
}

fn create(name: &str, fleets: &[&str]) -> pb::CreateQueueRequest {
    pb::CreateQueueRequest {
        name: name.into(),
        destinations: fleets
            .iter()
            .map(|fleet_id| pb::QueueDestination {
                fleet_id: (*fleet_id).into(),
            })
            .collect(),
        ..Default::default()
    }
}

async fn describe(client: &mut Client, name: &str) -> Result<pb::Queue, tonic::Status> {
    let request = pb::DescribeQueueRequest { name: name.into() };
    Ok(client.describe_queue(request).await?.into_inner().queue.unwrap())
}

fn fields(status: &tonic::Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad = status.get_details_bad_request().expect("field violations attached");
    bad.field_violations.into_iter().map(|f| f.field).collect()
}

async fn queues_are_records_changed_one_at_a_time(redis: TestRedis) {
    let (_service, mut client) = queues(&redis, Role::Operator).await;
    let created = client
        .create_queue(create("ranked", &["arena-eu", "arena-us"]))
        .await
        .unwrap()
        .into_inner()
        .queue
        .unwrap();
    assert_eq!((created.revision, created.timeout_seconds), (1, 600));
    assert_eq!(created.create_time, created.update_time);
    assert_eq!(describe(&mut client, "ranked").await.unwrap(), created);
    let again = client.create_queue(create("ranked", &["arena-eu"])).await.unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);

    // Refusals change nothing: an unknown fleet, a broken limit.
    let unknown = client
        .create_queue(create("casual", &["arena-eu", "nowhere"]))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(unknown.message().contains("nowhere"), "{}", unknown.message());
    let bad = pb::CreateQueueRequest {
        timeout_seconds: 5,
        ..create("casual.eu", &[])
    };
    let err = client.create_queue(bad).await.unwrap_err();
    assert_eq!(fields(&err), ["name", "destinations", "timeout_seconds"]);
    assert_eq!(
        describe(&mut client, "casual").await.unwrap_err().code(),
        Code::NotFound
    );

    // Eight updates race, each computed from the queue it read: every one lands, each raising the revision once.
    let mut racing = JoinSet::new();
    for task in 0..8u32 {
        let mut client = client.clone();
        let request = pb::UpdateQueueRequest {
            name: "ranked".into(),
            timeout_seconds: (task % 2 == 0).then_some(100 + task),
            custom_event_data: (task % 2 == 1).then(|| format!("team {task}")),
            ..Default::default()
        };
        racing.spawn(async move { client.update_queue(request).await.map(drop) });
    }
    while let Some(outcome) = racing.join_next().await {
        outcome.unwrap().unwrap();
    }
    let raced = describe(&mut client, "ranked").await.unwrap();
    assert_eq!(raced.revision, 9);
    assert!(raced.timeout_seconds >= 100 && raced.custom_event_data.starts_with("team "));

    // A pinned revision that is not the queue's is ABORTED; an update that changes nothing raises nothing; a
    // destination that does not exist is NOT_FOUND and changes nothing.
    let pinned = pb::UpdateQueueRequest {
        name: "ranked".into(),
        timeout_seconds: Some(60),
        expected_revision: 3,
        ..Default::default()
    };
    assert_eq!(client.update_queue(pinned).await.unwrap_err().code(), Code::Aborted);
    let same = pb::UpdateQueueRequest {
        name: "ranked".into(),
        custom_event_data: Some(raced.custom_event_data.clone()),
        ..Default::default()
    };
    let unchanged = client.update_queue(same).await.unwrap().into_inner().queue.unwrap();
    assert_eq!(unchanged.revision, 9);
    let elsewhere = pb::UpdateQueueRequest {
        name: "ranked".into(),
        destinations: Some(pb::QueueDestinations {
            destinations: create("", &["arena-us", "gone"]).destinations,
        }),
        ..Default::default()
    };
    assert_eq!(client.update_queue(elsewhere).await.unwrap_err().code(), Code::NotFound);
    let reordered = pb::UpdateQueueRequest {
        name: "ranked".into(),
        destinations: Some(pb::QueueDestinations {
            destinations: create("", &["arena-us", "arena-eu"]).destinations,
        }),
        expected_revision: 9,
        ..Default::default()
    };
    let updated = client
        .update_queue(reordered)
        .await
        .unwrap()
        .into_inner()
        .queue
        .unwrap();
    assert_eq!(updated.revision, 10);
    assert_eq!(updated.destinations[0].fleet_id, "arena-us");
    let (created_at, updated_at) = (updated.create_time.unwrap(), updated.update_time.unwrap());
    assert!(
        (updated_at.seconds, updated_at.nanos) > (created_at.seconds, created_at.nanos),
        "the change is dated"
    );

    // Deleted only at the revision asked for.
    let stale = pb::DeleteQueueRequest {
        name: "ranked".into(),
        force: false,
        expected_revision: 9,
    };
    assert_eq!(client.delete_queue(stale).await.unwrap_err().code(), Code::Aborted);
    let delete = pb::DeleteQueueRequest {
        name: "ranked".into(),
        force: false,
        expected_revision: 10,
    };
    let deleted = client.delete_queue(delete.clone()).await.unwrap().into_inner();
    assert_eq!(deleted.cancelled_placement_count, 0);
    assert_eq!(
        describe(&mut client, "ranked").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(client.delete_queue(delete).await.unwrap_err().code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_records_changed_one_at_a_time_on_a_single_node() {
    queues_are_records_changed_one_at_a_time(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_records_changed_one_at_a_time_on_a_cluster() {
    queues_are_records_changed_one_at_a_time(TestRedis::cluster()).await;
}

async fn pages_list_every_queue_once_in_name_order(redis: TestRedis) {
    let (_service, mut client) = queues(&redis, Role::Operator).await;
    let mut names = BTreeSet::new();
    for n in 0..25 {
        let name = format!("queue-{:02}", (n * 7) % 25);
        client.create_queue(create(&name, &["arena-eu"])).await.unwrap();
        names.insert(name);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_queues(pb::ListQueuesRequest {
                page_size: 7,
                page_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.queues.len() <= 7);
        seen.extend(page.queues.into_iter().map(|queue| queue.name));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, names.into_iter().collect::<Vec<_>>());
    let forged = pb::ListQueuesRequest {
        page_size: 7,
        page_token: "elsewhere.queue-03".into(),
    };
    assert_eq!(fields(&client.list_queues(forged).await.unwrap_err()), ["page_token"]);
    let huge = pb::ListQueuesRequest {
        page_size: 1001,
        page_token: String::new(),
    };
    assert_eq!(fields(&client.list_queues(huge).await.unwrap_err()), ["page_size"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_list_every_queue_once_in_name_order_on_a_single_node() {
    pages_list_every_queue_once_in_name_order(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_list_every_queue_once_in_name_order_on_a_cluster() {
    pages_list_every_queue_once_in_name_order(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_the_operators_alone() {
    let redis = TestRedis::single();
    let (_service, mut client) = queues(&redis, Role::Client).await;
    let err = client.create_queue(create("ranked", &["arena-eu"])).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
}
