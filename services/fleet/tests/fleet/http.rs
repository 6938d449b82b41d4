//! Fleets whose instances the `http` provisioner launches through an operator's hosting API: a real HTTP server run
//! by the test, speaking the contract of `proto/berth/fleet/v1/hosting.proto` in proto3 JSON, that itself starts
//! example game servers as OS processes with the environment Berth hands it; they register with a real health
//! replica, on a single node and on the cluster.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use berth_domain::stored::InstanceState;
use berth_fleet::provisioner::http::HttpProvisioner;
use berth_fleet::provisioner::{Instance, LaunchSpec, ProcessSpec, Provisioner};
use berth_proto::fleet::v1 as pb;
use berth_proto::json;
use berth_testkit::{Reaper, TestRedis};
use prost::{Message, Name};
use prost_types::value::Kind;
use prost_types::{Struct, Value};

use super::provisioning::{
    Client, Stack, all_ready, client, count, events, example, fleet_id, instances_when, location, managed, set_desired,
    stack_over,
};

const TOKEN: &str = "hosting-secret";

/// The operator's hosting API: it starts an instance's processes on this host, and answers for them by the handle it
/// gave at launch or by Berth's ids. A launch whose `provisioner_parameters` hold `fail` is answered with a 500
/// carrying that text, as a hosting API out of capacity would; one whose parameters hold `answer: late` is
/// answered 2 s after its processes start. While `refusing_stops` holds a text, every stop is answered with a 500
/// carrying it, as a hosting API that lost its host would.
#[derive(Default)]
struct Hosting {
    state: Mutex<Hosted>,
}

#[derive(Default)]
struct Hosted {
    instances: Vec<HostedInstance>,
    launches: usize,
    /// Every stop request, in order.
    stops: Vec<pb::StopInstanceRequest>,
    /// The launch configuration of the last launch, as it came.
    last_launch: Option<pb::ServerLaunchConfiguration>,
    /// Requests refused for their token.
    unauthorized: usize,
    refusing_stops: Option<String>,
}

struct HostedInstance {
    handle: String,
    fleet_id: String,
    instance_id: String,
    processes: Vec<Child>,
}

impl HostedInstance {
    /// Its processes still running (those that exited are reaped).
    fn running(&mut self) -> u32 {
        let running = self
            .processes
            .iter_mut()
            .map(|child| matches!(child.try_wait(), Ok(None)));
        running.filter(|runs| *runs).count() as u32
    }
}

type Refusal = (StatusCode, String);

impl Hosting {
    fn state(&self) -> std::sync::MutexGuard<'_, Hosted> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The request in `body`, if it comes with the bearer token.
    fn read<Q: Message + Name + Default>(&self, headers: &HeaderMap, body: &[u8]) -> Result<Q, Refusal> {
        let bearer = headers.get("authorization").and_then(|value| value.to_str().ok());
        if bearer != Some(&format!("Bearer {TOKEN}")) {
            self.state().unauthorized += 1;
            return Err((StatusCode::UNAUTHORIZED, "bearer token refused".into()));
        }
        json::from_json(body).map_err(|err| (StatusCode::BAD_REQUEST, err.to_string()))
    }

    fn launch(&self, request: pb::LaunchInstanceRequest) -> Result<pb::LaunchInstanceResponse, Refusal> {
        let mut state = self.state();
        state.launches += 1;
        let launch = request.launch_configuration.unwrap_or_default();
        state.last_launch = Some(launch.clone());
        if let Some(message) = parameter(&launch, "fail") {
            return Err((StatusCode::INTERNAL_SERVER_ERROR, message.to_owned()));
        }
        let mut processes = Vec::new();
        for process in &request.processes {
            let port = berth_testkit::free_port();
            let started = Command::new(&launch.launch_path)
                .args(launch.parameters.split_whitespace())
                .envs(&process.env)
                .env("BERTH_SDK_PORT", port.to_string())
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match started {
                Ok(child) => processes.push(child),
                Err(err) => {
                    return Err((
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("cannot start {}: {err}", launch.launch_path),
                    ));
                }
            }
        }
        let handle = format!("host-{}", state.launches);
        state.instances.push(HostedInstance {
            handle: handle.clone(),
            fleet_id: request.fleet_id,
            instance_id: request.instance_id,
            processes,
        });
        Ok(pb::LaunchInstanceResponse { handle })
    }

