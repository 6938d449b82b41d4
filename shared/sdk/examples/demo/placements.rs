//! The queue side of the demo: a matchmaker that, as a game back end calling GameLift's
//! StartGameSessionPlacement, asks a game session queue for each match and leaves the choice of fleet and location
//! to Berth, from its players' latencies and the fleets' prices.
//!
//! It creates two fleets of example game servers through FleetService (`process` provisioner), each kept by a buffer
//! scaling policy: `demo-eu` in location `eu-local` on On-Demand instances, and `demo-us` in `us-local` on Spot
//! instances that still cost more than eu's; and the queue over both, which orders by latency, then cost. While a placement is young no
//! player may be more than 60 ms from the location; after 5 s the cap relaxes to 150 ms, and after 30 s the
//! placement times out. Every few seconds the matchmaker starts a placement for 2–4 players near one location and
//! far from the other, so each match has a location it should land in; now and then one player is far from both,
//! so that no location passes the first cap and the placement waits until it relaxes. A watch of the queue's
//! placement events prints each outcome as it comes and connects the players of each fulfilled placement to their
//! server with their player sessions; the server ends the game session when the last one leaves. The queue's
//! metrics make a status line.

use std::ops::RangeInclusive;
use std::time::{Duration, SystemTime};

use berth_proto::fleet::v1 as fpb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::watch_game_session_placements_response::Kind;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::{PlayerSession, PlayerSessionStatus};
use berth_sdk::AuthedChannel;
use rand::Rng;

use super::{
    MAX_PLAYERS, address, create_or_resize_fleet, end_abandoned_session, follow, process_fleet, seat_players, watched,
};

/// A destination of the queue: a fleet of example game servers in one location, and what its instances cost.
struct Destination {
    fleet_id: &'static str,
    location: &'static str,
    balancing_strategy: fpb::BalancingStrategy,
    /// Price of an On-Demand instance-hour, in millionths of the currency.
    on_demand_hourly_cost_micros: u64,
    /// Price of a Spot instance-hour, in millionths of the currency; 0 without a Spot offer.
    spot_hourly_cost_micros: u64,
}

/// The queue's fleets, in its destination order. The prices differ so that the queue's COST criterion, and the
/// "cheapest" of each outcome, mean something: eu's On-Demand instances cost less than us's Spot ones.
const DESTINATIONS: [Destination; 2] = [
    Destination {
        fleet_id: "demo-eu",
        location: "eu-local",
        balancing_strategy: fpb::BalancingStrategy::OnDemandOnly,
        on_demand_hourly_cost_micros: 80_000,
        spot_hourly_cost_micros: 0,
    },
    Destination {
        fleet_id: "demo-us",
        location: "us-local",
        balancing_strategy: fpb::BalancingStrategy::SpotPreferred,
        on_demand_hourly_cost_micros: 150_000,
        spot_hourly_cost_micros: 95_000,
    },
];

/// Most latency any player may have to a location while a placement is young, ms.
const STRICT_LATENCY_MS: u32 = 60;
/// How long the strict cap holds, s.
const STRICT_SECONDS: u32 = 5;
/// Most latency any player may have afterwards, until the placement times out, ms.
const RELAXED_LATENCY_MS: u32 = 150;
/// How long a placement may wait, s.
const TIMEOUT_SECONDS: u32 = 30;
/// Copied by the queue into each of its placement events, as a downstream router would use it.
const CUSTOM_EVENT_DATA: &str = "make-run:demo-matchmaker";
/// A player's latency to the location their match is near, ms: within the strict cap.
const NEAR_MS: RangeInclusive<u32> = 15..=55;
/// A player's latency to a location they are far from, ms: above the strict cap, within the relaxed one.
const FAR_MS: RangeInclusive<u32> = 70..=140;

