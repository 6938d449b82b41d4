//! `berthctl` as an operator and a script run it, against a running stack (the four services over a real Redis, a
//! fleet of example game servers launched by the `process` provisioner): GameLift's game-session flow (seed 000),
//! a placement through a queue, scaling, tokens, and failures read as one line with the exit code a script tests.

use std::path::PathBuf;
use std::time::Duration;

use berth_proto::fleet::v1 as fpb;
use berth_runtime::auth::Role;
use berth_testkit::{Reaper, TEST_KEY, TestRedis, binary, token};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

/// The four services over one Redis, a fleet of example game servers and a queue over it, and the key file
/// berthctl mints its tokens from.
struct Stack {
    services: berth_teststack::Stack,
    fleet_id: String,
    key_file: PathBuf,
    _reaper: Reaper,
}

impl Stack {
    async fn start(redis: &TestRedis) -> Stack {
        let fleet_id = format!("ctl-{:x}", uuid::Uuid::now_v7().simple());
        let key_file = std::env::temp_dir().join(format!("{fleet_id}.key"));
        std::fs::write(&key_file, TEST_KEY).unwrap();
        let stack = Stack {
            services: berth_teststack::Stack::start(redis).await,
            _reaper: Reaper(vec![fleet_id.clone()]),
            fleet_id,
            key_file,
        };
        stack.fleet_and_queue().await;
        stack
    }

    /// One example game server in location "local", and a queue named as the fleet.
    async fn fleet_and_queue(&self) {
        let launch = fpb::ServerLaunchConfiguration {
            launch_path: binary("berth-example-game-server").display().to_string(),
            ..Default::default()
        };
        let fleet = berth_teststack::process_fleet(&self.fleet_id, launch, 1);
        self.services.fleet_and_queue(fleet).await;
    }

    /// berthctl with `args`, pointed at this stack with an operator token minted from the key file, and no config
    /// file (no HOME): its exit code, stdout and stderr.
    async fn ctl(&self, args: &[&str]) -> (i32, String, String) {
        self.ctl_with(args, &[]).await
    }

    async fn ctl_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_berthctl"));
        command
            .args(args)
            .env_clear()
            .env("BERTH_PLACEMENT_ENDPOINT", self.services.placement.endpoint())
            .env("BERTH_SESSION_ENDPOINT", self.services.session.endpoint())
            .env("BERTH_FLEET_ENDPOINT", self.services.fleet.endpoint())
            .env("BERTH_HEALTH_ENDPOINT", self.services.health.endpoint())
            .env("BERTH_AUTH_KEY_FILE", &self.key_file);
        for (name, value) in env {
            // An empty value takes the variable away.
            if value.is_empty() {
                command.env_remove(name);
            } else {
                command.env(name, value);
            }
        }
        let output = command.output().await.expect("berthctl is built with the tests");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// berthctl with `args` left running (killed when the child is dropped): it and its output's lines.
    fn follow(&self, args: &[&str]) -> (tokio::process::Child, Lines<BufReader<ChildStdout>>) {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_berthctl"))
            .args(args)
            .env_clear()
            .env("BERTH_PLACEMENT_ENDPOINT", self.services.placement.endpoint())
            .env("BERTH_AUTH_KEY_FILE", &self.key_file)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        (child, lines)
    }

