#!/usr/bin/env bash
# Checks the deployment files: the Prometheus alerting rules (promtool check, and their unit tests); the Compose
# file with `docker-compose config` (Debian's docker-compose, the oldest Compose a studio is likely to run); and each
# Kubernetes overlay (deploy/kubernetes/overlays/*) rendered with kubectl's built-in kustomize, a throwaway signing
# key standing in for the git-ignored secret, every object it yields validated offline and strictly (unknown fields
# are errors) against a current Kubernetes release's schemas (kubernetes-validate).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION="${BERTH_LINT_KUBERNETES_VERSION:-1.33.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

promtool check rules deploy/prometheus/rules.yaml >/dev/null
promtool test rules deploy/prometheus/rules.test.yaml >/dev/null
echo "deploy/prometheus/rules.yaml: valid, and its unit tests pass (promtool)"

docker-compose -f deploy/compose.yaml config -q
echo "deploy/compose.yaml: valid (docker-compose config)"

cp -r deploy/kubernetes "$work/"
head -c 48 /dev/urandom | base64 > "$work/kubernetes/base/secrets/auth-key"
for overlay in "$work"/kubernetes/overlays/*/; do
  name="$(basename "$overlay")"
  kubectl kustomize "$overlay" > "$work/$name.yaml"
  objects="$(grep -c '^kind:' "$work/$name.yaml")"
  kubernetes-validate --strict --quiet -k "$KUBERNETES_VERSION" "$work/$name.yaml"
  echo "deploy/kubernetes/overlays/$name: $objects objects valid against Kubernetes $KUBERNETES_VERSION (strict)"
done
