//! Autoscaling through ScalingService, on a single node and on the cluster: policies put, described and deleted with
//! their limits; a buffer policy keeping idle example game servers (real processes) as sessions start on them; a
//! schedule window raising an ANYWHERE fleet's capacity as it opens; a webhook policy asking an HTTP server the test
//! runs, and failing (an error status, garbage, too late, down) with capacity unchanged; scale-in held by the
//! stabilization window and stopped at the instances hosting games; dynamic standby multiplying its target as the pool
//! drains; two replicas never both evaluating one location; a cron window in a time zone raising capacity at its time;
//! a suspended location left alone until resumed; a server lost bringing the policies on at once; a slow webhook
//! holding no location up.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_runtime::auth::Role;
use berth_store::sessions::{self, NewGameSession};
use berth_testkit::{Reaper, RunningService, SESSION_TIMINGS, TestRedis, token};
use pb::put_scaling_policy_request::Kind;
use tonic::Code;
use tonic_types::StatusExt;

use super::provisioning::{
    Client, Stack, all_ready, client, count, events, example, fleet_id, instances_when, managed, stack_over, when,
};

type Scaler = ScalingServiceClient<berth_sdk::AuthedChannel>;

async fn scaler(service: &RunningService) -> Scaler {
    ScalingServiceClient::new(
        berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap(),
    )
}

async fn stack(redis: &TestRedis) -> Stack {
    stack_over(redis, 1, berth_fleet::FleetArgs::default()).await
}

fn put(fleet_id: &str, name: &str, kind: Kind) -> pb::PutScalingPolicyRequest {
    pb::PutScalingPolicyRequest {
        fleet_id: fleet_id.into(),
        name: name.into(),
        evaluation_interval_seconds: 3600,
        scale_in_stabilization_seconds: Some(0),
        kind: Some(kind),
        ..Default::default()
    }
}

fn buffer(minimum_idle_servers: u32) -> Kind {
    Kind::Buffer(pb::BufferPolicy {
        minimum_idle_servers,
        persistent_idle: true,
        ..Default::default()
    })
}

async fn describe(scaler: &mut Scaler, fleet_id: &str) -> Vec<pb::ScalingPolicy> {
    let request = pb::DescribeScalingPoliciesRequest {
        fleet_id: fleet_id.into(),
        ..Default::default()
    };
    scaler
        .describe_scaling_policies(request)
        .await
        .unwrap()
        .into_inner()
        .policies
}

fn violations(status: &tonic::Status) -> Vec<String> {
    status
        .get_details_bad_request()
        .map(|b| b.field_violations.into_iter().map(|v| v.field).collect())
        .unwrap_or_default()
}

/// The location's desired count as the fleet service describes it.
async fn desired(fleets: &mut Client, fleet_id: &str) -> u32 {
    super::provisioning::location(fleets, fleet_id)
        .await
        .capacity
        .unwrap()
        .desired_instances
}

/// The location's desired count once `done` holds of it (within 30 s).
async fn desired_when(fleets: &Client, fleet_id: &str, what: &str, done: impl Fn(u32) -> bool) -> u32 {
    let read = || {
        let mut fleets = fleets.clone();
        async move { vec![desired(&mut fleets, fleet_id).await] }
    };
    when(what, read, |found| done(found[0])).await[0]
}

fn scaling_actions(seen: &[pb::FleetEvent]) -> Vec<(String, u32, u32)> {
    seen.iter()
        .filter(|e| e.code() == pb::FleetEventCode::ScalingAction)
        .map(|e| {
            let change = e.capacity_change.clone().unwrap_or_default();
            (
                change.policy_name,
                change.previous_desired_instances,
                change.new_desired_instances,
            )
        })
        .collect()
}

/// An ANYWHERE fleet: nothing is launched, the desired count is only published.
fn anywhere(fleet_id: &str, desired: u32) -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        compute_type: pb::ComputeType::Anywhere.into(),
        provisioner: String::new(),
        launch_configuration: None,
        ..managed(fleet_id, "", desired)
    }
}