    fn describe(&self, request: pb::DescribeInstanceRequest) -> Result<pb::DescribeInstanceResponse, Refusal> {
        let mut state = self.state();
        let instance = find(&mut state, &request.fleet_id, &request.instance_id, &request.handle)?;
        Ok(pb::DescribeInstanceResponse {
            running_processes: instance.running(),
        })
    }

    fn stop(&self, request: pb::StopInstanceRequest) -> Result<pb::StopInstanceResponse, Refusal> {
        let mut state = self.state();
        state.stops.push(request.clone());
        if let Some(message) = &state.refusing_stops {
            return Err((StatusCode::INTERNAL_SERVER_ERROR, message.clone()));
        }
        let instance = find(&mut state, &request.fleet_id, &request.instance_id, &request.handle)?;
        let signal = if request.kill { libc::SIGKILL } else { libc::SIGTERM };
        for child in instance.processes.iter_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                // SAFETY: kill(2) of a child this server started and has not reaped; no memory is involved.
                unsafe {
                    libc::kill(child.id() as i32, signal);
                }
            }
        }
        Ok(pb::StopInstanceResponse {})
    }

    /// The handle this server answered to the launch of `instance_id`.
    fn handle_of(&self, instance_id: &str) -> Option<String> {
        let state = self.state();
        let found = state.instances.iter().find(|i| i.instance_id == instance_id);
        found.map(|i| i.handle.clone())
    }

    /// The running processes of the instance Berth calls `instance_id`.
    fn running(&self, instance_id: &str) -> u32 {
        let mut state = self.state();
        let found = state.instances.iter_mut().find(|i| i.instance_id == instance_id);
        found.map_or(0, HostedInstance::running)
    }

    /// Stop requests so far for `fleet_id`.
    fn stops(&self, fleet_id: &str) -> Vec<pb::StopInstanceRequest> {
        let state = self.state();
        state.stops.iter().filter(|s| s.fleet_id == fleet_id).cloned().collect()
    }
}

/// An instance by its handle, or, with none, by Berth's ids; a handle must name the instance the ids do.
fn find<'a>(
    state: &'a mut Hosted,
    fleet_id: &str,
    instance_id: &str,
    handle: &str,
) -> Result<&'a mut HostedInstance, Refusal> {
    let found = state.instances.iter_mut().find(|i| {
        if handle.is_empty() {
            i.fleet_id == fleet_id && i.instance_id == instance_id
        } else {
            i.handle == handle
        }
    });
    match found {
        Some(instance) if instance.instance_id != instance_id => Err((
            StatusCode::BAD_REQUEST,
            format!("{handle} is not instance {instance_id}"),
        )),
        Some(instance) => Ok(instance),
        None => Err((StatusCode::NOT_FOUND, format!("no instance {instance_id}"))),
    }
}

/// A string of a launch's provisioner parameters.
fn parameter<'a>(launch: &'a pb::ServerLaunchConfiguration, name: &str) -> Option<&'a str> {
    let value = launch.provisioner_parameters.as_ref()?.fields.get(name)?;
    match &value.kind {
        Some(Kind::StringValue(text)) => Some(text),
        _ => None,
    }
}

/// An answer in proto3 JSON: the response, or a `HostingError`.
fn answer<A: Message + Name>(result: Result<A, Refusal>) -> (StatusCode, Vec<u8>) {
    match result {
        Ok(response) => (StatusCode::OK, json::to_json(&response).unwrap()),
        Err((status, message)) => (status, json::to_json(&pb::HostingError { message }).unwrap()),
    }
}

