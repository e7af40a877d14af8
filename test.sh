#!/usr/bin/env bash
# The test command: formatting, lints, unit and handler tests, the generated-files check, a
# fixed budget of differential fuzzing against Kubernetes' own code, the Helm chart's lint and
# its agreement with manifests/, the container image (built, and run from its own file system),
# then the end-to-end suite on the local control plane (built from Go modules on first use, set
# up from the chart; the Workload API on), in two lanes of clusters at once: the suite without
# the batch operators in one; in the other the operators in every gang mode, a few gang and
# operator tests again on a cluster with the Workload API off (Kubernetes' default) whose
# scheduler sends every pod to Gangplank, the autoscaler tests, and the multi-cluster tests on a
# MultiKueue manager with two workers (e2e/multikueue); then, in whichever lane is
# free first, the chart's Deployment run from the image (two replicas and a leader handover), a
# helm upgrade from the previous release, and the demo (the README's first command) with a
# check of the report it leaves. `e2e/test` alone
# runs every test in one configuration, every operator mode included (docs/operators.md).
# Options after the script name are passed to e2e/test (for example --nodes 8).
set -euo pipefail
cd "$(dirname "$0")"
# Each step prints how long the one before it took, and the run's total so far, for the CI log.
# The Go programs the clusters run build beside the Rust steps, at a lower priority, and the
# batch operators and Karpenter at the head of the second lane, while the first lane's tests
# run: on a fresh machine the builds take most of the run's CPU, the tests little of it.
step_started=$SECONDS step_name=""
step() {
  if [[ -n $step_name ]]; then
    printf '<== %ss: %s (%ss in all)\n' "$((SECONDS - step_started))" "$step_name" "$SECONDS"
  fi
  step_started=$SECONDS step_name=$*
  if [[ -n $step_name ]]; then printf '\n==> %s\n' "$*"; fi
}
step "installing what the tests use (scripts/install-deps.sh)"
scripts/install-deps.sh
go_log=$(mktemp)
printf '\n==> the control plane, kwok, Prometheus and Helm built (e2e/lib/build.sh --go-only) beside the Rust steps (its output follows them)\n'
(nice -n 10 e2e/lib/build.sh --go-only >"$go_log" 2>&1) &
go_builds=$!
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
step "the HTML page of gangplank simulate in headless Chromium (tests/simulate_in_a_browser.rs)"
cargo test --test simulate_in_a_browser -- --ignored
trace=${GANGPLANK_TRACE_DIR:-$PWD/../shared/traces/alibaba-gpu-2023}
if [[ -f $trace/openb_pod_list_default.csv ]]; then
  step "the published Alibaba GPU trace read and mapped (src/simulate: trace, mapping)"
  GANGPLANK_TRACE_DIR=$trace cargo test --lib -- --ignored simulate::
else
  step "NOT RUN: the published-trace tests (no trace at $trace; set GANGPLANK_TRACE_DIR)"
fi
step "the Helm chart: lint, generated certificates, manifests/ rendered from it (scripts/chart)"
scripts/chart
# Before the image: on a fresh machine the previous release's binary is linked where today's
# static build goes, which scripts/check-image then builds again; cached, it builds nothing.
step "the previous release for the upgrade test: its chart, and its commit's binary in an image (scripts/previous-release; cached after the first run)"
eval "$(scripts/previous-release)"
step "the image: a static binary on nothing, run by its entrypoint as 65532, naming this commit (scripts/check-image --profile dev)"
scripts/check-image --profile dev
step "the control plane, kwok, Prometheus and Helm: the end of their build (cached after the first run), and Gangplank's"
go_status=0
wait "$go_builds" || go_status=$?
cat "$go_log"
rm -f "$go_log"
((go_status == 0)) || exit "$go_status"
GP_OPERATORS="" e2e/up --build-only

# The last steps, each run once, by whichever lane is free first (a lane claims a step by
# making its directory, which only one can): the Deployment layout's tests and the upgrade's
# (one such cluster per machine, so one lane runs both), then the demo. On a fresh machine the
# second lane builds the operators and Karpenter first, so the first lane takes them; warm, the
# second lane is done first.
claims=$(mktemp -d)
tail_steps() {
  if mkdir "$claims/deployment" 2>/dev/null; then
    # The chart's default layout run for real: its Deployment's two replicas from the image (the
    # static build scripts/check-image made above, so e2e/up's scripts/image only packs it), on a
    # node the harness runs pods on, Services routed by kube-proxy; one such cluster per machine.
    step "the chart's Deployment from the image: two replicas, gangs, a queue, a webhook refusal, a certificate rotation, a leader handover (e2e/test --layout deployment -- deployment_layout::)"
    GP_OPERATORS="" e2e/test --layout deployment --nodes 2 "$@" -- deployment_layout::
    # The previous release installed by Helm, then helm upgrade to this checkout's chart and image
    # while gangs run, wait and have binds held (docs/install.md, "Upgrading").
    step "helm upgrade from $PREVIOUS_VERSION while gangs run, wait and hold binds (e2e/test --layout deployment --chart ... --image-archive ... -- upgrade::)"
    GP_OPERATORS="" e2e/test --layout deployment --nodes 2 --chart "$PREVIOUS_CHART" \
      --image-archive "$PREVIOUS_IMAGE" "$@" -- upgrade::
  fi
  if mkdir "$claims/demo" 2>/dev/null; then
    step "the demo (e2e/demo, what ./demo.sh runs) and its report (scripts/check-demo)"
    e2e/demo
    scripts/check-demo "$GP_RUN_DIR/demo-report"
    e2e/down
  fi
}

