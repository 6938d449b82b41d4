//! Every series the Grafana dashboard (`deploy/grafana/berth.json`) and the alerting rules
//! (`deploy/prometheus/rules.yaml`) query exists, under that name and with the labels they select and group by, in
//! the metrics the four services record while they work: a process fleet of example game servers launched,
//! autoscaled and one of them frozen, a placement through a queue, a claim, a refused call. Then a real Prometheus
//! (Debian's package) scrapes them, and each of the dashboard's queries answers with at least one series.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use berth_proto::fleet::v1 as fpb;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_runtime::auth::Role;
use berth_store::instances;
use berth_testkit::{Reaper, TestRedis, binary, token};
use berth_teststack::{Stack, process_fleet};

/// Labels Prometheus adds itself (`job`, `instance`) or a histogram has (`le`): not the services' to record.
const ADDED_BY_PROMETHEUS: [&str; 3] = ["job", "instance", "le"];

/// The queries of the dashboard's panels and of the rules.
fn queries() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let mut found = panel_queries();
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(format!("{root}/prometheus/rules.yaml")).unwrap()).unwrap();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            found.push(rule["expr"].as_str().unwrap().to_owned());
        }
    }
    found
}

/// The metrics an expression reads, each with the label names its selector names.
fn selected(expr: &str) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("berth_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].to_owned();
        let mut labels = BTreeSet::new();
        if tail[end..].starts_with('{') {
            let close = tail[end..].find('}').unwrap();
            for matcher in tail[end + 1..end + close].split(',') {
                let label = matcher.split(['=', '!']).next().unwrap().trim();
                if !label.is_empty() {
                    labels.insert(label.to_owned());
                }
            }
        }
        out.push((name, labels));
        rest = &tail[end..];
    }
    out
}

/// The label names an expression groups by.
fn grouped_by(expr: &str) -> BTreeSet<String> {
    expr.split("by (")
        .skip(1)
        .flat_map(|part| part.split(')').next().unwrap().split(','))
        .map(|label| label.trim().to_owned())
        .filter(|label| !label.is_empty() && !ADDED_BY_PROMETHEUS.contains(&label.as_str()))
        .collect()
}

/// A scrape's series: each metric's label-name sets.
fn series(scrape: &str) -> BTreeMap<String, Vec<BTreeSet<String>>> {
    let mut out: BTreeMap<String, Vec<BTreeSet<String>>> = BTreeMap::new();
    for line in scrape
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels: BTreeSet<String> = match line[name_end..].strip_prefix('{') {
            Some(rest) => rest[..rest.find('}').unwrap()]
                .split(',')
                .filter_map(|pair| pair.split_once('=').map(|(name, _)| name.to_owned()))
                .collect(),
            None => BTreeSet::new(),
        };
        out.entry(line[..name_end].to_owned()).or_default().push(labels);
    }
    out
}

/// What the queries read that the scrape lacks.
fn missing(scrape: &str) -> Vec<String> {
    let found = series(scrape);
    let mut missing = Vec::new();
    for expr in queries() {
        let metrics = selected(&expr);
        for (name, labels) in &metrics {
            let wanted: BTreeSet<&String> = labels
                .iter()
                .filter(|label| !ADDED_BY_PROMETHEUS.contains(&label.as_str()))
                .collect();
            let has = found
                .get(name)
                .is_some_and(|sets| sets.iter().any(|set| wanted.iter().all(|label| set.contains(*label))));
            if !has {
                missing.push(format!("{name} with {wanted:?} (in `{expr}`)"));
            }
        }
        for label in grouped_by(&expr) {
            let grouped = metrics.iter().any(|(name, _)| {
                found
                    .get(name)
                    .is_some_and(|sets| sets.iter().any(|set| set.contains(&label)))
            });
            if !grouped {
                missing.push(format!("label {label} (grouped by in `{expr}`)"));
            }
        }
    }
    missing
}

