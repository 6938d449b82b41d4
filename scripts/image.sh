#!/usr/bin/env bash
# Builds Berth's container image where no image registry is reachable (and anywhere else): a root filesystem of the
# four services, berth-token and berthctl (debug info stripped), the shared libraries they load, a CA bundle and a
# non-root user (uid/gid 10001), imported with `docker import`. No shell, no package manager, no compiler.
#   BERTH_IMAGE_BINARIES  the directory of built binaries (default target/release: `make build` first)
#   BERTH_IMAGE           the image's name (default berth:local)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/rootfs.sh

bins="${BERTH_IMAGE_BINARIES:-target/release}"
image="${BERTH_IMAGE:-berth:local}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
for name in berth-placement berth-session berth-fleet berth-health berth-token berthctl; do
  # `cargo test` builds no berth-token (its package has no integration tests); berthctl token mints the same tokens.
  if [ "$name" = berth-token ] && [ ! -e "$bins/$name" ]; then
    echo "berth-token is not built in $bins: left out (berthctl token mints the same tokens)"
    continue
  fi
  rootfs_binary "$root" "$bins/$name" "usr/local/bin/$name"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'root:x:0:0::/root:/usr/sbin/nologin\nberth:x:10001:10001::/nonexistent:/usr/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nberth:x:10001:\n' > "$root/etc/group"

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . |
  docker import --change 'USER 10001:10001' --change 'ENV PATH=/usr/local/bin' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' - "$image" >/dev/null
echo "$image: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