async fn policies_are_put_described_and_deleted_within_their_limits(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("rules");
    fleets.create_fleet(anywhere(fleet, 0)).await.unwrap();

    let mut bad = put(fleet, "no spaces", buffer(2));
    bad.evaluation_interval_seconds = 5;
    let refused = scaling.put_scaling_policy(bad).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(violations(&refused), ["name", "evaluation_interval_seconds"]);
    let mut elsewhere = put(fleet, "keep", buffer(2));
    elsewhere.location = "mars".into();
    assert_eq!(
        scaling.put_scaling_policy(elsewhere).await.unwrap_err().code(),
        Code::NotFound
    );
    let unknown = put(&fleet_id("nowhere"), "keep", buffer(2));
    assert_eq!(
        scaling.put_scaling_policy(unknown).await.unwrap_err().code(),
        Code::NotFound
    );
    assert!(
        describe(&mut scaling, fleet).await.is_empty(),
        "nothing refused was stored"
    );

    let mut first = put(fleet, "keep", buffer(2));
    first.expected_revision = Some(0);
    let created = scaling
        .put_scaling_policy(first.clone())
        .await
        .unwrap()
        .into_inner()
        .policy
        .unwrap();
    assert_eq!((created.revision, created.evaluation_interval_seconds), (1, 3600));
    assert_eq!(created.status(), pb::ScalingPolicyStatus::Active);
    assert_eq!(
        scaling.put_scaling_policy(first).await.unwrap_err().code(),
        Code::Aborted
    );
    let webhook = Kind::Webhook(pb::WebhookPolicy {
        url: "http://127.0.0.1:9/review".into(),
        bearer_token: "secret".into(),
        ..Default::default()
    });
    let mut replaced = put(fleet, "keep", webhook);
    replaced.expected_revision = Some(1);
    let replaced = scaling
        .put_scaling_policy(replaced)
        .await
        .unwrap()
        .into_inner()
        .policy
        .unwrap();
    assert_eq!(replaced.revision, 2);
    let Some(pb::scaling_policy::Kind::Webhook(shown)) = &replaced.kind else {
        panic!("{replaced:?}")
    };
    assert!(
        shown.bearer_token.is_empty() && shown.has_bearer_token,
        "the token is write-only"
    );
    assert_eq!(shown.timeout_ms, 1000, "the default timeout");

    for n in 1..50 {
        scaling
            .put_scaling_policy(put(fleet, &format!("p{n:02}"), buffer(0)))
            .await
            .unwrap();
    }
    let full = scaling
        .put_scaling_policy(put(fleet, "one-more", buffer(0)))
        .await
        .unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    let mut page = pb::DescribeScalingPoliciesRequest {
        fleet_id: fleet.clone(),
        page_size: 30,
        ..Default::default()
    };
    let first_page = scaling
        .describe_scaling_policies(page.clone())
        .await
        .unwrap()
        .into_inner();
    page.page_token = first_page.next_page_token;
    let second_page = scaling.describe_scaling_policies(page).await.unwrap().into_inner();
    let names: Vec<String> = first_page
        .policies
        .iter()
        .chain(&second_page.policies)
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names.len(), 50);
    assert!(names.is_sorted(), "in name order");
    assert!(second_page.next_page_token.is_empty());

    let stale = pb::DeleteScalingPolicyRequest {
        fleet_id: fleet.clone(),
        name: "keep".into(),
        expected_revision: 1,
    };
    assert_eq!(
        scaling.delete_scaling_policy(stale).await.unwrap_err().code(),
        Code::Aborted
    );
    let delete = pb::DeleteScalingPolicyRequest {
        fleet_id: fleet.clone(),
        name: "keep".into(),
        expected_revision: 2,
    };
    scaling.delete_scaling_policy(delete.clone()).await.unwrap();
    assert_eq!(
        scaling.delete_scaling_policy(delete).await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(describe(&mut scaling, fleet).await.len(), 49);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn policies_are_put_described_and_deleted_within_their_limits_on_a_single_node() {
    policies_are_put_described_and_deleted_within_their_limits(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn policies_are_put_described_and_deleted_within_their_limits_on_a_cluster() {
    policies_are_put_described_and_deleted_within_their_limits(TestRedis::cluster()).await;
}

async fn a_buffer_policy_keeps_its_idle_servers_as_sessions_start(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("buffered");
    let _reaper = Reaper(vec![fleet.clone()]);
    fleets.create_fleet(managed(fleet, &example(), 0)).await.unwrap();
    // Two idle servers kept beside the busy ones, plus one; evaluated hourly, so only demand brings it on sooner.
    scaling
        .put_scaling_policy(put(fleet, "buffer", buffer(2)))
        .await
        .unwrap();
    let ready = instances_when(&stack.store, fleet, "3 ready", all_ready(3)).await;

    // Games start on two of them: the buffer is used up, and two more servers come at once.
    play_on(&stack, fleet, &ready[..2]).await;
    instances_when(&stack.store, fleet, "5 ready", all_ready(5)).await;
    assert_eq!(desired(&mut fleets, fleet).await, 5);
    let actions = scaling_actions(&events(&mut fleets, fleet).await);
    // The two games start one after the other: a pass may come between them, so the buffer takes the fleet from 3
    // to 5 in one step or in two.
    let steps: Vec<(u32, u32)> = actions
        .iter()
        .map(|(policy, from, to)| {
            assert_eq!(policy, "buffer", "each step names the policy that won: {actions:?}");
            (*from, *to)
        })
        .collect();
    assert!(
        steps == [(0, 3), (3, 5)] || steps == [(0, 3), (3, 4), (4, 5)],
        "from 0 to 3, then up to 5: {actions:?}"
    );
    let [policy] = &describe(&mut scaling, fleet).await[..] else {
        panic!("one policy")
    };
    assert_eq!(policy.last_proposed_instances, Some(5));
    assert!(policy.last_scaling_action_time.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_buffer_policy_keeps_its_idle_servers_as_sessions_start_on_a_single_node() {
    a_buffer_policy_keeps_its_idle_servers_as_sessions_start(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_buffer_policy_keeps_its_idle_servers_as_sessions_start_on_a_cluster() {
    a_buffer_policy_keeps_its_idle_servers_as_sessions_start(TestRedis::cluster()).await;
}

fn seconds_from_now(seconds: i64) -> prost_types::Timestamp {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    prost_types::Timestamp {
        seconds: now.as_secs() as i64 + seconds,
        nanos: 0,
    }
}

async fn a_schedule_window_raises_capacity_while_it_is_in_force(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("scheduled");
    fleets.create_fleet(anywhere(fleet, 1)).await.unwrap();
    let (start, end) = (seconds_from_now(3), seconds_from_now(8));
    let window = pb::ScheduleWindow {
        start_time: Some(start),
        end_time: Some(end),
        ..Default::default()
    };
    let schedule = Kind::Schedule(pb::SchedulePolicy {
        window: Some(window),
        desired_instances: 6,
    });
    // Evaluated hourly: only the window opening and closing brings it on.
    scaling
        .put_scaling_policy(put(fleet, "launch-night", schedule))
        .await
        .unwrap();
    desired_when(&fleets, fleet, "raised by the window", |n| n == 6).await;
    let seen = events(&mut fleets, fleet).await;
    let raised = seen
        .iter()
        .find(|e| e.code() == pb::FleetEventCode::ScalingAction)
        .unwrap();
    assert!(
        raised.event_time.unwrap().seconds >= start.seconds,
        "not before the window opened"
    );
    // Outside its window it proposes nothing, which leaves the count where it is.
    tokio::time::sleep(Duration::from_secs(
        (end.seconds - seconds_from_now(0).seconds).max(0) as u64 + 1,
    ))
    .await;
    assert_eq!(desired(&mut fleets, fleet).await, 6);
    let [policy] = &describe(&mut scaling, fleet).await[..] else {
        panic!("one policy")
    };
    assert_eq!(policy.last_proposed_instances, None);
    assert_eq!(policy.status_message, "outside its window");
    assert_eq!(
        scaling_actions(&events(&mut fleets, fleet).await),
        [("launch-night".to_owned(), 1, 6)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_schedule_window_raises_capacity_while_it_is_in_force_on_a_single_node() {
    a_schedule_window_raises_capacity_while_it_is_in_force(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_schedule_window_raises_capacity_while_it_is_in_force_on_a_cluster() {
    a_schedule_window_raises_capacity_while_it_is_in_force(TestRedis::cluster()).await;
}

/// A review the webhook was sent, with its Authorization header.
type Reviewed = (Option<String>, pb::ScalingWebhookReview);

/// What the webhook the test runs answers.
#[derive(Clone, Copy)]
enum Answer {
    Propose(u32),
    Status(u16),
    /// 200 with a body that is no decision.
    Garbage,
    /// A proposal, 2 s late.
    Late(u32),
}

/// What the webhook the test runs was sent, and what it answers.
#[derive(Clone)]
struct Hook {
    reviews: Arc<Mutex<Vec<Reviewed>>>,
    answer: Arc<Mutex<Answer>>,
}

impl Hook {
    fn answering(answer: Answer) -> Hook {
        Hook {
            reviews: Arc::default(),
            answer: Arc::new(Mutex::new(answer)),
        }
    }
}

async fn serve(hook: Hook) -> (String, tokio::task::JoinHandle<()>) {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    let route = axum::routing::post(move |headers: HeaderMap, body: Bytes| {
        let hook = hook.clone();
        async move {
            let review: pb::ScalingWebhookReview = berth_proto::json::from_json(&body).unwrap();
            let bearer = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
            hook.reviews.lock().unwrap().push((bearer, review.clone()));
            let answer = *hook.answer.lock().unwrap();
            let propose = |n: u32| {
                let decision = pb::ScalingWebhookDecision {
                    review_id: review.review_id.clone(),
                    desired_instances: Some(n),
                };
                (StatusCode::OK, berth_proto::json::to_json(&decision).unwrap())
            };
            match answer {
                Answer::Propose(n) => propose(n),
                Answer::Status(code) => (StatusCode::from_u16(code).unwrap(), b"no".to_vec()),
                Answer::Garbage => (StatusCode::OK, b"<html>scale up!</html>".to_vec()),
                Answer::Late(n) => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    propose(n)
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/review", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/review", route);
    (
        url,
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
    )
}

/// The fleet's only policy, once it is in ERROR for a reason that says `why` (within 30 s).
async fn in_error(scaling: &Scaler, fleet_id: &str, why: &str) -> pb::ScalingPolicy {
    let read = || {
        let mut scaling = scaling.clone();
        async move { describe(&mut scaling, fleet_id).await }
    };
    let found = when("the policy in ERROR", read, |found| {
        found[0].status() == pb::ScalingPolicyStatus::Error && found[0].status_message.contains(why)
    })
    .await;
    found[0].clone()
}

async fn a_webhook_policy_asks_its_server_and_changes_nothing_once_it_fails(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("hooked");
    fleets.create_fleet(anywhere(fleet, 1)).await.unwrap();
    let hook = Hook::answering(Answer::Propose(4));
    let (url, server) = serve(hook.clone()).await;
    let webhook = Kind::Webhook(pb::WebhookPolicy {
        url,
        bearer_token: "s3cret".into(),
        timeout_ms: 500,
        ..Default::default()
    });
    let mut policy = put(fleet, "ask", webhook);
    policy.evaluation_interval_seconds = 10;
    scaling.put_scaling_policy(policy.clone()).await.unwrap();
    desired_when(&fleets, fleet, "the webhook's proposal", |n| n == 4).await;
    {
        let reviews = hook.reviews.lock().unwrap();
        let (bearer, review) = &reviews[0];
        assert_eq!(bearer.as_deref(), Some("Bearer s3cret"));
        assert_eq!(
            (review.fleet_id.as_str(), review.location.as_str()),
            (fleet.as_str(), "local")
        );
        assert_eq!(review.policy_name, "ask");
        assert_eq!(review.capacity.unwrap().desired_instances, 1);
        assert!(review.utilization.is_some());
    }

    // It answers 500, then garbage, then too late: each evaluation fails, says why, and the desired count stays.
    for (answer, why) in [
        (Answer::Status(500), "500"),
        (Answer::Garbage, "reply is not a berth.fleet.v1.ScalingWebhookDecision"),
        (Answer::Late(9), "did not answer within 500 ms"),
    ] {
        *hook.answer.lock().unwrap() = answer;
        scaling.put_scaling_policy(policy.clone()).await.unwrap();
        let errored = in_error(&scaling, fleet, why).await;
        assert_eq!(errored.last_proposed_instances, None);
        assert_eq!(desired(&mut fleets, fleet).await, 4);
    }

    // Down altogether: still ERROR, still 4.
    server.abort();
    let _ = server.await;
    scaling.put_scaling_policy(policy).await.unwrap();
    in_error(&scaling, fleet, "could not be called").await;
    assert_eq!(desired(&mut fleets, fleet).await, 4);
    let seen = events(&mut fleets, fleet).await;
    let failures: Vec<&pb::FleetEvent> = seen
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::ScalingPolicyFailed)
        .collect();
    assert_eq!(failures.len(), 4, "one per new failure: {failures:#?}");
    assert_eq!(scaling_actions(&seen), [("ask".to_owned(), 1, 4)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_policy_asks_its_server_and_changes_nothing_once_it_fails_on_a_single_node() {
    a_webhook_policy_asks_its_server_and_changes_nothing_once_it_fails(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_policy_asks_its_server_and_changes_nothing_once_it_fails_on_a_cluster() {
    a_webhook_policy_asks_its_server_and_changes_nothing_once_it_fails(TestRedis::cluster()).await;
}

/// Starts a protected game session on each of `instances`' first server.
async fn play_on(stack: &Stack, fleet_id: &str, instances: &[berth_store::instances::InstanceRecord]) {
    for instance in instances {
        let server = instance.servers[0].id.clone();
        let session_id = berth_domain::game_session::new_game_session_id(fleet_id);
        let new = NewGameSession {
            game_server_id: Some(&server),
            protected: Some(true),
            ..NewGameSession::new(&session_id, fleet_id, 4)
        };
        sessions::create_game_session(&stack.store, &new, &SESSION_TIMINGS)
            .await
            .unwrap();
    }
}

async fn a_quiet_period_scales_in_only_after_the_stabilization_window_and_not_below_games(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("quiet");
    let _reaper = Reaper(vec![fleet.clone()]);
    fleets.create_fleet(managed(fleet, &example(), 2)).await.unwrap();
    let ready = instances_when(&stack.store, fleet, "2 ready", all_ready(2)).await;
    play_on(&stack, fleet, &ready).await;

    // A rule that always asks for none, and an event that asks for 5 while its window is in force; scale-in waits
    // 8 s after the last time 5 won.
    let stabilization_s = 8;
    let (start, end) = (seconds_from_now(2), seconds_from_now(6));
    let mut event = put(
        fleet,
        "event",
        Kind::Schedule(pb::SchedulePolicy {
            window: Some(pb::ScheduleWindow {
                start_time: Some(start),
                end_time: Some(end),
                ..Default::default()
            }),
            desired_instances: 5,
        }),
    );
    event.scale_in_stabilization_seconds = Some(stabilization_s);
    let mut none = put(
        fleet,
        "none",
        Kind::RuleBased(pb::RuleBasedPolicy {
            metric: pb::ScalingMetric::ActiveInstances.into(),
            comparison_operator: pb::ComparisonOperator::GreaterThanOrEqualTo.into(),
            threshold: 0.0,
            evaluation_periods: 1,
            adjustment_type: pb::AdjustmentType::ExactCapacity.into(),
            scaling_adjustment: 0,
            cooldown_seconds: Some(0),
        }),
    );
    none.evaluation_interval_seconds = 10;
    scaling.put_scaling_policy(none).await.unwrap();
    scaling.put_scaling_policy(event).await.unwrap();

    desired_when(&fleets, fleet, "raised by the event", |n| n == 5).await;
    desired_when(&fleets, fleet, "lowered after the window", |n| n < 5).await;
    let seen = events(&mut fleets, fleet).await;
    let lowered = seen
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::ScalingAction)
        .find(|e| e.capacity_change.as_ref().unwrap().previous_desired_instances == 5)
        .unwrap();
    assert!(
        lowered.event_time.unwrap().seconds >= end.seconds + i64::from(stabilization_s) - 1,
        "not within the stabilization window after the event ended: {lowered:?}"
    );
    assert_eq!(
        lowered.capacity_change.as_ref().unwrap().new_desired_instances,
        2,
        "the two instances hosting games stay"
    );
    assert_eq!(
        scaling_actions(&seen),
        [("event".to_owned(), 2, 5), ("none".to_owned(), 5, 2)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quiet_period_scales_in_only_after_the_stabilization_window_and_not_below_games_on_a_single_node() {
    a_quiet_period_scales_in_only_after_the_stabilization_window_and_not_below_games(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quiet_period_scales_in_only_after_the_stabilization_window_and_not_below_games_on_a_cluster() {
    a_quiet_period_scales_in_only_after_the_stabilization_window_and_not_below_games(TestRedis::cluster()).await;
}

async fn dynamic_standby_multiplies_the_target_as_the_pool_drains(redis: TestRedis) {
    let stack = stack(&redis).await;
    let mut fleets = client(&stack.fleet[0]).await;
    let fleet = &fleet_id("standby");
    let _reaper = Reaper(vec![fleet.clone()]);
    let mut request = managed(fleet, &example(), 0);
    request.locations[0].standby = Some(pb::StandbyConfiguration {
        standby_servers: 2,
        dynamic_standby: Some(pb::DynamicStandby {
            enabled: true,
            ..Default::default()
        }),
        scheduled_windows: vec![],
    });
    fleets.create_fleet(request).await.unwrap();
    let ready = instances_when(&stack.store, fleet, "the 2 standing by", all_ready(2)).await;
    assert_eq!(desired(&mut fleets, fleet).await, 2);

    // Both taken: none of the 2 is left, under 5 % of the target, so it is multiplied by 4 (PlayFab's default).
    play_on(&stack, fleet, &ready).await;
    desired_when(&fleets, fleet, "2 busy and 8 standing by", |n| n == 10).await;
    let request = pb::GetFleetUtilizationRequest {
        fleet_id: fleet.clone(),
        location: "local".into(),
    };
    let read = fleets.get_fleet_utilization(request).await.unwrap().into_inner();
    assert_eq!(read.utilization.unwrap().locations[0].standby_target_servers, 8);
    let actions = scaling_actions(&events(&mut fleets, fleet).await);
    assert_eq!(actions[0], ("standby".to_owned(), 0, 2));
    assert_eq!(actions.last().unwrap().2, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamic_standby_multiplies_the_target_as_the_pool_drains_on_a_single_node() {
    dynamic_standby_multiplies_the_target_as_the_pool_drains(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamic_standby_multiplies_the_target_as_the_pool_drains_on_a_cluster() {
    dynamic_standby_multiplies_the_target_as_the_pool_drains(TestRedis::cluster()).await;
}

async fn two_replicas_never_both_evaluate_a_location(redis: TestRedis) {
    let stack = stack_over(&redis, 2, berth_fleet::FleetArgs::default()).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[1]).await);
    let fleet = &fleet_id("shared");
    fleets.create_fleet(anywhere(fleet, 1)).await.unwrap();
    let hook = Hook::answering(Answer::Propose(3));
    let (url, _server) = serve(hook.clone()).await;
    let mut policy = put(
        fleet,
        "ask",
        Kind::Webhook(pb::WebhookPolicy {
            url,
            ..Default::default()
        }),
    );
    policy.evaluation_interval_seconds = 10;
    scaling.put_scaling_policy(policy).await.unwrap();
    desired_when(&fleets, fleet, "the webhook's proposal", |n| n == 3).await;
    tokio::time::sleep(Duration::from_secs(25)).await;
    let times: Vec<i64> = hook
        .reviews
        .lock()
        .unwrap()
        .iter()
        .map(|(_, review)| {
            let at = review.review_time.unwrap();
            at.seconds * 1000 + i64::from(at.nanos) / 1_000_000
        })
        .collect();
    assert!(times.len() >= 2, "evaluated at its interval: {times:?}");
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= 10_000,
            "two evaluations within one interval, as if two replicas acted: {times:?}"
        );
    }
    assert_eq!(
        scaling_actions(&events(&mut fleets, fleet).await),
        [("ask".to_owned(), 1, 3)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_never_both_evaluate_a_location_on_a_single_node() {
    two_replicas_never_both_evaluate_a_location(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_never_both_evaluate_a_location_on_a_cluster() {
    two_replicas_never_both_evaluate_a_location(TestRedis::cluster()).await;
}

async fn a_cron_window_raises_capacity_at_its_time_in_its_zone(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("cron");
    let _reaper = Reaper(vec![fleet.clone()]);
    fleets.create_fleet(managed(fleet, &example(), 0)).await.unwrap();
    // The next whole minute, as read in Kolkata (UTC+05:30): a window of a minute from then.
    let opens = (seconds_from_now(0).seconds / 60 + 1) * 60;
    let kolkata = opens + 5 * 3600 + 1800;
    let (minute, hour) = ((kolkata / 60) % 60, (kolkata / 3600) % 24);
    let schedule = Kind::Schedule(pb::SchedulePolicy {
        window: Some(pb::ScheduleWindow {
            cron: format!("{minute} {hour} * * *"),
            duration_seconds: 60,
            time_zone: "Asia/Kolkata".into(),
            ..Default::default()
        }),
        desired_instances: 2,
    });
    scaling.put_scaling_policy(put(fleet, "daily", schedule)).await.unwrap();
    let ready = || async {
        berth_store::instances::read_instances(&stack.store, fleet, "local")
            .await
            .unwrap()
            .instances
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(100);
    while !all_ready(2)(&ready().await) {
        assert!(tokio::time::Instant::now() < deadline, "never raised at its cron time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seen = events(&mut fleets, fleet).await;
    let raised = seen
        .iter()
        .find(|e| e.code() == pb::FleetEventCode::ScalingAction)
        .unwrap();
    assert!(
        raised.event_time.unwrap().seconds >= opens,
        "not before its time: {raised:?}"
    );
    assert_eq!(scaling_actions(&seen), [("daily".to_owned(), 0, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cron_window_raises_capacity_at_its_time_in_its_zone_on_a_single_node() {
    a_cron_window_raises_capacity_at_its_time_in_its_zone(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cron_window_raises_capacity_at_its_time_in_its_zone_on_a_cluster() {
    a_cron_window_raises_capacity_at_its_time_in_its_zone(TestRedis::cluster()).await;
}

async fn a_suspended_location_is_not_scaled_until_resumed(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("suspended");
    fleets.create_fleet(anywhere(fleet, 0)).await.unwrap();
    let suspend = pb::SuspendAutoscalingRequest {
        fleet_id: fleet.clone(),
        locations: vec![],
    };
    fleets.suspend_autoscaling(suspend).await.unwrap();
    scaling.put_scaling_policy(put(fleet, "keep", buffer(2))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        desired(&mut fleets, fleet).await,
        0,
        "nothing scales a suspended location"
    );
    let [policy] = &describe(&mut scaling, fleet).await[..] else {
        panic!("one policy")
    };
    assert_eq!(policy.status(), pb::ScalingPolicyStatus::Suspended);
    assert_eq!(policy.last_evaluation_time, None);
    let resume = pb::ResumeAutoscalingRequest {
        fleet_id: fleet.clone(),
        locations: vec![],
    };
    fleets.resume_autoscaling(resume).await.unwrap();
    desired_when(&fleets, fleet, "scaled once resumed", |n| n == 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_suspended_location_is_not_scaled_until_resumed_on_a_single_node() {
    a_suspended_location_is_not_scaled_until_resumed(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_suspended_location_is_not_scaled_until_resumed_on_a_cluster() {
    a_suspended_location_is_not_scaled_until_resumed(TestRedis::cluster()).await;
}

async fn a_server_lost_brings_the_policies_on_at_once(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("lossy");
    let _reaper = Reaper(vec![fleet.clone()]);
    fleets.create_fleet(managed(fleet, &example(), 2)).await.unwrap();
    let ready = instances_when(&stack.store, fleet, "2 ready", all_ready(2)).await;
    // Asked hourly: only a demand signal asks it again within the test.
    let hook = Hook::answering(Answer::Propose(2));
    let (url, _server) = serve(hook.clone()).await;
    let webhook = Kind::Webhook(pb::WebhookPolicy {
        url,
        ..Default::default()
    });
    scaling.put_scaling_policy(put(fleet, "ask", webhook)).await.unwrap();
    let reviews = || {
        let hook = hook.clone();
        async move { hook.reviews.lock().unwrap().clone() }
    };
    when("the first review", reviews, |found| found.len() == 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        hook.reviews.lock().unwrap().len(),
        1,
        "not asked again without a reason"
    );

    let killed = seconds_from_now(0).seconds;
    // SAFETY: kill(2) of a game server this test's fleet launched; no memory is involved.
    unsafe {
        libc::kill(super::provisioning::pid(&ready[0]), libc::SIGKILL);
    }
    let asked = when("asked again on the loss", reviews, |found| found.len() >= 2).await;
    assert!(asked[1].1.review_time.unwrap().seconds >= killed);
    let crashed = events(&mut fleets, fleet).await;
    assert_eq!(count(&crashed, pb::FleetEventCode::ServerProcessCrashed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_lost_brings_the_policies_on_at_once_on_a_single_node() {
    a_server_lost_brings_the_policies_on_at_once(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_lost_brings_the_policies_on_at_once_on_a_cluster() {
    a_server_lost_brings_the_policies_on_at_once(TestRedis::cluster()).await;
}

async fn a_slow_webhook_holds_no_location_up(redis: TestRedis) {
    let stack = stack(&redis).await;
    let (mut fleets, mut scaling) = (client(&stack.fleet[0]).await, scaler(&stack.fleet[0]).await);
    let fleet = &fleet_id("patient");
    let _reaper = Reaper(vec![fleet.clone()]);
    fleets.create_fleet(managed(fleet, &example(), 1)).await.unwrap();
    instances_when(&stack.store, fleet, "1 ready", all_ready(1)).await;
    // It answers in 2 s, twice the stack's lease: the location goes on being reconciled meanwhile.
    let hook = Hook::answering(Answer::Late(3));
    let (url, _server) = serve(hook.clone()).await;
    let webhook = Kind::Webhook(pb::WebhookPolicy {
        url,
        timeout_ms: 5000,
        ..Default::default()
    });
    scaling.put_scaling_policy(put(fleet, "ask", webhook)).await.unwrap();
    super::provisioning::set_desired(&mut fleets, fleet, 2).await;
    instances_when(&stack.store, fleet, "2 ready", all_ready(2)).await;
    instances_when(&stack.store, fleet, "3 ready, as the webhook said", all_ready(3)).await;
    let actions = scaling_actions(&events(&mut fleets, fleet).await);
    assert_eq!(actions, [("ask".to_owned(), 2, 3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_webhook_holds_no_location_up_on_a_single_node() {
    a_slow_webhook_holds_no_location_up(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_webhook_holds_no_location_up_on_a_cluster() {
    a_slow_webhook_holds_no_location_up(TestRedis::cluster()).await;
}
