#!/usr/bin/env bash
# Installs what `make test`, `make lint`, `make run` and `make bench` need on a fresh machine: redis-server (the
# tests start their own processes of it) and buf (from the npm package @bufbuild/buf, for `buf lint`).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "installing redis-server"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server >/dev/null
fi

if [ ! -x node_modules/.bin/buf ]; then
  echo "installing buf from npm"
  # Pinned in package.json; no lock file, because npm drops other platforms' optional binaries from it and
  # then refuses `npm ci` on them.
  npm install --no-audit --no-fund --no-package-lock --loglevel=error
fi
