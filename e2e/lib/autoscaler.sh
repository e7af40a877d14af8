# The node autoscaler e2e/up can run beside the local cluster (--autoscaler): Karpenter with its
# kwok cloud provider, a local process built from the Go module pinned in
# e2e/autoscaler/karpenter/ and cached like the control plane. Its nodes are kwok's fake ones:
# it creates the Node objects itself (annotated kwok.x-k8s.io/node=fake, which the kwok e2e/up
# starts manages, so they turn Ready) and deletes them when it removes a node.
# Sourced by e2e/up and e2e/down; needs common.sh, go-build.sh (go_build) and operators.sh
# (established).

KNOWN_AUTOSCALERS="karpenter"
KARPENTER_DIR=$E2E_DIR/autoscaler/karpenter
# Karpenter's go.mod asks for a newer Go than the other components: this one build (and the
# module lookups for it) use this toolchain (go-toolchain.sh), which the go command downloads once.
source "$E2E_DIR/lib/go-toolchain.sh"
KARPENTER_GOTOOLCHAIN=$NEWER_GO_TOOLCHAIN

# karpenter_go ARGS...: the go command with Karpenter's toolchain, in its module.
karpenter_go() {
  (cd "$KARPENTER_DIR" && GOTOOLCHAIN=$KARPENTER_GOTOOLCHAIN go "$@")
}

# build_autoscaler NAME: prints NAME_BIN=<path>, building it if needed (keyed on the module and
# Karpenter's toolchain, like go_build's other builds).
build_autoscaler() {
  local bin version
  case $1 in
    karpenter)
      version=$(karpenter_go env GOVERSION) || die "could not get Go $KARPENTER_GOTOOLCHAIN for Karpenter"
      bin=$(GOTOOLCHAIN=$KARPENTER_GOTOOLCHAIN go_version=$version \
        go_build karpenter "$KARPENTER_DIR" sigs.k8s.io/karpenter/kwok "-s -w") ;;
    *) die "--autoscaler: unknown autoscaler '$1' (known: $KNOWN_AUTOSCALERS)" ;;
  esac
  printf '%s_BIN=%q\n' "$1" "$bin"
}

# Karpenter (sigs.k8s.io/karpenter/kwok): its CRDs (NodePool, NodeClaim, NodeOverlay,
# CapacityBuffer and the kwok provider's KWOKNodeClass) from the module, then
# e2e/autoscaler/karpenter/nodepool.yaml (the NodePool `default` and its KWOKNodeClass), then the
# process, with the admin kubeconfig, the instance types of
# e2e/autoscaler/karpenter/instance-types.json, leader election off, its metrics and health
# ports picked free (Karpenter binds them on all addresses; it has no flag for the host), and
# the NodeOverlay feature gate on (off by default in v1.15): a NodeOverlay can then add extended
# resources to the instance types, such as the marker resources Gangplank's webhook puts on the
# pods it manages, which no instance type has and for which Karpenter provisions nothing
# otherwise.
start_karpenter() {
  local dir crd health metrics
  dir=$(karpenter_go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
  for crd in "$dir"/kwok/charts/crds/*.yaml "$dir"/kwok/apis/crds/*.yaml; do
    kubectl apply --server-side -f "$crd" >/dev/null
  done
  for crd in nodepools.karpenter.sh nodeclaims.karpenter.sh nodeoverlays.karpenter.sh \
    capacitybuffers.autoscaling.x-k8s.io kwoknodeclasses.karpenter.kwok.sh; do
    wait_for 60 "the $crd CRD" established "$crd"
  done
  kubectl apply --server-side -f "$KARPENTER_DIR/nodepool.yaml" >/dev/null
  health=$(free_port)
  metrics=$(free_port)
  log "starting karpenter (kwok provider, NodePool default; metrics http://127.0.0.1:$metrics/metrics)"
  KUBECONFIG="$RUN_DIR/kubeconfig" DISABLE_LEADER_ELECTION=true FEATURE_GATES=NodeOverlay=true \
    HEALTH_PROBE_PORT=$health METRICS_PORT=$metrics \
    INSTANCE_TYPES_FILE_PATH="$KARPENTER_DIR/instance-types.json" \
    start karpenter "$karpenter_BIN"
  wait_for 120 "karpenter /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
  KARPENTER_METRICS_URL=http://127.0.0.1:$metrics
}
