#!/usr/bin/env bash
# Builds what the local control plane needs, reusing cached builds:
#   - the stock control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#     kubectl) as one multi-call binary from e2e/k8s, keyed on the Go toolchain and the module's
#     go.mod/go.sum/main.go;
#   - kwok from e2e/kwok, keyed the same way;
#   - Prometheus from e2e/prometheus, keyed the same way (it scrapes Gangplank so the e2e suite
#     can run the Grafana dashboard's queries);
#   - Helm from e2e/tools/helm, keyed the same way (e2e/up installs Gangplank's objects from the
#     chart);
#   - gangplank itself with cargo (profile from GANGPLANK_PROFILE, default debug).
# Prints the paths as shell assignments (K8S_BIN=..., KWOK_BIN=..., PROMETHEUS_BIN=...,
# HELM_BIN=..., GANGPLANK_BIN=...).
set -euo pipefail
source "$(dirname "$0")/common.sh"

cargo_minor=$(sed -n 's/^k8s-openapi.*"v1_\([0-9]*\)".*/\1/p' "$REPO_DIR/Cargo.toml")
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
[[ $cargo_minor == "$k8s_minor" ]] ||
  die "Cargo.toml builds against Kubernetes 1.$cargo_minor (k8s-openapi feature v1_$cargo_minor) but e2e/versions.env pins $K8S_VERSION: make them name the same minor"

source "$(dirname "$0")/go-build.sh"
source "$(dirname "$0")/helm.sh"

major=${K8S_VERSION%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$k8s_minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
K8S_BIN=$(go_build k8s "$E2E_DIR/k8s" . "-s -w$stamp")
KWOK_BIN=$(go_build kwok "$E2E_DIR/kwok" sigs.k8s.io/kwok/cmd/kwok \
  "-s -w")
# Only the file, HTTP and static service discovery: the cloud ones are most of the build.
PROMETHEUS_BIN=$(go_build prometheus "$E2E_DIR/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
  "-s -w" remove_all_sd)
HELM_BIN=$(helm_binary)

echo GO-DONE
