#!/usr/bin/env bash
# Installs what `make test`, `make lint`, `make run`, `make bench` and `make sim` need on a fresh machine:
# redis-server (the tests start their own processes of it), protoc (Agones' Rust SDK, which berth-agent's tests speak
# through, compiles its protos with it), the DejaVu fonts (the simulator's chart), a Docker engine (Debian's
# docker.io, for the docker provisioner's tests, its daemon started when none answers), kubectl,
# kubernetes-validate, docker-compose and promtool (the deployment files' lint) and buf (from the npm package @bufbuild/buf, for `buf lint`).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    $sudo_cmd apt-get update -qq
    apt_updated=yes
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "installing redis-server"
  apt_install redis-server
fi

# Agones' official Rust SDK (the `agones` crate, berth-agent's tests speak through it) compiles its protos with
# protoc at build time; Berth's own contracts need none (protox).
if ! command -v protoc >/dev/null; then
  echo "installing protobuf-compiler"
  apt_install protobuf-compiler
fi

# The policy simulator's chart draws its text with DejaVu Sans (berth-sim reads it from the system).
if [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  echo "installing fonts-dejavu-core"
  apt_install fonts-dejavu-core
fi

# The docker provisioner's tests skip, saying so, when no engine answers; so a machine where dockerd cannot run
# (no privileges, no cgroups) still tests everything else, and this only warns.
if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
  echo "installing docker.io"
  apt_install docker.io || echo "warning: docker.io could not be installed; the docker provisioner's tests will skip"
fi
if command -v dockerd >/dev/null && ! $sudo_cmd docker info >/dev/null 2>&1; then
  dockerd_log=/var/log/berth-dockerd.log
  echo "starting dockerd (log: $dockerd_log)"
  $sudo_cmd sh -c "nohup dockerd >>$dockerd_log 2>&1 &"
  for _ in $(seq 1 60); do
    $sudo_cmd docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  $sudo_cmd docker info >/dev/null 2>&1 ||
    echo "warning: dockerd did not answer within 30 s (see $dockerd_log); the docker provisioner's tests will skip"
fi

# `make lint` renders the Kubernetes overlays with kubectl's built-in kustomize and validates them offline with
# kubernetes-validate (PyPI), which carries the schemas of each Kubernetes release.
if ! command -v kubectl >/dev/null; then
  echo "installing kubectl"
  apt_install kubectl || apt_install kubernetes-client
fi
if ! command -v promtool >/dev/null; then
  echo "installing prometheus (promtool, and the server the deployment test scrapes with)"
  apt_install --no-install-recommends prometheus
fi
if ! command -v docker-compose >/dev/null; then
  echo "installing docker-compose"
  apt_install docker-compose
fi
if ! command -v kubernetes-validate >/dev/null; then
  echo "installing kubernetes-validate from PyPI"
  if ! command -v pip3 >/dev/null; then
    apt_install python3-pip
  fi
  # A Debian-managed Python refuses system-wide installs (PEP 668) unless told it may.
  pip3 install --quiet kubernetes-validate 2>/dev/null ||
    pip3 install --quiet --break-system-packages kubernetes-validate
fi

if [ ! -x node_modules/.bin/buf ]; then
  echo "installing buf from npm"
  # Pinned in package.json; no lock file, because npm drops other platforms' optional binaries from it and
  # then refuses `npm ci` on them.
  npm install --no-audit --no-fund --no-package-lock --loglevel=error
fi
