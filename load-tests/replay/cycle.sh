#!/usr/bin/env bash
# Replays a placement's game-server side (cycle.py) on a quiet copy of a bench's Redis, twice.
# Usage: cycle.sh SNAPSHOT.rdb [LIBRARY.lua] — SNAPSHOT taken from a running placements bench with
# `redis-cli -p <its port> --rdb SNAPSHOT.rdb`; LIBRARY, a functions library to load over the snapshot's
# (another release's, or probe.py's output), named as the snapshot's is. Uses port 7788 and /tmp/berth-replay.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
redis-cli -p 7788 shutdown nosave >/dev/null 2>&1 || true
sleep 0.3
mkdir -p /tmp/berth-replay && cp "$1" /tmp/berth-replay/dump.rdb
(cd /tmp/berth-replay && redis-server --port 7788 --dir /tmp/berth-replay --dbfilename dump.rdb --daemonize yes \
  --save '' >/dev/null)
until redis-cli -p 7788 ping 2>/dev/null | grep -q PONG; do sleep 0.2; done
if [ -n "${2:-}" ]; then redis-cli -p 7788 -x FUNCTION LOAD REPLACE < "$2" >/dev/null; fi
python3 "$here/cycle.py" 7788
python3 "$here/cycle.py" 7788
