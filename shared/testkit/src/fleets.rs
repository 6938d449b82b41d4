//! Fleets for tests of what runs in them: a server registers, and a game session is created, only in a fleet that
//! exists and in a location it has, so tests create their fleets first, as an operator would.

use berth_domain::fleet::check::check_create;
use berth_domain::fleet::settings::FleetSettings;
use berth_proto::fleet::v1 as pb;
use berth_store::Store;
use berth_store::fleets::{Created, FleetEventEntry, create_fleet, recent_fleet_events};
use berth_store::keys::FleetKeys;

/// Creates an ANYWHERE fleet (its servers register on their own) with these locations, the first its home; panics
/// when it cannot. `settings` adjusts the request (timeouts, limits) before it is made.
pub async fn anywhere_fleet_with(
    store: &Store,
    fleet_id: &str,
    locations: &[&str],
    settings: impl FnOnce(&mut pb::CreateFleetRequest),
) {
    let mut req = pb::CreateFleetRequest {
        fleet_id: fleet_id.to_owned(),
        compute_type: pb::ComputeType::Anywhere as i32,
        locations: locations
            .iter()
            .map(|location| pb::LocationConfiguration {
                location: (*location).to_owned(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    settings(&mut req);
    let fleet = check_create(&req, &[]).unwrap_or_else(|status| panic!("fleet {fleet_id}: {status:?}"));
    match create_fleet(store, &fleet, 3_600_000).await.expect("fleet created") {
        Created::Created(_) => {}
        Created::Exists => panic!("fleet {fleet_id} exists"),
    }
}

/// Creates an ANYWHERE fleet with these locations, the first its home, and the contract's default settings.
pub async fn anywhere_fleet(store: &Store, fleet_id: &str, locations: &[&str]) {
    anywhere_fleet_with(store, fleet_id, locations, |_| {}).await;
}

/// Writes a fleet's settings as its record keeps them, for tests of the machinery that applies them with deadlines
/// shorter than the contract lets a fleet have (ms where it allows seconds): the scripts read the record, whatever
/// wrote it. What a fleet's configuration gives is tested through FleetService.
pub async fn set_fleet_settings(store: &Store, fleet_id: &str, settings: &FleetSettings) {
    let key = FleetKeys::new(fleet_id).fleet();
    let _: i64 = store
        .query(redis::cmd("HSET").arg(key).arg("set").arg(settings.encode()))
        .await
        .expect("settings written");
}

/// Settings of a fleet whose processes beat every 100 ms and are lost after 3 missed (300 ms), with the contract's
/// defaults otherwise: for tests that wait on the health machinery.
pub fn fast_settings() -> FleetSettings {
    FleetSettings {
        heartbeat_ms: 100,
        unhealthy_after: 3,
        ..FleetSettings::of(&pb::Fleet::default())
    }
}

/// The fleet's latest 20 events about its processes, newest first: those of the fleet's own life (created,
/// deployed, active) left out.
pub async fn process_events(store: &Store, fleet_id: &str) -> Vec<FleetEventEntry> {
    let events = recent_fleet_events(store, fleet_id, 20).await.expect("events readable");
    events
        .into_iter()
        .filter(|event| event.code_name().starts_with("SERVER_PROCESS"))
        .collect()
}
