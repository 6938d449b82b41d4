//! The container image as an operator builds it (`scripts/image.sh`, from the binaries the tests were built with),
//! run: the four services started from it against a real Redis, each answering SERVING; the image runs as a
//! non-root user and holds the services and nothing to build with. Then the whole stack brought up from
//! `deploy/compose.yaml` with Debian's docker-compose (its Redis image built from the host's, as no registry is
//! reachable), each service answering SERVING and serving its metrics on its published ports. Skipped, saying so,
//! where no Docker engine answers (`make deps` installs docker.io and starts dockerd).

use std::process::Command;
use std::time::Duration;

use berth_testkit::{TestRedis, binary, free_port, health_within};
use tonic_health::pb::health_check_response::ServingStatus;

const IMAGE: &str = "berth-test/berth:latest";

fn docker(args: &[&str]) -> Result<String, String> {
    let output = Command::new("docker")
        .args(args)
        .output()
        .map_err(|err| format!("docker {args:?}: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "docker {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Containers removed when dropped, failed test or not.
struct Containers(Vec<String>);

impl Drop for Containers {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = docker(&["rm", "-f", name]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_the_four_services_as_a_non_root_user() {
    if let Err(why) = docker(&["info"]) {
        eprintln!(
            "SKIPPED the image test: no Docker engine answers ({why}); `make deps` installs docker.io and starts dockerd"
        );
        return;
    }
    let binaries = binary("berth-placement").parent().unwrap().display().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/image.sh");
    let built = Command::new("bash")
        .arg(script)
        .env("BERTH_IMAGE_BINARIES", &binaries)
        .env("BERTH_IMAGE", IMAGE)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/image.sh failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );

    assert_eq!(
        docker(&["image", "inspect", "-f", "{{.Config.User}}", IMAGE]).unwrap(),
        "10001:10001"
    );
    let files = {
        let probe = format!("berth-test-files-{}", std::process::id());
        let _gone = Containers(vec![probe.clone()]);
        docker(&["create", "--name", &probe, IMAGE, "/usr/local/bin/berthctl"]).unwrap();
        let listing = Command::new("sh")
            .args(["-c", &format!("docker export {probe} | tar -t")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&listing.stdout).into_owned()
    };
    for service in [
        "berth-placement",
        "berth-session",
        "berth-fleet",
        "berth-health",
        "berthctl",
    ] {
        assert!(
            files.contains(&format!("usr/local/bin/{service}")),
            "{service} missing: {files}"
        );
    }
    for tool in ["bin/sh", "usr/bin/cc", "usr/bin/gcc", "rustc", "cargo", "apt"] {
        assert!(
            !files.lines().any(|file| file.ends_with(tool)),
            "{tool} is in the image: {files}"
        );
    }

    // Redis on this host; each service from the image on a free port of the host's network.
    let redis = TestRedis::single();
    let redis_url = redis.config().urls[0].clone();
    let mut containers = Containers(Vec::new());
    let mut endpoints = Vec::new();
    for service in ["placement", "session", "fleet", "health"] {
        let port = free_port();
        let name = format!("berth-test-{service}-{}-{port}", std::process::id());
        containers.0.push(name.clone());
        docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "host",
            "-e",
            &format!("BERTH_REDIS_URL={redis_url}"),
            "-e",
            &format!("BERTH_LISTEN=127.0.0.1:{port}"),
            "-e",
            "BERTH_METRICS_LISTEN=off",
            "-e",
            "BERTH_INSECURE_NO_AUTH=true",
            IMAGE,
            &format!("/usr/local/bin/berth-{service}"),
        ])
        .unwrap();
        endpoints.push((service, name, format!("http://127.0.0.1:{port}")));
    }
    for (service, name, endpoint) in &endpoints {
        let logs = || docker(&["logs", name]).unwrap_or_else(|err| err);
        assert!(
            health_within(endpoint, "", ServingStatus::Serving, Duration::from_secs(60))
                .await
                .is_ok(),
            "berth-{service} from the image never served: {}",
            logs()
        );
    }
    compose_up().await;
}

/// A compose project, taken down with its volumes when dropped.
struct Project {
    name: String,
    file: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Project {
    fn compose(&self, args: &[&str], envs: &[(String, String)]) -> std::process::Output {
        Command::new("docker-compose")
            .arg("-p")
            .arg(&self.name)
            .arg("-f")
            .arg(&self.file)
            .args(args)
            .envs(envs.iter().map(|(key, value)| (key, value)))
            .output()
            .expect("docker-compose (Debian's package, which make deps installs) runs")
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "--timeout", "5"], &[]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `deploy/compose.yaml` as an operator runs it, with its secret beside it, the image just built, a Redis image built
/// from the host's, and every port published on a free one.
async fn compose_up() {
    let redis_image = "berth-test/redis:latest";
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/redis-image.sh");
    let built = Command::new("bash")
        .arg(script)
        .env("BERTH_REDIS_IMAGE", redis_image)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/redis-image.sh failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let dir = std::env::temp_dir().join(format!("berth-compose-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    let compose = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/compose.yaml");
    std::fs::copy(compose, dir.join("compose.yaml")).unwrap();
    std::fs::write(dir.join("secrets/auth-key"), berth_testkit::TEST_KEY).unwrap();
    let project = Project {
        name: format!("berth-test-{}", std::process::id()),
        file: dir.join("compose.yaml"),
        dir,
    };
    let mut envs = vec![
        ("BERTH_IMAGE".to_owned(), IMAGE.to_owned()),
        ("BERTH_REDIS_IMAGE".to_owned(), redis_image.to_owned()),
        ("BERTH_REDIS_PORT".to_owned(), free_port().to_string()),
    ];
    let mut published = Vec::new();
    for service in ["PLACEMENT", "SESSION", "FLEET", "HEALTH"] {
        let (grpc, metrics) = (free_port(), free_port());
        envs.push((format!("BERTH_{service}_PORT"), grpc.to_string()));
        envs.push((format!("BERTH_{service}_METRICS_PORT"), metrics.to_string()));
        published.push((service, grpc, metrics));
    }
    let up = project.compose(&["up", "-d", "--no-build"], &envs);
    assert!(
        up.status.success(),
        "docker-compose up failed: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    for (service, grpc, metrics) in published {
        let logs = || String::from_utf8_lossy(&project.compose(&["logs", "--no-color"], &envs).stdout).into_owned();
        assert!(
            health_within(
                &format!("http://127.0.0.1:{grpc}"),
                "",
                ServingStatus::Serving,
                Duration::from_secs(60)
            )
            .await
            .is_ok(),
            "{service} from compose never served: {}",
            logs()
        );
        let scraped = reqwest::get(format!("http://127.0.0.1:{metrics}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            scraped.contains("berth_redis_up 1"),
            "{service}'s metrics from compose: {scraped}"
        );
    }
}
