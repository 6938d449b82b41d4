//! The container image as an operator builds it (`scripts/image.sh`, from the binaries the tests were built with),
//! run: the four services started from it against a real Redis, each answering SERVING; the image runs as a
//! non-root user and holds the services and nothing to build with. Skipped, saying so, where no Docker engine
//! answers (`make deps` installs docker.io and starts dockerd).

use std::net::TcpListener;
use std::process::Command;

use berth_testkit::{TestRedis, binary, wait_for_health};
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
        let serving = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            wait_for_health(endpoint, "", ServingStatus::Serving),
        )
        .await;
        let logs = || docker(&["logs", name]).unwrap_or_else(|err| err);
        assert!(
            serving.is_ok(),
            "berth-{service} from the image never served: {}",
            logs()
        );
    }
}