async fn launch(State(hosting): State<Arc<Hosting>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    let request = hosting.read::<pb::LaunchInstanceRequest>(&headers, &body);
    let late = request.as_ref().is_ok_and(|request| {
        let launch = request.launch_configuration.as_ref();
        launch.and_then(|launch| parameter(launch, "answer")) == Some("late")
    });
    let launched = request.and_then(|request| hosting.launch(request));
    if late {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    answer(launched)
}

async fn describe(State(hosting): State<Arc<Hosting>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    answer(
        hosting
            .read(&headers, &body)
            .and_then(|request| hosting.describe(request)),
    )
}

async fn stop(State(hosting): State<Arc<Hosting>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    answer(hosting.read(&headers, &body).and_then(|request| hosting.stop(request)))
}

/// Serves a hosting API on a free port of 127.0.0.1 under `/hosting`; answers its state and its URL.
async fn serve_hosting() -> (Arc<Hosting>, reqwest::Url) {
    let hosting = Arc::new(Hosting::default());
    let routes = Router::new()
        .route("/hosting/launch", post(launch))
        .route("/hosting/describe", post(describe))
        .route("/hosting/stop", post(stop))
        .with_state(hosting.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hosting/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, routes).await });
    (hosting, url.parse().unwrap())
}

/// A stack whose one fleet replica runs the `http` provisioner over `url`, with the hosting API's token.
async fn http_stack(redis: &TestRedis, url: &reqwest::Url) -> Stack {
    let settings = berth_fleet::FleetArgs {
        provisioners: vec!["http".into()],
        http_provisioner_url: Some(url.clone()),
        http_provisioner_token: Some(TOKEN.into()),
        http_provisioner_timeout_ms: 5000,
        ..Default::default()
    };
    stack_over(redis, 1, settings).await
}

/// A MANAGED fleet on the `http` provisioner, its provisioner parameters `parameters`.
fn hosted(fleet_id: &str, launch_path: &str, desired: u32, parameters: &[(&str, &str)]) -> pb::CreateFleetRequest {
    let mut request = managed(fleet_id, launch_path, desired);
    request.provisioner = "http".into();
    let launch = request.launch_configuration.as_mut().unwrap();
    launch.provisioner_parameters = Some(Struct {
        fields: parameters
            .iter()
            .map(|(k, v)| {
                let value = Value {
                    kind: Some(Kind::StringValue((*v).into())),
                };
                ((*k).to_owned(), value)
            })
            .collect(),
    });
    request
}

