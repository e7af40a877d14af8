#!/usr/bin/env bash
# Builds what the local control plane needs, reusing cached builds:
#   - the stock control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#     kubectl) as one multi-call binary from e2e/k8s, keyed on the Go toolchain and the module's
#     go.mod/go.sum/main.go; for a GP_K8S_VERSION other than the pinned release, from a module
#     that e2e/k8s/gen-gomod.sh generates for it under the cache (so each release has its key);
#   - kwok from e2e/kwok, keyed the same way;
#   - Prometheus from e2e/prometheus, keyed the same way (it scrapes Gangplank so the e2e suite
#     can run the Grafana dashboard's queries);
#   - Helm from e2e/tools/helm, keyed the same way (e2e/up installs Gangplank's objects from the
#     chart);
#   - gangplank itself with cargo (profile from GANGPLANK_PROFILE, default debug).
# Prints the paths as shell assignments (K8S_BIN=..., KWOK_BIN=..., PROMETHEUS_BIN=...,
# HELM_BIN=..., GANGPLANK_BIN=...).
#   --control-plane-only   build (and print) only K8S_BIN, for example to build another release
#                          ahead of time: GP_K8S_VERSION=1.37.2 e2e/lib/build.sh --control-plane-only
#   --go-only              build (and print) the Go programs, not gangplank: test.sh builds them
#                          while its Rust steps run
set -euo pipefail
source "$(dirname "$0")/common.sh"
only_control_plane=false only_go=false
case ${1:-} in
  "") ;;
  --control-plane-only) only_control_plane=true ;;
  --go-only) only_go=true ;;
  *) die "unknown option $1 (build.sh takes --control-plane-only or --go-only)" ;;
esac

cargo_minor=$(sed -n 's/^k8s-openapi.*"v1_\([0-9]*\)".*/\1/p' "$REPO_DIR/Cargo.toml")
pinned_minor=$(echo "$PINNED_K8S_VERSION" | cut -d. -f2)
[[ $cargo_minor == "$pinned_minor" ]] ||
  die "Cargo.toml builds against Kubernetes 1.$cargo_minor (k8s-openapi feature v1_$cargo_minor) but e2e/versions.env pins $PINNED_K8S_VERSION: make them name the same minor"

source "$(dirname "$0")/go-build.sh"
source "$(dirname "$0")/helm.sh"

k8s_module=$E2E_DIR/k8s
if [[ $K8S_VERSION != "$PINNED_K8S_VERSION" ]]; then
  k8s_module=$CACHE_DIR/k8s-module/v$K8S_VERSION
  log "Kubernetes $K8S_VERSION (GP_K8S_VERSION) instead of the pinned $PINNED_K8S_VERSION: its build module is $k8s_module"
  "$E2E_DIR/k8s/gen-gomod.sh" "$K8S_VERSION" "$k8s_module" >&2 ||
    die "could not generate the build module of Kubernetes $K8S_VERSION"
fi
major=${K8S_VERSION%%.*}
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$k8s_minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
# The pinned release's module builds with this machine's Go (its key as before); one whose go.mod
# needs a newer Go (1.38) with NEWER_GO_TOOLCHAIN, keyed on that, as Karpenter's build is.
k8s_toolchain=$(go_toolchain_for "$k8s_module/go.mod") || die "no Go toolchain for $k8s_module"
if [[ $k8s_toolchain == local ]]; then
  K8S_BIN=$(go_build k8s "$k8s_module" . "-s -w$stamp")
else
  log "Kubernetes $K8S_VERSION's go.mod needs a newer Go than $go_version: building it with $k8s_toolchain"
  k8s_go_version=$(GOTOOLCHAIN=$k8s_toolchain go env GOVERSION) || die "could not get Go $k8s_toolchain"
  K8S_BIN=$(GOTOOLCHAIN=$k8s_toolchain go_version=$k8s_go_version go_build k8s "$k8s_module" . "-s -w$stamp")
fi
if $only_control_plane; then
  printf 'K8S_BIN=%q\n' "$K8S_BIN"
  exit 0
fi
KWOK_BIN=$(go_build kwok "$E2E_DIR/kwok" sigs.k8s.io/kwok/cmd/kwok \
  "-s -w")
# Only the file, HTTP and static service discovery: the cloud ones are most of the build.
PROMETHEUS_BIN=$(go_build prometheus "$E2E_DIR/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
  "-s -w" remove_all_sd)
HELM_BIN=$(helm_binary)
if $only_go; then
  printf 'K8S_BIN=%q\nKWOK_BIN=%q\nPROMETHEUS_BIN=%q\nHELM_BIN=%q\n' \
    "$K8S_BIN" "$KWOK_BIN" "$PROMETHEUS_BIN" "$HELM_BIN"
  exit 0
fi

profile=${GANGPLANK_PROFILE:-debug}
log "building gangplank ($profile)"
cargo_flags=()
[[ $profile == release ]] && cargo_flags+=(--release)
(cd "$REPO_DIR" && cargo build --quiet --bin gangplank "${cargo_flags[@]}")
target_dir=$(cd "$REPO_DIR" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
GANGPLANK_BIN="$target_dir/$profile/gangplank"

printf 'K8S_BIN=%q\nKWOK_BIN=%q\nPROMETHEUS_BIN=%q\nHELM_BIN=%q\nGANGPLANK_BIN=%q\n' \
  "$K8S_BIN" "$KWOK_BIN" "$PROMETHEUS_BIN" "$HELM_BIN" "$GANGPLANK_BIN"
