#!/usr/bin/env bash
# Renders each Kubernetes overlay (deploy/kubernetes/overlays/*) with kubectl's built-in kustomize, a throwaway
# signing key standing in for the git-ignored secret, and validates every object it yields offline and strictly
# (unknown fields are errors) against the schemas of a current Kubernetes release (kubernetes-validate).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION="${BERTH_LINT_KUBERNETES_VERSION:-1.33.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cp -r deploy/kubernetes "$work/"
head -c 48 /dev/urandom | base64 > "$work/kubernetes/base/secrets/auth-key"
for overlay in "$work"/kubernetes/overlays/*/; do
  name="$(basename "$overlay")"
  kubectl kustomize "$overlay" > "$work/$name.yaml"
  objects="$(grep -c '^kind:' "$work/$name.yaml")"
  kubernetes-validate --strict --quiet -k "$KUBERNETES_VERSION" "$work/$name.yaml"
  echo "deploy/kubernetes/overlays/$name: $objects objects valid against Kubernetes $KUBERNETES_VERSION (strict)"
done