/// Waits (up to `within`) for `done`, saying `what` if it never holds.
async fn eventually(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: never happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_hosting_api_launches_and_stops_a_fleets_instances(redis: TestRedis) {
    let (hosting, url) = serve_hosting().await;
    let stack = http_stack(&redis, &url).await;
    let (arena, idle) = (&fleet_id("hosted-arena"), &fleet_id("hosted-idle"));
    let _reaper = Reaper(vec![arena.into(), idle.into()]);
    let mut fleets: Client = client(&stack.fleet[0]).await;
    let created = hosted(arena, &example(), 3, &[("image", "arena:7")]);
    fleets.create_fleet(created.clone()).await.unwrap();

    // Three instances launch on the hosting API; their servers register and become ready; the location is
    // DEPLOYED. Each instance's handle is what the API answered for it, and the API got the launch configuration
    // as the operator set it.
    let first = instances_when(&stack.store, arena, "3 ready", all_ready(3)).await;
    for instance in &first {
        assert_eq!(
            hosting.handle_of(&instance.id).as_deref(),
            Some(instance.handle.as_str())
        );
        assert_eq!(hosting.running(&instance.id), 1);
    }
    assert_eq!(
        hosting.state().last_launch,
        created.launch_configuration,
        "passed through as it is"
    );
    assert_eq!(
        location(&mut fleets, arena).await.status(),
        pb::LocationStatus::Deployed
    );
    let seen = events(&mut fleets, arena).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunched), 3);
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunchFailed), 0);

    // Lowered to 1: two instances are told to end through the SDK, their processes exit, and they are removed.
    set_desired(&mut fleets, arena, 1).await;
    let left = instances_when(&stack.store, arena, "scaled in to 1", |found| found.len() == 1).await;
    let gone: Vec<_> = first.iter().filter(|i| i.id != left[0].id).collect();
    assert_eq!(gone.len(), 2);
    for instance in &gone {
        assert_eq!(hosting.running(&instance.id), 0, "{} still runs", instance.id);
    }
    assert_eq!(hosting.running(&left[0].id), 1);
    let seen = events(&mut fleets, arena).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceTerminated), 2);

    // A server that never registers has no SDK stream to be told on: Berth asks the API to stop its instance, by
    // the handle the API answered, and the API's process is gone.
    let mut sleeper = hosted(idle, "/bin/sleep", 1, &[]);
    sleeper.launch_configuration.as_mut().unwrap().parameters = "600".into();
    fleets.create_fleet(sleeper).await.unwrap();
    let launched = instances_when(&stack.store, idle, "launched", |found| found.len() == 1).await;
    let never = &launched[0];
    eventually("a stop request", Duration::from_secs(30), || {
        !hosting.stops(idle).is_empty()
    })
    .await;
    let asked = &hosting.stops(idle)[0];
    assert_eq!(
        (asked.instance_id.as_str(), asked.handle.as_str(), asked.kill),
        (never.id.as_str(), hosting.handle_of(&never.id).unwrap().as_str(), false)
    );
    eventually("the process gone", Duration::from_secs(10), || {
        hosting.running(&never.id) == 0
    })
    .await;
    set_desired(&mut fleets, idle, 0).await;
    instances_when(&stack.store, idle, "removed", |found| found.is_empty()).await;
    let seen = events(&mut fleets, idle).await;
    assert!(count(&seen, pb::FleetEventCode::ServerProcessRegisterTimeout) >= 1);

    // Any replica finds an instance by Berth's ids when its handle was never recorded; the API checks the token.
    let timeout = Duration::from_secs(5);
    let berth = HttpProvisioner::new(url.clone(), Some(TOKEN.into()), timeout).unwrap();
    let unrecorded = Instance {
        fleet_id: arena,
        instance_id: &left[0].id,
        handle: "",
    };
    assert_eq!(berth.running(unrecorded).await.unwrap(), 1);
    let unknown = Instance {
        instance_id: "i-never-launched",
        ..unrecorded
    };
    assert_eq!(
        berth.running(unknown).await.unwrap(),
        0,
        "an unknown instance runs nothing"
    );
    berth.stop(unknown, true).await.expect("nothing to stop is no failure");
    assert_eq!(hosting.state().unauthorized, 0, "Berth always sent the token");
    let stranger = HttpProvisioner::new(url.clone(), Some("guess".into()), timeout).unwrap();
    let err = stranger.running(unrecorded).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "hosting API describe: 401 Unauthorized: bearer token refused"
    );
    let spec = LaunchSpec {
        fleet_id: arena.clone(),
        location: "local".into(),
        instance_id: "i-stranger".into(),
        instance_type: "small".into(),
        launch: created.launch_configuration.clone().unwrap(),
        processes: Vec::new(),
    };
    let err = stranger.launch(&spec).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "hosting API launch: 401 Unauthorized: bearer token refused"
    );
    assert_eq!(hosting.state().unauthorized, 2);
    // A wrong URL's 404 is a failure, not an instance gone.
    let astray = HttpProvisioner::new(url.join("../elsewhere/").unwrap(), Some(TOKEN.into()), timeout).unwrap();
    let err = astray.running(unrecorded).await.unwrap_err();
    assert_eq!(err.to_string(), "hosting API describe: 404 Not Found");

    // A launch whose answer does not come in time fails, and what the API launched for it is stopped by its id.
    let hasty = HttpProvisioner::new(url.clone(), Some(TOKEN.into()), Duration::from_millis(500)).unwrap();
    let answer_late = hosted(arena, "/bin/sleep", 1, &[("answer", "late")])
        .launch_configuration
        .unwrap();
    let late = LaunchSpec {
        instance_id: "i-late".into(),
        launch: pb::ServerLaunchConfiguration {
            parameters: "600".into(),
            ..answer_late
        },
        processes: vec![ProcessSpec {
            game_server_id: "i-late-0".into(),
            env: vec![("BERTH_FLEET_ID".into(), arena.clone())],
        }],
        ..spec
    };
    let err = hasty.launch(&late).await.unwrap_err();
    assert!(
        err.to_string().starts_with("hosting API launch: no answer in time"),
        "{err}"
    );
    let stopped = hosting.stops(arena);
    let asked = stopped
        .iter()
        .find(|s| s.instance_id == "i-late")
        .expect("a stop request for it");
    assert_eq!((asked.handle.as_str(), asked.kill), ("", true));
    eventually("the late instance's process gone", Duration::from_secs(10), || {
        hosting.running("i-late") == 0
    })
    .await;
    assert_eq!(hosting.handle_of("i-stranger"), None, "nothing launched for it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_launches_and_stops_a_fleets_instances_on_a_single_node() {
    a_hosting_api_launches_and_stops_a_fleets_instances(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_launches_and_stops_a_fleets_instances_on_a_cluster() {
    a_hosting_api_launches_and_stops_a_fleets_instances(TestRedis::cluster()).await;
}

/// A hosting API that answers every launch with a 500: each failure is an INSTANCE_LAUNCH_FAILED event carrying
/// the API's message, launches back off, the desired count stays, and the location turns UNHEALTHY at its
/// first-heartbeat deadline (60 s, the contract's least), launching nothing after.
async fn a_hosting_api_that_fails_every_launch_turns_its_location_unhealthy(redis: TestRedis) {
    let (hosting, url) = serve_hosting().await;
    let stack = http_stack(&redis, &url).await;
    let full = &fleet_id("hosted-full");
    let _reaper = Reaper(vec![full.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets
        .create_fleet(hosted(full, &example(), 2, &[("fail", "no capacity left in local")]))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while location(&mut fleets, full).await.status() != pb::LocationStatus::Unhealthy {
        assert!(tokio::time::Instant::now() < deadline, "never turned UNHEALTHY");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let unhealthy = location(&mut fleets, full).await;
    assert!(
        unhealthy
            .status_message
            .contains("no server sent a heartbeat within 60 s"),
        "{}",
        unhealthy.status_message
    );
    assert_eq!(unhealthy.capacity.unwrap().desired_instances, 2, "no capacity change");
    let seen = events(&mut fleets, full).await;
    let failed: Vec<_> = seen
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::InstanceLaunchFailed)
        .collect();
    assert!(failed.len() >= 2, "{} failures", failed.len());
    for event in &failed {
        assert_eq!(
            event.message,
            "hosting API launch: 500 Internal Server Error: no capacity left in local"
        );
    }
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunched), 0);
    assert_eq!(count(&seen, pb::FleetEventCode::LocationUnhealthy), 1);
    // Backoff: far fewer attempts than one per pass over the minute.
    let attempts = hosting.state().launches;
    assert!(attempts < 20, "{attempts} attempts");
    assert_eq!(attempts, failed.len());
    // UNHEALTHY: nothing more is asked of the API.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(hosting.state().launches, attempts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_that_fails_every_launch_turns_its_location_unhealthy_on_a_single_node() {
    a_hosting_api_that_fails_every_launch_turns_its_location_unhealthy(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_that_fails_every_launch_turns_its_location_unhealthy_on_a_cluster() {
    a_hosting_api_that_fails_every_launch_turns_its_location_unhealthy(TestRedis::cluster()).await;
}

/// A hosting API that cannot stop an instance: scaled in, an instance whose process never registered has no SDK
/// stream to be told on, so Berth asks the API to stop it, and at its kill time (termination grace and exit timeout
/// later) to kill it. Every request is refused: each kind is one INSTANCE_STOP_FAILED event with the API's error,
/// however many passes ask again, and the instance still runs, TERMINATING. Once the API stops instances again, the
/// next kill ends it and the instance is removed.
async fn a_hosting_api_that_cannot_stop_an_instance_is_one_event_per_request(redis: TestRedis) {
    let (hosting, url) = serve_hosting().await;
    let stack = http_stack(&redis, &url).await;
    let stuck = &fleet_id("hosted-stuck");
    let _reaper = Reaper(vec![stuck.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    let refusal = "the host does not answer";
    hosting.state().refusing_stops = Some(refusal.into());
    let mut sleeper = hosted(stuck, "/bin/sleep", 1, &[]);
    sleeper.launch_configuration.as_mut().unwrap().parameters = "600".into();
    fleets.create_fleet(sleeper).await.unwrap();
    let launched = instances_when(&stack.store, stuck, "launched", |found| {
        found.len() == 1 && !found[0].handle.is_empty()
    })
    .await;
    let stopped = &launched[0];
    set_desired(&mut fleets, stuck, 0).await;

    // A stop, then at the kill time (11 s) kills, every one refused; several passes ask again.
    let kills = |hosting: &Hosting| hosting.stops(stuck).iter().filter(|s| s.kill).count();
    eventually("kills asked for", Duration::from_secs(40), || kills(&hosting) >= 4).await;
    let asked = hosting.stops(stuck);
    assert!(!asked[0].kill, "asked to exit first: {:?}", asked[0]);
    assert!(asked.iter().all(|s| s.instance_id == stopped.id), "{asked:?}");
    let seen = events(&mut fleets, stuck).await;
    let failed: Vec<(&str, &str)> = seen
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::InstanceStopFailed)
        .map(|e| (e.instance_id.as_str(), e.message.as_str()))
        .collect();
    let api = format!("hosting API stop: 500 Internal Server Error: {refusal}");
    let (stop, kill) = (
        format!("cannot stop the instance: {api}"),
        format!("cannot kill the instance: {api}"),
    );
    assert_eq!(
        failed,
        [
            (stopped.id.as_str(), stop.as_str()),
            (stopped.id.as_str(), kill.as_str())
        ],
        "one event per request, not one per pass"
    );
    assert_eq!(hosting.running(&stopped.id), 1, "it still runs");
    let left = instances_when(&stack.store, stuck, "still recorded", |found| found.len() == 1).await;
    assert_eq!(
        (left[0].id.as_str(), left[0].state),
        (stopped.id.as_str(), InstanceState::Terminating)
    );

    // The API recovers: the next kill ends the process, and the instance is removed.
    hosting.state().refusing_stops = None;
    instances_when(&stack.store, stuck, "removed", |found| found.is_empty()).await;
    assert_eq!(hosting.running(&stopped.id), 0);
    let seen = events(&mut fleets, stuck).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceStopFailed), 2);
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceTerminated), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_that_cannot_stop_an_instance_is_one_event_per_request_on_a_single_node() {
    a_hosting_api_that_cannot_stop_an_instance_is_one_event_per_request(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosting_api_that_cannot_stop_an_instance_is_one_event_per_request_on_a_cluster() {
    a_hosting_api_that_cannot_stop_an_instance_is_one_event_per_request(TestRedis::cluster()).await;
}
