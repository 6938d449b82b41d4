#!/usr/bin/env bash
# Builds a Redis image from this host's redis-server and redis-cli, for deploy/compose.yaml where the official
# `redis:7` cannot be pulled (no registry reachable, as on the machines Berth's tests run on): the two binaries and
# their libraries, /data as the working directory, imported with `docker import`.
#   BERTH_REDIS_IMAGE  the image's name (default berth-redis:local); compose.yaml takes the same variable
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/rootfs.sh

image="${BERTH_REDIS_IMAGE:-berth-redis:local}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

for name in redis-server redis-cli; do
  rootfs_binary "$root" "$(command -v "$name")" "usr/bin/$name"
done
mkdir -p "$root/data" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
printf 'root:x:0:0::/root:/usr/sbin/nologin\n' > "$root/etc/passwd"

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . |
  docker import --change 'ENV PATH=/usr/bin' --change 'WORKDIR /data' - "$image" >/dev/null
echo "$image: $(redis-server --version | awk '{print $3}'), $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