    /// berthctl with `args` and `-o json`, which must succeed: its answer.
    async fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.extend(["-o", "json"]);
        let (code, stdout, stderr) = self.ctl(&with_json).await;
        assert_eq!(code, 0, "berthctl {args:?} failed: {stderr}");
        serde_json::from_str(&stdout)
            .unwrap_or_else(|err| panic!("berthctl {args:?} printed no JSON ({err}): {stdout}"))
    }

    /// `describe` of `what` once `done` holds of it (within 60 s).
    async fn described_when(&self, what: &[&str], done: impl Fn(&Value) -> bool) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let found = self.json(what).await;
            if done(&found) {
                return found;
            }
            assert!(tokio::time::Instant::now() < until, "{what:?} never got there: {found}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.key_file);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn berthctl_drives_the_game_session_flow_and_a_placement_through_a_queue() {
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;
    let fleet = stack.fleet_id.as_str();

    let fleets = stack.json(&["get", "fleets"]).await;
    assert!(
        fleets.as_array().unwrap().iter().any(|f| f["fleetId"] == fleet),
        "{fleets}"
    );
    let (code, table, _) = stack.ctl(&["get", "fleets"]).await;
    assert_eq!(code, 0);
    assert!(table.starts_with("FLEET"), "a table under its headers: {table}");
    assert!(table.contains(fleet), "{table}");
    stack
        .described_when(&["describe", "fleet", fleet], |f| {
            f["locations"][0]["status"] == "LOCATION_STATUS_DEPLOYED"
        })
        .await;

    // Seed 000: a game session on a ready server, ACTIVE once the server activates it; a player's slot RESERVED;
    // the session ended.
    let created = stack
        .json(&[
            "create",
            "game-session",
            fleet,
            "--max-players",
            "4",
            "--property",
            "map=dust",
        ])
        .await;
    let session_id = created["gameSession"]["gameSessionId"].as_str().unwrap().to_owned();
    let active = stack
        .described_when(&["describe", "game-session", &session_id], |s| {
            s["status"] == "GAME_SESSION_STATUS_ACTIVE"
        })
        .await;
    assert_eq!(active["gameProperties"][0]["value"], "dust");
    let player = stack
        .json(&["create", "player-session", &session_id, "--player", "p1"])
        .await;
    assert_eq!(player["playerSession"]["status"], "PLAYER_SESSION_STATUS_RESERVED");
    let player_session_id = player["playerSession"]["playerSessionId"].as_str().unwrap();
    let of_session = stack
        .json(&["get", "player-sessions", "--game-session", &session_id])
        .await;
    assert_eq!(of_session[0]["playerSessionId"], player_session_id, "{of_session}");
    let of_player = stack.json(&["get", "player-sessions", "--player", "p1"]).await;
    assert_eq!(of_player[0]["gameSessionId"], session_id.as_str(), "{of_player}");
    let described = stack.json(&["describe", "player-session", player_session_id]).await;
    assert_eq!(described["playerId"], "p1", "{described}");
    let sessions = stack.json(&["get", "game-sessions", fleet]).await;
    assert_eq!(sessions[0]["currentPlayerSessionCount"], 1, "{sessions}");
    let found = stack
        .json(&[
            "search",
            fleet,
            "--filter",
            "playerSessionCount = 1 AND gameSessionProperties.map = 'dust'",
        ])
        .await;
    assert_eq!(found[0]["gameSessionId"], session_id.as_str(), "{found}");
    let none = stack
        .json(&["search", fleet, "--filter", "playerSessionCount > 1"])
        .await;
    assert_eq!(none, serde_json::json!([]));
    let ended = stack.json(&["terminate", "game-session", &session_id, "--force"]).await;
    assert_eq!(ended["gameSession"]["status"], "GAME_SESSION_STATUS_TERMINATED");

    // A placement through the queue, waited for, with a client's token minted by berthctl itself.
    let (code, client_token, _) = stack.ctl(&["token", "--role", "client"]).await;
    assert_eq!(code, 0);
    let (code, stdout, stderr) = stack
        .ctl_with(
            &["place", "--queue", fleet, "--player", "p2", "-o", "json"],
            &[("BERTH_TOKEN", client_token.trim())],
        )
        .await;
    assert_eq!(code, 0, "{stderr}");
    let placed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(placed["status"], "PLACEMENT_STATUS_FULFILLED", "{placed}");
    assert_eq!(placed["placedPlayerSessions"][0]["playerId"], "p2");
    let servers = stack.json(&["get", "game-servers", fleet]).await;
    assert!(!servers.as_array().unwrap().is_empty(), "{servers}");

    // Where it ran: the location, its instances and their servers; nothing left waiting in the queue.
    let locations = stack.json(&["get", "locations", fleet]).await;
    assert_eq!(locations[0]["location"], "local", "{locations}");
    let location = stack.json(&["describe", "location", fleet, "local"]).await;
    assert_eq!(location["status"], "LOCATION_STATUS_DEPLOYED", "{location}");
    assert!(location["utilization"]["instanceCounts"].is_object(), "{location}");
    let instances = stack.json(&["get", "instances", fleet, "local"]).await;
    let instance = &instances[0];
    assert_eq!(instance["state"], "INSTANCE_STATE_RUNNING", "{instances}");
    assert_eq!(
        instance["processes"][0]["gameServerId"], servers[0]["gameServerId"],
        "{instances}"
    );
    let instance_id = instance["instanceId"].as_str().unwrap();
    let one = stack.json(&["describe", "instance", fleet, "local", instance_id]).await;
    assert_eq!(one["instanceId"], instance_id);
    let (code, _, stderr) = stack.ctl(&["describe", "instance", fleet, "local", "i-none"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("fleet refused (NotFound)"), "{stderr}");
    assert_eq!(stack.json(&["get", "placements", fleet]).await, serde_json::json!([]));

    let scaled = stack
        .json(&["scale", fleet, "--location", "local", "--desired", "2"])
        .await;
    assert_eq!(scaled["capacity"]["desiredInstances"], 2, "{scaled}");
    let suspended = stack.json(&["suspend", fleet]).await;
    assert_eq!(suspended["locations"][0]["autoscalingSuspended"], true, "{suspended}");
    let resumed = stack.json(&["resume", fleet, "--location", "local"]).await;
    assert!(
        resumed["locations"][0].get("autoscalingSuspended").is_none(),
        "{resumed}"
    );

    // One frame of top: the location with its capacity, the queue with its placements, the scaling it did not do.
    let (code, frame, stderr) = stack.ctl(&["top", "--once"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(frame.starts_with("FLEET/LOCATION"), "{frame}");
    assert!(frame.contains(&format!("{fleet}/local")), "{frame}");
    let frame = stack.json(&["top", "--once"]).await;
    let queue = frame["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queueName"] == fleet)
        .cloned();
    assert_eq!(queue.unwrap()["placementsSucceeded"], "1", "{frame}");

    // The retained events: the fleet's launches, the sessions' changes, the placement's outcome; each a line.
    let (code, fleet_events, stderr) = stack.ctl(&["events", "fleet", fleet]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(fleet_events.contains("INSTANCE_LAUNCHED"), "{fleet_events}");
    let (_, session_events, _) = stack.ctl(&["events", "sessions", fleet]).await;
    assert!(session_events.contains(&session_id), "{session_events}");
    let (_, placement_events, _) = stack.ctl(&["events", "placements", fleet, "-o", "json"]).await;
    let outcome: Value = serde_json::from_str(placement_events.lines().next().unwrap()).unwrap();
    assert_eq!(
        outcome["eventType"], "PLACEMENT_EVENT_TYPE_FULFILLED",
        "{placement_events}"
    );

    // Followed: an event that happens after the command started is printed as it comes.
    let (_follower, mut lines) = stack.follow(&["events", "placements", fleet, "--follow"]);
    let (code, _, stderr) = stack
        .ctl_with(
            &["place", "--queue", fleet, "--id", "followed-1"],
            &[("BERTH_TOKEN", client_token.trim())],
        )
        .await;
    assert_eq!(code, 0, "{stderr}");
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("followed-1") {
                return;
            }
        }
        panic!("the follower ended");
    })
    .await
    .expect("the followed placement is printed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_one_line_with_an_exit_code_a_script_can_test() {
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;

    // Refused: the gRPC code and Berth's own words, exit 1.
    let (code, stdout, stderr) = stack.ctl(&["describe", "fleet", "no-such-fleet"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("NotFound") && stderr.contains("no-such-fleet"),
        "{stderr}"
    );
    let (code, _, stderr) = stack
        .ctl(&["scale", &stack.fleet_id, "--location", "local", "--desired", "999"])
        .await;
    assert_eq!(code, 1);
    assert!(stderr.contains("desired"), "names the field: {stderr}");

    // Out of reach: which service, at which address, exit 3.
    let (code, _, stderr) = stack
        .ctl_with(&["get", "fleets"], &[("BERTH_FLEET_ENDPOINT", "http://127.0.0.1:9")])
        .await;
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("fleet service did not answer at http://127.0.0.1:9"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));

    // No token and no way to mint one: configuration, exit 2; a token of the wrong role is refused.
    let (code, _, stderr) = stack.ctl_with(&["get", "fleets"], &[("BERTH_AUTH_KEY_FILE", "")]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no token"), "{stderr}");
    let client = token(Role::Client, None);
    let (code, _, stderr) = stack
        .ctl_with(&["get", "fleets"], &[("BERTH_TOKEN", client.as_str())])
        .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("PermissionDenied"), "{stderr}");

    // A named context that the config file lacks.
    let config = std::env::temp_dir().join(format!("{}.yaml", stack.fleet_id));
    std::fs::write(
        &config,
        "current-context: dev\ncontexts:\n  dev:\n    key-file: /nonexistent\n",
    )
    .unwrap();
    let config_path = config.display().to_string();
    let (code, _, stderr) = stack
        .ctl_with(
            &["get", "fleets", "--context", "prod"],
            &[("BERTHCTL_CONFIG", config_path.as_str()), ("BERTH_AUTH_KEY_FILE", "")],
        )
        .await;
    let _ = std::fs::remove_file(&config);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no context \"prod\""), "{stderr}");
}