# The end-to-end runs go in two lanes at once, each lane's clusters in a run directory of its own
# (GP_RUN_DIR): most of an end-to-end test is waiting for a controller, so two clusters share
# the 2 cores. The first lane is the suite without the batch operators; the second runs, one
# cluster after another, the operators' tests (every gang mode of each) and Spark's, the
# every-pod subset, the autoscaler tests and the multi-cluster tests. The last steps go to
# whichever lane is free first.
# The second lane's output is printed once both lanes are done.
second_lane() {
  export GP_RUN_DIR=$PWD/e2e/.run-second
  step "every batch operator and Karpenter built, at a lower priority than the first lane (e2e/up --build-only; cached after the first run)"
  nice -n 10 e2e/up --build-only --operators "training-operator kuberay mpi-operator jobset lws trainer spark-operator kueue" \
    --autoscaler karpenter
  step "the batch operators, every gang mode of each, and Spark (e2e/test -- operators:: spark::)"
  e2e/test "$@" -- operators:: spark::
  # As Kubernetes ships (the Workload API off: no Kubernetes PodGroups, and the Job controller
  # makes none for Jobs) and with the every-pod scheduler configuration (every pod's bind goes
  # to Gangplank, and its marker resource must not make gangs unschedulable): plain gangs, and
  # the operators whose pods come from batch/v1 Jobs, LeaderWorkerSet and Spark.
  step "end-to-end with the Workload API off and every pod sent to Gangplank (e2e/test --mode all-pods): gangs, Job-based operators, LeaderWorkerSet, Spark"
  GP_FEATURE_GATES="" GP_OPERATORS="mpi-operator jobset lws trainer spark-operator" e2e/test --mode all-pods "$@" -- \
    gangs::a_gang_of_eight_that_fits_is_bound_whole_within_seconds \
    gangs::two_gangs_each_needing_sixty_percent_run_one_after_the_other_whole \
    gangs::an_elastic_gang_of_four_to_eight_on_room_for_six_gets_six \
    operators::a_jobset_labelled_with_a_queue \
    operators::an_mpi_job_in_scheduler_plugins_mode \
    operators::lws::without_a_gang_provider_each_leader_worker_set_replica_is_one_gang_in_its_pod_template \
    operators::trainer:: \
    spark::
  # Karpenter on a cluster of its own: it would add nodes for the main suite's pods that are
  # meant to wait.
  step "end-to-end with a node autoscaler (e2e/test --autoscaler karpenter, the autoscaler tests)"
  GP_OPERATORS="" e2e/test --autoscaler karpenter "$@" -- autoscaler::
  # Three clusters side by side: a MultiKueue manager and two workers with Gangplank.
  step "beyond one cluster: a MultiKueue manager dispatching to two workers with Gangplank (e2e/multikueue test)"
  GP_RUN_DIR=$PWD/e2e/.run-multikueue e2e/multikueue test
  tail_steps "$@"
  step ""
}
step ""
second_log=$(mktemp)
(set -e; step_name=""; second_lane "$@") >"$second_log" 2>&1 &
second=$!
main_status=0 second_status=0
printf '\n==> second lane started (its output follows the main suite)\n'
step "end-to-end suite but the operators' tests (GP_OPERATORS=\"\" e2e/test -- --skip operators:: --skip spark::)"
GP_OPERATORS="" e2e/test "$@" -- --skip operators:: --skip spark:: || main_status=$?
step ""
# In the background so that set -e holds in it (a subshell on the left of || ignores it).
(set -e; step_name=""; export GP_RUN_DIR=$PWD/e2e/.run; tail_steps "$@"; step "") &
wait $! || main_status=$?
wait "$second" || second_status=$?
printf '\n==> the second lane (%s)\n' "$( ((second_status == 0)) && echo passed || echo "FAILED: exit $second_status")"
cat "$second_log"
rm -f "$second_log"
rm -rf "$claims"
printf '\n<== %ss in all; main suite exit %s, second lane exit %s\n' "$SECONDS" "$main_status" "$second_status"
((main_status == 0 && second_status == 0))