/// The demo fleets' autoscaling: half as many idle servers as busy ones and at least one, plus one; looked at every
/// 10 s and at once when placements wait or the buffer runs low, and scaled in a minute after demand falls. Its
/// SCALING_ACTION events show among the fleet events.
fn buffer(fleet_id: &str) -> fpb::PutScalingPolicyRequest {
    fpb::PutScalingPolicyRequest {
        fleet_id: fleet_id.into(),
        name: "demo-buffer".into(),
        evaluation_interval_seconds: 10,
        scale_in_stabilization_seconds: Some(60),
        kind: Some(fpb::put_scaling_policy_request::Kind::Buffer(fpb::BufferPolicy {
            idle_threshold_percent: 50,
            minimum_idle_servers: 1,
            persistent_idle: true,
            maximum_running_servers: 0,
        })),
        ..Default::default()
    }
}

/// The fleets the queue places in, to follow their events.
pub fn fleet_ids<'a>() -> impl Iterator<Item = &'a str> {
    DESTINATIONS.iter().map(|destination| destination.fleet_id)
}

/// Creates the queue's fleets, `instances` example game servers (`launch_path`) each, each kept by a buffer policy,
/// and the queue over them; or gives those an earlier run left this capacity and configuration.
pub async fn create_queue_and_fleets(
    fleets: &mut FleetServiceClient<AuthedChannel>,
    scaling: &mut ScalingServiceClient<AuthedChannel>,
    queues: &mut QueueServiceClient<AuthedChannel>,
    queue: &str,
    launch_path: &str,
    instances: u32,
) -> Result<(), tonic::Status> {
    for destination in &DESTINATIONS {
        let name = format!("make run: example game servers in {}", destination.location);
        let request = fpb::CreateFleetRequest {
            instance_definitions: vec![fpb::InstanceDefinition {
                instance_type: "local".into(),
                on_demand_hourly_cost_micros: destination.on_demand_hourly_cost_micros,
                spot_hourly_cost_micros: destination.spot_hourly_cost_micros,
            }],
            balancing_strategy: destination.balancing_strategy as i32,
            ..process_fleet(
                destination.fleet_id,
                &name,
                launch_path,
                destination.location,
                instances,
            )
        };
        create_or_resize_fleet(fleets, request).await?;
        scaling.put_scaling_policy(buffer(destination.fleet_id)).await?;
    }
    let destinations: Vec<_> = fleet_ids()
        .map(|fleet_id| pb::QueueDestination {
            fleet_id: fleet_id.into(),
        })
        .collect();
    let policies = vec![
        pb::PlayerLatencyPolicy {
            maximum_individual_player_latency_ms: STRICT_LATENCY_MS,
            policy_duration_seconds: STRICT_SECONDS,
        },
        pb::PlayerLatencyPolicy {
            maximum_individual_player_latency_ms: RELAXED_LATENCY_MS,
            policy_duration_seconds: 0,
        },
    ];
    let priority = pb::PriorityConfiguration {
        priority_order: vec![pb::PriorityType::Latency as i32, pb::PriorityType::Cost as i32],
        location_order: Vec::new(),
    };
    let request = pb::CreateQueueRequest {
        name: queue.into(),
        destinations: destinations.clone(),
        timeout_seconds: TIMEOUT_SECONDS,
        player_latency_policies: policies.clone(),
        priority_configuration: Some(priority.clone()),
        custom_event_data: CUSTOM_EVENT_DATA.into(),
        ..Default::default()
    };
    match queues.create_queue(request).await {
        Ok(_) => Ok(()),
        Err(status) if status.code() == tonic::Code::AlreadyExists => {
            let request = pb::UpdateQueueRequest {
                name: queue.into(),
                destinations: Some(pb::QueueDestinations { destinations }),
                timeout_seconds: Some(TIMEOUT_SECONDS),
                player_latency_policies: Some(pb::PlayerLatencyPolicies { policies }),
                priority_configuration: Some(priority),
                filter_configuration: Some(pb::FilterConfiguration::default()),
                custom_event_data: Some(CUSTOM_EVENT_DATA.into()),
                maximum_pending_placements: Some(0),
                expected_revision: 0,
            };
            queues.update_queue(request).await.map(drop)
        }
        Err(status) => Err(status),
    }
}

/// A matchmaker that places its matches through the queue.
#[derive(Clone)]
pub struct QueueMatchmaker {
    queue: String,
    placements: PlacementServiceClient<AuthedChannel>,
    game_sessions: GameSessionServiceClient<AuthedChannel>,
    /// Begins this run's placement ids: a placement id stays taken while its placement is retained (a day), so a
    /// second run must not reuse the first's.
    run: String,
}