/// A manifest directory in a temporary directory of its own, removed when dropped.
struct Manifests(PathBuf);

impl Manifests {
    fn new(name: &str) -> Manifests {
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Manifests(dir)
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text).unwrap();
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Manifests {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fleet_manifest(fleet: &str, maximum: u32) -> String {
    format!(
        "# the arena fleet\nkind: Fleet\nfleetId: {fleet}\nprovisioner: process\nlaunchConfiguration:\n  launchPath: \
         /bin/true\ninstanceDefinitions:\n  - instanceType: small\nprocessTimeouts:\n  heartbeatIntervalMs: 2000\n\
         locations:\n  - location: local\n    capacity: {{minimumInstances: 0, maximumInstances: {maximum}, \
         desiredInstances: 0}}\nscalingPolicies:\n  - name: buffer\n    evaluationIntervalSeconds: 60\n    buffer: \
         {{minimumIdleServers: 1}}\n"
    )
}

fn queue_manifest(queue: &str, fleet: &str, timeout: u32) -> String {
    format!("kind: Queue\nname: {queue}\ndestinations:\n  - fleetId: {fleet}\ntimeoutSeconds: {timeout}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_makes_the_declared_records_once_and_plans_only_what_differs() {
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;
    let fleet = format!("{}-applied", stack.fleet_id);
    let queue = format!("{}-q", stack.fleet_id);
    let files = Manifests::new(&fleet);
    files.write("fleets.yaml", &fleet_manifest(&fleet, 4));
    files.write("queues.yml", &queue_manifest(&queue, &fleet, 60));
    let dir = files.path();

    // A dry run plans the three creations and makes none.
    let (code, plan, stderr) = stack.ctl(&["apply", "-f", &dir, "--dry-run"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        plan,
        format!(
            "fleet/{fleet} created\nfleet/{fleet}: scaling policy buffer created\nqueue/{queue} created\ndry run: 3 \
             changes planned, none made\n"
        )
    );
    assert_eq!(stack.ctl(&["describe", "fleet", &fleet]).await.0, 1, "nothing was made");

    // Applied, then applied again: nothing to do, and it says so.
    let (code, made, stderr) = stack.ctl(&["apply", "-f", &dir]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(made.lines().count(), 3, "{made}");
    let described = stack.json(&["describe", "fleet", &fleet]).await;
    assert_eq!(described["processTimeouts"]["heartbeatIntervalMs"], 2000);
    let policies = stack.json(&["get", "policies", &fleet]).await;
    assert_eq!(policies[0]["name"], "buffer", "{policies}");
    let policy = stack.json(&["describe", "policy", &fleet, "buffer"]).await;
    assert_eq!(policy["buffer"]["minimumIdleServers"], 1, "{policy}");
    let (code, again, _) = stack.ctl(&["apply", "-f", &dir]).await;
    assert_eq!(code, 0);
    assert!(again.starts_with("no changes"), "{again}");

    // Changed files: only what differs is planned, then made, and then nothing is left to do.
    files.write("fleets.yaml", &fleet_manifest(&fleet, 5));
    files.write("queues.yml", &queue_manifest(&queue, &fleet, 90));
    let (code, plan, _) = stack.ctl(&["apply", "-f", &dir, "--dry-run"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        plan,
        format!(
            "fleet/{fleet}: location local capacity min/desired/max 0/0/4 → 0/0/5\nqueue/{queue} updated: \
             timeoutSeconds: 60 → 90\ndry run: 2 changes planned, none made\n"
        )
    );
    assert_eq!(stack.ctl(&["apply", "-f", &dir]).await.0, 0);
    let (_, again, _) = stack.ctl(&["apply", "-f", &dir]).await;
    assert!(again.starts_with("no changes"), "{again}");
    let described = stack.json(&["describe", "queue", &queue]).await;
    assert_eq!(described["timeoutSeconds"], 90);

    // Prune: the fleet and queue of the stack itself are named by no file.
    let (code, plan, _) = stack.ctl(&["apply", "-f", &dir, "--prune", "--dry-run"]).await;
    assert_eq!(code, 0);
    assert!(
        plan.contains(&format!("queue/{} deleted (pruned)", stack.fleet_id)),
        "{plan}"
    );
    assert!(
        plan.contains(&format!("fleet/{} deleted (pruned)", stack.fleet_id)),
        "{plan}"
    );
    assert!(!plan.contains(&format!("fleet/{fleet} deleted")), "{plan}");
}

/// Operators applying different files to one fleet at once: each update carries the revision its plan read, so of
/// two plans that read the same revision one is refused (ABORTED, exit 1) rather than overwriting the other. Raced
/// in rounds of eight until a conflict is seen (a blind overwrite never refuses); in every round the fleet ends as
/// one of the applies that succeeded left it, having moved one revision for each of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_that_race_on_one_fleet_conflict_rather_than_overwrite() {
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;
    let fleet = format!("{}-raced", stack.fleet_id);
    let files: Vec<Manifests> = (0..8).map(|k| Manifests::new(&format!("{fleet}-{k}"))).collect();
    files[0].write("fleet.yaml", &fleet_manifest(&fleet, 4));
    assert_eq!(stack.ctl(&["apply", "-f", &files[0].path()]).await.0, 0);
    // A deadline the files do not name, set apart from them.
    let timeouts = fpb::ProcessTimeouts {
        heartbeat_interval_ms: 2000,
        unhealthy_after_missed_heartbeats: 5,
        ..Default::default()
    };
    let update = fpb::UpdateFleetRequest {
        fleet_id: fleet.clone(),
        process_timeouts: Some(timeouts),
        ..Default::default()
    };
    fpb::fleet_service_client::FleetServiceClient::new(berth_teststack::Stack::operator(&stack.services.fleet).await)
        .update_fleet(update)
        .await
        .unwrap();
    let revision = |described: &Value| described["revision"].as_str().unwrap().parse::<u64>().unwrap();
    let mut conflicts = 0;
    for round in 1..=10 {
        let before = revision(&stack.json(&["describe", "fleet", &fleet]).await);
        let interval = |k: usize| 2000 + round * 1000 + k * 10;
        for (k, dir) in files.iter().enumerate() {
            let manifest = fleet_manifest(&fleet, 4).replace(
                "heartbeatIntervalMs: 2000",
                &format!("heartbeatIntervalMs: {}", interval(k)),
            );
            dir.write("fleet.yaml", &manifest);
        }
        let stack = &stack;
        let applies = files.iter().map(|dir| {
            let path = dir.path();
            async move { stack.ctl(&["apply", "-f", &path]).await }
        });
        let outcomes = futures::future::join_all(applies).await;
        let mut applied = Vec::new();
        for (k, (code, stdout, stderr)) in outcomes.into_iter().enumerate() {
            if code == 0 {
                assert!(stdout.contains(&format!("fleet/{fleet} updated")), "{stdout}");
                applied.push(interval(k));
            } else {
                assert_eq!(code, 1, "{stderr}");
                assert!(
                    stderr.contains("0 of 1 changes made")
                        && stderr.contains("(Aborted)")
                        && stderr.contains("not the expected"),
                    "a refused apply says it changed nothing and names the conflict: {stderr}"
                );
                conflicts += 1;
            }
        }
        let after = stack.json(&["describe", "fleet", &fleet]).await;
        let interval_now = after["processTimeouts"]["heartbeatIntervalMs"].as_u64().unwrap() as usize;
        assert_eq!(
            after["processTimeouts"]["unhealthyAfterMissedHeartbeats"], 5,
            "a deadline the manifest leaves out stays as it was"
        );
        assert!(applied.contains(&interval_now), "{interval_now} is none of {applied:?}");
        assert_eq!(
            revision(&after),
            before + applied.len() as u64,
            "one revision per apply made"
        );
        if conflicts > 0 {
            return;
        }
    }
    panic!("ten rounds of eight concurrent applies never conflicted: updates do not check the revision they read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_manifest_is_named_by_file_line_and_field_and_nothing_is_applied() {
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;
    let fleet = format!("{}-bad", stack.fleet_id);
    let queue = format!("{}-q", stack.fleet_id);
    let files = Manifests::new(&fleet);
    // The queue's file is good and is read first; the fleet's is not, so neither is applied.
    files.write("a-queue.yaml", &queue_manifest(&queue, &stack.fleet_id, 60));
    files.write(
        "b-fleet.yaml",
        &fleet_manifest(&fleet, 4).replace("processTimeouts", "processTimeout"),
    );
    let (code, stdout, stderr) = stack.ctl(&["apply", "-f", &files.path()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("b-fleet.yaml:9:") && stderr.contains("processTimeout"),
        "{stderr}"
    );
    assert_eq!(
        stack.ctl(&["describe", "queue", &queue]).await.0,
        1,
        "the good file was not applied either"
    );

    // A limit broken: the field the service would name, at its line.
    files.write(
        "b-fleet.yaml",
        &fleet_manifest(&fleet, 4).replace("minimumInstances: 0", "minimumInstances: 9"),
    );
    let (code, _, stderr) = stack.ctl(&["apply", "-f", &files.path()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("b-fleet.yaml:13: locations[0].capacity"), "{stderr}");

    // Malformed YAML: its line.
    files.write("b-fleet.yaml", "kind: Fleet\nfleetId: [unclosed\n");
    let (code, _, stderr) = stack.ctl(&["apply", "-f", &files.path()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("b-fleet.yaml:"), "{stderr}");
}

/// A follower keeps following across a restart of the replica it watches: it reconnects, resumes after the last
/// event it printed, and prints the next placement's outcome, each outcome once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_on_across_a_restart_of_the_service() {
    let redis = TestRedis::single();
    let mut stack = Stack::start(&redis).await;
    let fleet = stack.fleet_id.clone();
    // A server for each placement: one hosts its match until the end of the test.
    let scaled = stack
        .json(&["scale", &fleet, "--location", "local", "--desired", "2"])
        .await;
    assert_eq!(scaled["capacity"]["desiredInstances"], 2);
    stack
        .described_when(&["describe", "fleet", &fleet], |f| {
            f["locations"][0]["status"] == "LOCATION_STATUS_DEPLOYED"
        })
        .await;
    let (_follower, mut lines) = stack.follow(&["events", "placements", &fleet, "--follow", "-o", "json"]);
    let mut next_outcome = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("an outcome is printed")
            .unwrap()
            .expect("the follower goes on");
        serde_json::from_str(&line).unwrap()
    };

    let (code, _, stderr) = stack.ctl(&["place", "--queue", &fleet, "--id", "before-restart"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(next_outcome().await["placement"]["placementId"], "before-restart");

    stack.services.restart_placement().await;
    let (code, _, stderr) = stack.ctl(&["place", "--queue", &fleet, "--id", "after-restart"]).await;
    assert_eq!(code, 0, "{stderr}");
    let outcome = next_outcome().await;
    assert_eq!(
        outcome["placement"]["placementId"], "after-restart",
        "resumed after the last outcome printed, none again: {outcome}"
    );
}
