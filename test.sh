#!/usr/bin/env bash
# The test command: formatting, lints, unit and handler tests, the generated-files check, a
# fixed budget of differential fuzzing against Kubernetes' own code, the Helm chart's lint and
# its agreement with manifests/, then the end-to-end suite on the local control plane (built
# from Go modules on first use, set up from the chart; the Workload API on), its gang, queue and
# operator tests again with the Workload API off (Kubernetes' default), its gang, operator and
# Spark tests again on a cluster whose scheduler sends every pod to Gangplank; last, the demo (the README's first
# command) on a cluster of its own, and a check of the report it leaves.
# Options after the script name are passed to e2e/test (for example --nodes 8).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
step() { printf '\n==> %s\n' "$*"; }
step "cargo fmt --all --check"
cargo fmt --all --check
step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo test --workspace (unit, handler and generated-file tests)"
cargo test --workspace
step "fuzzing against Kubernetes' own parsers (scripts/fuzz)"
scripts/fuzz
step "the HTML report in headless Chromium (tests/report_in_a_browser.rs)"
cargo test --test report_in_a_browser -- --ignored
step "the Helm chart: lint, generated certificates, manifests/ rendered from it (scripts/chart)"
scripts/chart
step "end-to-end suite (e2e/test)"
e2e/test "$@"
step "end-to-end with the Workload API off, as Kubernetes ships it (GenericWorkload off): the gang, queue and operator tests"
GP_FEATURE_GATES="" e2e/test "$@" -- gangs:: queues:: reclaim:: backfill:: topology:: operators:: \
  --skip operators::a_kubernetes_pod_group_of_the_workload_api
# The every-pod scheduler configuration on a cluster of its own: gangs still bind whole when
# Gangplank sees every pod (and its marker resource does not make them unschedulable).
step "end-to-end, every pod sent to Gangplank (e2e/test --mode all-pods, the gang, operator and Spark tests that hold in it)"
e2e/test --mode all-pods "$@" -- \
  gangs::a_gang_of_eight_that_fits_is_bound_whole_within_seconds \
  gangs::two_gangs_each_needing_sixty_percent_run_one_after_the_other_whole \
  gangs::an_elastic_gang_of_four_to_eight_on_room_for_six_gets_six \
  operators:: spark::
# Karpenter (its kwok provider, built with GOTOOLCHAIN=go1.27.3) on a cluster of its own: it
# would add nodes for the main suite's pods that are meant to wait.
step "end-to-end with a node autoscaler (e2e/test --autoscaler karpenter, the autoscaler tests)"
GP_OPERATORS="" e2e/test --autoscaler karpenter "$@" -- autoscaler::
step "the demo (e2e/demo, what ./demo.sh runs) and its report (scripts/check-demo)"
e2e/demo
scripts/check-demo
e2e/down
