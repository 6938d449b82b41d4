#!/usr/bin/env bash
# Replays a placement's game-server side (cycle.py) on a copy of a bench's Redis run under callgrind, and prints per
# phase the machine instructions Redis executed inside function calls, per call: unlike time, a count that does not
# move with the machine's load, so two libraries' difference shows however small. ~50× slower than cycle.sh.
# Usage: [ICOUNT_PORT=7789] icount.sh SNAPSHOT.rdb [LIBRARY.lua] — as cycle.sh's; two runs on two ports can go side
# by side. Uses /tmp/berth-icount-<port>, whose callgrind dumps (one per phase) callgrind_annotate reads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
port=${ICOUNT_PORT:-7789}
dir=/tmp/berth-icount-$port
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
sleep 0.3
rm -rf "$dir" && mkdir -p "$dir" && cp "$1" "$dir/dump.rdb"
# Counted only inside luaCallFunction: the function's Lua, its commands and the collector's steps it triggers.
(cd "$dir" && valgrind --tool=callgrind --toggle-collect=luaCallFunction --callgrind-out-file="$dir/out.%p" \
  redis-server --port "$port" --dir "$dir" --dbfilename dump.rdb --save '' >"$dir/valgrind.log" 2>&1 &)
until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do sleep 0.5; done
if [ -n "${2:-}" ]; then redis-cli -p "$port" -x FUNCTION LOAD REPLACE < "$2" >/dev/null; fi
ICOUNT_DIR="$dir" python3 "$here/cycle.py" "$port"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
