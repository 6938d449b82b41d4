#!/usr/bin/env bash
# `make run`: Berth on this machine. Starts a redis-server when none answers on BERTH_REDIS_URL, builds and starts
# the four services (logs in .run/), checks that each is SERVING and lists its services by reflection, then runs
# a demo fleet and matchmaker whose pool you can watch; the fleet service launches the demo's SDK game servers
# itself (process provisioner), a matchmaker places matches through a queue over two of those fleets in two
# locations, and another allocates through Agones' allocation API from a fleet of Agones game servers under
# berth-agent. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

run_dir=.run
mkdir -p "$run_dir"
export BERTH_REDIS_URL="${BERTH_REDIS_URL:-redis://127.0.0.1:6379}"
export BERTH_AUTH_KEY_FILE="${BERTH_AUTH_KEY_FILE:-$run_dir/auth-key}"
export BERTH_CLAIM_TIMEOUT_MS="${BERTH_CLAIM_TIMEOUT_MS:-10000}"
[ -s "$BERTH_AUTH_KEY_FILE" ] || head -c 48 /dev/urandom | base64 > "$BERTH_AUTH_KEY_FILE"

pids=()
cleanup() {
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    # The supervisors' game servers first, so that none is restarted.
    for pid in "${pids[@]}"; do pkill -P "$pid" 2>/dev/null || true; done
    kill "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do pkill -P "$pid" 2>/dev/null || true; done
    wait "${pids[@]}" 2>/dev/null || true
  fi
  # The game servers berth-fleet launched outlive it by design (as instances outlive a control plane); the demo's
  # go with it.
  pkill -f "$PWD/target/release/berth-example-game-server" 2>/dev/null || true
  pkill -f "$PWD/target/release/berth-agent" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

if ! redis-cli -u "$BERTH_REDIS_URL" ping >/dev/null 2>&1; then
  hostport="${BERTH_REDIS_URL#*://}"; hostport="${hostport##*@}"; hostport="${hostport%%/*}"
  port="${hostport##*:}"
  echo "No Redis answers on $BERTH_REDIS_URL: starting redis-server on port $port (log: $run_dir/redis.log)"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --logfile "$run_dir/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

echo "Building (release)…"
cargo build --release --locked --quiet --bins -p berth-placement -p berth-session -p berth-fleet -p berth-health -p berth-runtime -p berth-sdk -p berthctl
cargo build --release --locked -p berth-sdk --example demo_fleet --quiet
cargo build --release --locked --quiet -p berth-agent --bin berth-agent --example agones_game_server

declare -A grpc=([placement]=7101 [session]=7102 [fleet]=7103 [health]=7104)
declare -A metrics=([placement]=9101 [session]=9102 [fleet]=9103 [health]=9104)
services=""
# The fleet service launches game servers that reach the health service, and keeps their output beside the logs.
export BERTH_SDK_ENDPOINT="http://127.0.0.1:${grpc[health]}" BERTH_PROCESS_LOG_DIR="$run_dir"
for name in placement session fleet health; do
  BERTH_LISTEN="127.0.0.1:${grpc[$name]}" BERTH_METRICS_LISTEN="127.0.0.1:${metrics[$name]}" \
    "target/release/berth-$name" >"$run_dir/$name.log" 2>&1 &
  pids+=($!)
  services+="${services:+,}$name=http://127.0.0.1:${grpc[$name]}"
done
for name in placement session fleet health; do
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/${grpc[$name]}") 2>/dev/null && break; sleep 0.1; done
done

cat <<TABLE

Berth is running (Redis: $BERTH_REDIS_URL)
  service          gRPC               metrics                               log
TABLE
for name in placement session fleet health; do
  printf "  berth-%-10s 127.0.0.1:%-8s http://127.0.0.1:%s/metrics   %s\n" \
    "$name" "${grpc[$name]}" "${metrics[$name]}" "$run_dir/$name.log"
done
cat <<HINT
  Fleet demo-sdk: 3 example game servers (berth-example-game-server) launched by berth-fleet; logs .run/i-*.log
  Fleets demo-eu (eu-local) and demo-us (us-local): 2 example game servers each, behind queue demo-queue
  Fleet demo-agones: 3 game servers written against Agones' SDK, each under berth-agent; a matchmaker allocates
    from it through Agones' allocation API (allocation.AllocationService on the placement port)

Tokens: target/release/berth-token --key-file $BERTH_AUTH_KEY_FILE --role operator   (or client, game-server)
berthctl: BERTH_AUTH_KEY_FILE=$BERTH_AUTH_KEY_FILE target/release/berthctl get fleets   (describe, place, scale, …; --help)

HINT
target/release/examples/demo_fleet --services "$services" --auth-key-file "$BERTH_AUTH_KEY_FILE" \
  --sdk-launch-path "$PWD/target/release/berth-example-game-server" --sdk-servers 3 --placement-instances 2 \
  --agent-path "$PWD/target/release/berth-agent" \
  --agones-server-path "$PWD/target/release/examples/agones_game_server" &
pids+=($!)
wait "${pids[-1]}"