impl QueueMatchmaker {
    /// A matchmaker for `queue`, whose placement ids are new to the deployment.
    pub fn new(
        queue: String,
        placements: PlacementServiceClient<AuthedChannel>,
        game_sessions: GameSessionServiceClient<AuthedChannel>,
    ) -> QueueMatchmaker {
        let run = format!("pl-{:06x}", rand::rng().random_range(0..0x100_0000));
        QueueMatchmaker {
            queue,
            placements,
            game_sessions,
            run,
        }
    }

    /// Starts the placement of one match; its outcome comes on the watch.
    pub async fn start(mut self, number: u64) {
        let placement_id = format!("{}-{number}", self.run);
        let (players, player_latencies) = players_of(&placement_id);
        let request = pb::StartGameSessionPlacementRequest {
            placement_id: placement_id.clone(),
            queue_name: self.queue.clone(),
            maximum_player_session_count: MAX_PLAYERS,
            game_session_name: placement_id.clone(),
            player_latencies,
            desired_player_sessions: players,
            ..Default::default()
        };
        if let Err(status) = self.placements.start_game_session_placement(request).await {
            println!("  {placement_id}: could not start its placement: {}", status.message());
        }
    }

    /// Prints the outcome of each placement of the queue as it ends, and seats the players of each one fulfilled.
    pub async fn watch(self) {
        let open = |cursor| {
            let mut placements = self.placements.clone();
            let request = pb::WatchGameSessionPlacementsRequest {
                queue_names: vec![self.queue.clone()],
                event_types: [
                    pb::PlacementEventType::Fulfilled,
                    pb::PlacementEventType::Cancelled,
                    pb::PlacementEventType::TimedOut,
                    pb::PlacementEventType::Failed,
                ]
                .map(|kind| kind as i32)
                .to_vec(),
                after_cursor: cursor,
                ..Default::default()
            };
            async move { placements.watch_game_session_placements(request).await }
        };
        let on_outcome = |event: pb::GameSessionPlacementEvent| {
            let placement = event.placement.unwrap_or_default();
            println!("{}", outcome_line(&placement));
            if placement.status() == pb::PlacementStatus::Fulfilled {
                tokio::spawn(seat(self.game_sessions.clone(), placement));
            }
        };
        let read = watched!(pb::WatchGameSessionPlacementsResponse, Kind);
        follow("placement events", open, read, on_outcome).await;
    }

    /// The queue's status line, over GetQueueMetrics' default window (the last 5 minutes).
    pub async fn metrics_line(&mut self) -> String {
        let request = pb::GetQueueMetricsRequest {
            queue_name: self.queue.clone(),
            window_seconds: 0,
        };
        let metrics = match self.placements.get_queue_metrics(request).await {
            Ok(response) => response.into_inner().metrics.unwrap_or_default(),
            Err(status) => return format!("  {}: metrics unreadable ({})", self.queue, status.message()),
        };
        let by_location = metrics
            .succeeded_by_location
            .iter()
            .map(|count| format!("{} {}", count.location, count.placements_succeeded))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "  {} (last 5 min): started {} · succeeded {} ({by_location}) · timed out {} · pending {} · fulfilled \
             wait p50 {} ms, p95 {} ms · first choice out of capacity {} · lowest latency {} · cheapest {}",
            self.queue,
            metrics.placements_started,
            metrics.placements_succeeded,
            metrics.placements_timed_out,
            metrics.queue_depth,
            metrics.fulfilled_wait_time_p50_ms,
            metrics.fulfilled_wait_time_p95_ms,
            metrics.first_choice_out_of_capacity,
            metrics.lowest_latency_placements,
            metrics.lowest_price_placements,
        )
    }
}