async fn scrape(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_rules_query_series_the_services_record() {
    let port = berth_testkit::free_port();
    berth_runtime::metrics::install(Some(([127, 0, 0, 1], port).into())).unwrap();
    let redis = TestRedis::single();
    let stack = Stack::start(&redis).await;
    let fleet_id = format!("series-{:x}", std::process::id());
    let _reaper = Reaper(vec![fleet_id.clone()]);

    let launch = fpb::ServerLaunchConfiguration {
        launch_path: binary("berth-example-game-server").display().to_string(),
        ..Default::default()
    };
    let mut fleet = process_fleet(&fleet_id, launch, 2);
    fleet.process_timeouts = Some(fpb::ProcessTimeouts {
        heartbeat_interval_ms: 1000,
        ..Default::default()
    });
    stack.fleet_and_queue(fleet).await;
    // A buffer keeping more idle servers than there are, even with nothing busy: a scaling action at its first
    // evaluation.
    let policy = fpb::PutScalingPolicyRequest {
        fleet_id: fleet_id.clone(),
        name: "buffer".into(),
        evaluation_interval_seconds: 3600,
        kind: Some(fpb::put_scaling_policy_request::Kind::Buffer(fpb::BufferPolicy {
            minimum_idle_servers: 3,
            persistent_idle: true,
            ..Default::default()
        })),
        ..Default::default()
    };
    ScalingServiceClient::new(Stack::operator(&stack.fleet).await)
        .put_scaling_policy(policy)
        .await
        .unwrap();

    let client = berth_sdk::connect(&stack.placement.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let placement = pb::StartGameSessionPlacementRequest {
        placement_id: format!("{fleet_id}-p"),
        queue_name: fleet_id.clone(),
        maximum_player_session_count: 4,
        ..Default::default()
    };
    PlacementServiceClient::new(client.clone())
        .start_game_session_placement(placement)
        .await
        .unwrap();
    // A call refused, for the errors panel.
    let unknown = pb::DescribeGameSessionPlacementRequest {
        placement_id: format!("{fleet_id}-never-started"),
    };
    let refused = PlacementServiceClient::new(client.clone())
        .describe_game_session_placement(unknown)
        .await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::NotFound);

    let until = tokio::time::Instant::now() + Duration::from_secs(90);
    let (mut claimed, mut killed) = (false, false);
    loop {
        if !claimed {
            let claim = pb::ClaimGameServerRequest {
                fleet_id: fleet_id.clone(),
                ..Default::default()
            };
            claimed = ClaimServiceClient::new(client.clone())
                .claim_game_server(claim)
                .await
                .is_ok();
        }
        // One server frozen (SIGSTOP) once the servers run: its instance still runs, its heartbeats stop, and the
        // health service declares it lost.
        if claimed && !killed {
            let location = instances::read_instances(&stack.store, &fleet_id, "local")
                .await
                .unwrap();
            if let Some(instance) = location.instances.iter().find(|i| !i.handle.is_empty()) {
                let pid: i32 = instance.handle.split(':').next().unwrap().parse().unwrap();
                // SAFETY: kill(2) of a game server this test's fleet launched; no memory is involved.
                unsafe {
                    libc::kill(pid, libc::SIGSTOP);
                }
                killed = true;
            }
        }
        let lacking = missing(&scrape(port).await);
        if lacking.is_empty() && killed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "series the dashboard or the rules query are not recorded:\n{}",
            lacking.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    every_panel_answers(port).await;
}

/// The dashboard's queries.
fn panel_queries() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{root}/grafana/berth.json")).unwrap()).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().unwrap().to_owned())
        .collect()
}

/// A Prometheus server on a free port scraping `127.0.0.1:<metrics>` every second, killed (and its data removed)
/// when dropped.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Prometheus {
    fn start(metrics: u16) -> Prometheus {
        let port = berth_testkit::free_port();
        let dir = std::env::temp_dir().join(format!("berth-prometheus-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: berth\n    static_configs: [{{targets: ['127.0.0.1:{metrics}']}}]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus (Debian's package, which `make test` installs through scripts/deps.sh) runs");
        Prometheus { child, port, dir }
    }

    /// The series `expr` answers with now; `None` while Prometheus does not answer yet.
    async fn query(&self, expr: &str) -> Option<Vec<serde_json::Value>> {
        let answer = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .query(&[("query", expr)])
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let answer: serde_json::Value = serde_json::from_str(&answer).ok()?;
        assert_eq!(answer["status"], "success", "`{expr}` does not evaluate: {answer}");
        answer["data"]["result"].as_array().cloned()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every panel's query, evaluated by a real Prometheus scraping the services, answers with a series (within 60 s:
/// the rates need two scrapes).
async fn every_panel_answers(metrics: u16) {
    let prometheus = Prometheus::start(metrics);
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut empty = Vec::new();
        for expr in panel_queries() {
            if prometheus.query(&expr).await.is_none_or(|series| series.is_empty()) {
                empty.push(expr);
            }
        }
        if empty.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "panels whose query Prometheus answers with nothing:\n{}",
            empty.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