/// The players of a match and their latencies to each location: near the location the match is near and far from
/// the other; one in four matches has a player far from both, whom no location suits until the cap relaxes.
fn players_of(placement_id: &str) -> (Vec<pb::DesiredPlayerSession>, Vec<pb::PlayerLatency>) {
    let mut rng = rand::rng();
    let count = rng.random_range(2..=MAX_PLAYERS);
    let near = rng.random_range(0..DESTINATIONS.len());
    let far_from_both = rng.random_ratio(1, 4).then(|| rng.random_range(1..=count));
    let mut players = Vec::new();
    let mut latencies = Vec::new();
    for player in 1..=count {
        let player_id = format!("{placement_id}-p{player}");
        for (index, destination) in DESTINATIONS.iter().enumerate() {
            let range = if index == near && far_from_both != Some(player) {
                NEAR_MS
            } else {
                FAR_MS
            };
            latencies.push(pb::PlayerLatency {
                player_id: player_id.clone(),
                location: destination.location.into(),
                latency_ms: rng.random_range(range),
            });
        }
        players.push(pb::DesiredPlayerSession {
            player_id,
            player_data: String::new(),
        });
    }
    (players, latencies)
}

/// One line for a placement that has ended: where it went and why there, how many attempts it took, how long it
/// waited, and its players' highest latency to each location, which tells whether it had to wait for the cap to
/// relax.
fn outcome_line(placement: &pb::GameSessionPlacement) -> String {
    let status = placement.status().as_str_name().trim_start_matches("PLACEMENT_STATUS_");
    let yes_no = |flag: bool| if flag { "yes" } else { "no" };
    let outcome = if placement.status() == pb::PlacementStatus::Fulfilled {
        format!(
            "{} ({}) · first choice {} · lowest latency {} · cheapest {}",
            placement.location,
            placement.fleet_id,
            placement
                .first_choice_outcome()
                .as_str_name()
                .trim_start_matches("FIRST_CHOICE_OUTCOME_"),
            yes_no(placement.lowest_latency),
            yes_no(placement.lowest_price),
        )
    } else {
        let reason = placement
            .status_reason()
            .as_str_name()
            .trim_start_matches("PLACEMENT_STATUS_REASON_");
        format!("{reason} {}", placement.status_message).trim_end().to_owned()
    };
    let highest = DESTINATIONS
        .iter()
        .map(|destination| {
            let highest = placement
                .player_latencies
                .iter()
                .filter(|latency| latency.location == destination.location)
                .map(|latency| latency.latency_ms)
                .max()
                .unwrap_or_default();
            format!("{} {highest}", destination.location)
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "  {} {status} {outcome} · attempts {} · waited {} ms · {} players, highest latency {highest} ms",
        placement.placement_id,
        placement.attempt_count,
        waited(placement).as_millis(),
        // One latency per player and location.
        placement.player_latencies.len() / DESTINATIONS.len(),
    )
}

/// How long a placement waited, from its start to its end.
fn waited(placement: &pb::GameSessionPlacement) -> Duration {
    let time = |at: Option<prost_types::Timestamp>| at.and_then(|at| SystemTime::try_from(at).ok());
    match (time(placement.start_time), time(placement.end_time)) {
        (Some(start), Some(end)) => end.duration_since(start).unwrap_or_default(),
        _ => Duration::ZERO,
    }
}

/// Connects a fulfilled placement's players to its server with their player sessions. A game session none of them
/// got into is ended, since its server would host it until a last player left.
async fn seat(mut game_sessions: GameSessionServiceClient<AuthedChannel>, placement: pb::GameSessionPlacement) {
    let id = &placement.placement_id;
    let Some((host, port)) = address(placement.endpoint) else {
        println!("  {id}: its game session has no usable endpoint; ending it");
        return end_abandoned_session(&mut game_sessions, &placement.game_session_id).await;
    };
    // The player sessions as the players hold them: RESERVED together with the game session.
    let players: Vec<PlayerSession> = placement
        .placed_player_sessions
        .iter()
        .map(|placed| PlayerSession {
            player_session_id: placed.player_session_id.clone(),
            player_id: placed.player_id.clone(),
            game_session_id: placement.game_session_id.clone(),
            fleet_id: placement.fleet_id.clone(),
            location: placement.location.clone(),
            status: PlayerSessionStatus::Reserved as i32,
            ..Default::default()
        })
        .collect();
    if seat_players(id, &host, port, &players, Duration::ZERO).await == 0 {
        end_abandoned_session(&mut game_sessions, &placement.game_session_id).await;
    }
}
