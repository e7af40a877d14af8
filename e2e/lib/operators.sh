# The batch operators e2e/up can run beside the local cluster (--operators), as local processes
# built from the Go modules pinned in e2e/operators/<name>/ and cached like the control plane.
# Each runs with the admin kubeconfig, its CRDs applied from the same module, in the gang mode
# users set to get whole gangs. Sourced by e2e/up; needs common.sh and go-build.sh.

KNOWN_OPERATORS="training-operator kuberay mpi-operator jobset lws trainer spark-operator kueue"

# established CRD: the CustomResourceDefinition CRD is served (kubectl wait fails on a CRD too
# new to have conditions).
established() {
  [[ $(kubectl get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}') == True ]]
}

# secret_files NAMESPACE NAME DIR KEY...: writes each KEY of the Secret, decoded, to DIR/KEY,
# all from one read of it, so that a key and its certificate match; the files appear whole, in
# the order given. Fails, writing nothing, while the Secret lacks one of them.
secret_files() {
  local namespace=$1 name=$2 dir=$3; shift 3
  kubectl get secret "$name" -n "$namespace" -o json | python3 -c '
import base64, json, os, sys
data = json.load(sys.stdin).get("data") or {}
dir, keys = sys.argv[1], sys.argv[2:]
if not all(data.get(k) for k in keys):
    sys.exit(1)
for k in keys:
    with open(os.path.join(dir, k + ".tmp"), "wb") as f:
        f.write(base64.b64decode(data[k]))
    os.replace(os.path.join(dir, k + ".tmp"), os.path.join(dir, k))
' "$dir" "$@"
}

# module_dir NAME MODULE: where the module cache holds MODULE, as e2e/operators/NAME pins it.
module_dir() {
  (cd "$E2E_DIR/operators/$1" && go list -m -f '{{.Dir}}' "$2")
}

# build_operator NAME: prints NAME_BIN=<path> (NAME with - as _), building it if needed.
build_operator() {
  local bin home
  case $1 in
    training-operator)
      bin=$(go_build training-operator "$E2E_DIR/operators/training-operator" \
        github.com/kubeflow/training-operator/cmd/training-operator.v1 "-s -w") ;;
    kuberay)
      bin=$(go_build kuberay "$E2E_DIR/operators/kuberay" \
        github.com/ray-project/kuberay/ray-operator "-s -w") ;;
    mpi-operator)
      bin=$(go_build mpi-operator "$E2E_DIR/operators/mpi-operator" \
        github.com/kubeflow/mpi-operator/cmd/mpi-operator "-s -w") ;;
    jobset)
      bin=$(go_build jobset "$E2E_DIR/operators/jobset" sigs.k8s.io/jobset "-s -w") ;;
    lws)
      bin=$(go_build lws "$E2E_DIR/operators/lws" sigs.k8s.io/lws/cmd "-s -w") ;;
    trainer)
      bin=$(go_build trainer "$E2E_DIR/operators/trainer" \
        github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "-s -w") ;;
    spark-operator)
      bin=$(go_build spark-operator "$E2E_DIR/operators/spark-operator" \
        github.com/kubeflow/spark-operator/v2/cmd/operator "-s -w")
      home=$(spark_home) || exit 1
      printf 'spark_operator_HOME=%q\n' "$home" ;;
    kueue)
      bin=$(go_build kueue "$E2E_DIR/operators/kueue" sigs.k8s.io/kueue/cmd/kueue "-s -w") ;;
    *) die "--operators: unknown operator '$1' (known: $KNOWN_OPERATORS)" ;;
  esac
  printf '%s_BIN=%q\n' "${1//-/_}" "$bin"
}

# Namespaces the training-operator instances watch, one per gang mode (the suite's tests of
# that operator create their jobs there).
TRAINING_OPERATOR_NAMESPACES="training-operator training-operator-volcano training-operator-plain"

# Kubeflow's training-operator for PyTorchJobs, run three times, once per gang mode users set,
# each confined to its own namespace (--namespace) so that no two reconcile the same job:
# - in namespace training-operator, --gang-scheduler-name scheduler-plugins-scheduler: it
#   creates a scheduling.x-k8s.io PodGroup per job and names that scheduler on the pods;
# - in namespace training-operator-volcano, --gang-scheduler-name volcano: it creates a
#   scheduling.volcano.sh PodGroup per job, creates the pods only once that PodGroup's phase
#   leaves Pending, and names the scheduler volcano on them;
# - in namespace training-operator-plain, no gang flag: no PodGroup, pods on the default
#   scheduler (Gangplank groups them by the job that controls them).
# (The shipped scheduler configuration serves both names.) Their webhook servers run: the first
# generates the certificates into the namespace kubeflow's Secret, all wait for them in
# $TMPDIR/k8s-webhook-server/serving-certs (in a pod, the Secret mounted there; here, copied there
# from the Secret, with TMPDIR the run directory's training-operator-tmp, so that clusters side
# by side keep theirs apart; its certificate rotator, which looked in /tmp's alone, looks there
# too by a build-time patch, e2e/operators/training-operator/*.sed) and until they have put the
# CA into their ValidatingWebhookConfiguration; the
# others find them valid and keep them. So that configuration exists, but with a rule no
# request matches (its certificate names a Service, not 127.0.0.1): the suite tests
# scheduling, not the operator's validation.
start_training_operator() {
  local dir webhook
  dir=$(module_dir training-operator github.com/kubeflow/training-operator)
  kubectl apply --server-side -f "$dir/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" >/dev/null
  wait_for 60 "the PyTorchJob CRD" established pytorchjobs.kubeflow.org
  kubectl create namespace kubeflow >/dev/null
  kubectl create secret generic training-operator-webhook-cert -n kubeflow >/dev/null
  webhook=$(free_port)
  # Certificates of an earlier run must not be taken for this one's.
  local tmp="$RUN_DIR/training-operator-tmp"
  local certs="$tmp/k8s-webhook-server/serving-certs"
  rm -rf "$certs" && mkdir -p "$certs"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validator.training-operator.kubeflow.org}
webhooks:
- name: validator.pytorchjob.training-operator.kubeflow.org
  clientConfig: {url: "https://127.0.0.1:$webhook/validate-kubeflow-org-v1-pytorchjob"}
  rules: [{apiGroups: [kubeflow.org], apiVersions: [v1], operations: [CONNECT], resources: [pytorchjobs]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
EOF
  local namespace gang health port first=1
  for namespace in $TRAINING_OPERATOR_NAMESPACES; do
    case $namespace in
      *-volcano) gang=volcano ;;
      *-plain) gang= ;;
      *) gang=scheduler-plugins-scheduler ;;
    esac
    health=$(free_port)
    if [[ $first ]]; then port=$webhook; else port=$(free_port); fi
    log "starting training-operator (PyTorchJob in namespace $namespace, gang scheduler name '$gang')"
    start_training_operator_in "$namespace" "$gang" "$health" "$port" "$tmp"
    if [[ $first ]]; then
      # The operator starts serving once tls.crt exists, so the key goes first.
      wait_for 60 "training-operator's certificates in its Secret" \
        secret_files kubeflow training-operator-webhook-cert "$certs" tls.key tls.crt
      first=
    fi
    local ready=0
    wait_while_running "$namespace" 120 "training-operator ($gang) /readyz" \
      curl -fsS "http://127.0.0.1:$health/readyz" || ready=$?
    if ((ready == 2)); then
      # Exited: started once more, as the kubelet restarts an operator's container.
      last_words
      log "starting training-operator in namespace $namespace again"
      start_training_operator_in "$namespace" "$gang" "$health" "$port" "$tmp"
      ready=0
      wait_while_running "$namespace" 120 "training-operator ($gang) /readyz" \
        curl -fsS "http://127.0.0.1:$health/readyz" || ready=$?
    fi
    ((ready == 0)) || return 1
  done
}

# start_training_operator_in NAMESPACE GANG HEALTH_PORT WEBHOOK_PORT TMPDIR: one instance of
# the operator, watching NAMESPACE.
start_training_operator_in() {
  local namespace=$1 gang=$2 health=$3 port=$4 tmp=$5
  MY_POD_NAMESPACE=kubeflow KUBECONFIG="$RUN_DIR/kubeconfig" start "$namespace" \
    env TMPDIR="$tmp" "$training_operator_BIN" --enable-scheme=pytorchjob --namespace="$namespace" \
    --gang-scheduler-name="$gang" \
    --metrics-bind-address="127.0.0.1:$(free_port)" --health-probe-bind-address="127.0.0.1:$health" \
    --webhook-server-port="$port"
}

# Namespaces the KubeRay instances watch (the suite's tests of that operator create their
# RayClusters there): the first list for --batch-scheduler=scheduler-plugins, the second for
# --batch-scheduler=volcano.
KUBERAY_NAMESPACES="kuberay,kuberay-plain kuberay-volcano"

# KubeRay's ray-operator for RayClusters, run twice, each confined to its namespaces
# (--watch-namespace) so that the two never reconcile the same cluster:
# - --batch-scheduler=scheduler-plugins (namespaces kuberay and kuberay-plain): a RayCluster
#   labelled ray.io/gang-scheduling-enabled gets a scheduling.x-k8s.io PodGroup (head plus the
#   workers' desired replicas), and every RayCluster's pods name scheduler-plugins-scheduler;
# - --batch-scheduler=volcano (namespace kuberay-volcano): every RayCluster gets a
#   scheduling.volcano.sh PodGroup named ray-<cluster>-pg, with the queue of the RayCluster's
#   label volcano.sh/queue-name, and its pods carry that label, Volcano's group annotation and
#   the scheduler name volcano.
# Leader election and the webhooks are off (the defaults when run outside a cluster).
start_kuberay() {
  local dir health namespaces scheduler
  dir=$(module_dir kuberay github.com/ray-project/kuberay/ray-operator)
  # All three kinds: the operator runs a controller for each and stops when one never syncs.
  for kind in rayclusters rayjobs rayservices; do
    kubectl apply --server-side -f "$dir/config/crd/bases/ray.io_$kind.yaml" >/dev/null
    wait_for 60 "the $kind CRD" established "$kind.ray.io"
  done
  for namespaces in $KUBERAY_NAMESPACES; do
    case $namespaces in
      *volcano*) scheduler=volcano ;;
      *) scheduler=scheduler-plugins ;;
    esac
    health=$(free_port)
    log "starting kuberay (RayCluster in namespaces $namespaces, batch scheduler $scheduler)"
    KUBECONFIG="$RUN_DIR/kubeconfig" start "kuberay-$scheduler" "$kuberay_BIN" \
      --batch-scheduler="$scheduler" --watch-namespace="$namespaces" \
      --enable-leader-election=false --metrics-addr="127.0.0.1:$(free_port)" \
      --health-probe-bind-address="127.0.0.1:$health"
    wait_for 120 "kuberay ($scheduler) /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
  done
}

# Namespaces the MPI operator instances watch, one per gang mode (the suite's tests of that
# operator create their MPIJobs there); each instance's process is named after its namespace.
MPI_OPERATOR_NAMESPACES="mpi-operator mpi-operator-volcano mpi-operator-plain"

# The MPI operator (kubeflow.org/v2beta1 MPIJob: a launcher run as a batch/v1 Job the MPIJob
# controls, and worker pods), run three times, each confined to its namespace (--namespace):
# - in namespace mpi-operator, --gang-scheduling scheduler-plugins-scheduler: a
#   scheduling.x-k8s.io PodGroup per MPIJob (launcher plus workers), that scheduler named on
#   the pods;
# - in namespace mpi-operator-volcano, --gang-scheduling volcano: a scheduling.volcano.sh
#   PodGroup, the scheduler volcano;
# - in namespace mpi-operator-plain, no gang flag (Gangplank groups launcher and workers by the
#   MPI operator's labels).
# It always runs leader election: each instance locks in a namespace of its own, made here
# (NAMESPACE-lock), and exits when it cannot renew its Lease (the suite's fault tests restart
# the API server), so it runs under e2e/lib/restarting, restarted as its pod would be. Its
# health check, on a fixed port upstream, listens where MPI_OPERATOR_HEALTH_ADDRESS says
# (e2e/operators/mpi-operator/health-address.sed). It has no webhook.
start_mpi_operator() {
  local dir namespace gang health
  dir=$(module_dir mpi-operator github.com/kubeflow/mpi-operator)
  kubectl apply --server-side -f "$dir/manifests/base/kubeflow.org_mpijobs.yaml" >/dev/null
  wait_for 60 "the MPIJob CRD" established mpijobs.kubeflow.org
  for namespace in $MPI_OPERATOR_NAMESPACES; do
    case $namespace in
      *-volcano) gang=volcano ;;
      *-plain) gang= ;;
      *) gang=scheduler-plugins-scheduler ;;
    esac
    kubectl create namespace "$namespace-lock" >/dev/null
    health=$(free_port)
    log "starting mpi-operator (MPIJob in namespace $namespace, gang scheduling '$gang')"
    MPI_OPERATOR_HEALTH_ADDRESS="127.0.0.1:$health" KUBECONFIG="$RUN_DIR/kubeconfig" \
      start "$namespace" "$E2E_DIR/lib/restarting" "$mpi_operator_BIN" \
      --namespace="$namespace" --lock-namespace="$namespace-lock" --gang-scheduling="$gang" \
      --kube-api-qps=50 --kube-api-burst=100
    wait_for 120 "mpi-operator ($namespace) /healthz" curl -fsS "http://127.0.0.1:$health/healthz"
  done
}

# JobSet's controller manager (jobset.x-k8s.io/v1alpha2 JobSet: child batch/v1 Jobs it labels
# with the JobSet's name and UID), which has no gang mode: Gangplank groups all its Jobs' pods
# by those labels. It runs with its webhooks, as in a cluster: the JobSet defaulting and
# validating webhooks and its pod webhooks (pods with JobSet's labels only), registered here
# with a URL on 127.0.0.1 and a certificate made by webhooks/gen-certs.sh (its own certificate
# management, which needs a Service, is off). Leader election is off and metrics are not served.
start_jobset() {
  local dir certs webhook health ca
  dir=$(module_dir jobset sigs.k8s.io/jobset)
  kubectl apply --server-side -f "$dir/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" >/dev/null
  wait_for 60 "the JobSet CRD" established jobsets.jobset.x-k8s.io
  certs="$RUN_DIR/pki/jobset"
  "$REPO_DIR/webhooks/gen-certs.sh" "$certs" localhost 127.0.0.1 >/dev/null
  webhook=$(free_port)
  health=$(free_port)
  cat >"$RUN_DIR/jobset-config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $webhook, certDir: "$certs"}
EOF
  log "starting jobset (all namespaces)"
  KUBECONFIG="$RUN_DIR/kubeconfig" start jobset "$jobset_BIN" --config="$RUN_DIR/jobset-config.yaml" \
    --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address="127.0.0.1:$health"
  wait_for 120 "jobset /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
  ca=$(base64 -w0 <"$certs/ca.crt")
  local url="https://127.0.0.1:$webhook"
  local pods="objectSelector: {matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]}"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: jobset-mutating-webhook-configuration}
webhooks:
- name: mjobset.kb.io
  clientConfig: {url: "$url/mutate-jobset-x-k8s-io-v1alpha2-jobset", caBundle: "$ca"}
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE], resources: [jobsets]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: mpod.kb.io
  clientConfig: {url: "$url/mutate--v1-pod", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  $pods
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: jobset-validating-webhook-configuration}
webhooks:
- name: vjobset.kb.io
  clientConfig: {url: "$url/validate-jobset-x-k8s-io-v1alpha2-jobset", caBundle: "$ca"}
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE, UPDATE], resources: [jobsets]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: vpod.kb.io
  clientConfig: {url: "$url/validate--v1-pod", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  $pods
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
EOF
}

# LeaderWorkerSet's controller manager (leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: per
# replica a leader pod, from a StatefulSet the LeaderWorkerSet owns, and its workers, from a
# StatefulSet the leader pod owns), with its webhooks, as in a cluster: its pod webhook gives each
# leader its group key (leaderworkerset.sigs.k8s.io/group-key) and, with the Volcano provider,
# each pod its Volcano PodGroup's name. They are registered here under upstream's names, with a
# URL on 127.0.0.1 and a certificate made by webhooks/gen-certs.sh (its own certificate
# management, which needs a Service, is off: internalCertManagement.enable false in its
# configuration file). Leader election is off and metrics are not served.
# It has no flag to confine it to namespaces, so its two gang modes cannot run side by side as
# the other operators' do: component lws (started here) runs with no gang provider (Gangplank
# groups each replica by LWS's group key and size), component lws-volcano (its command line
# recorded for e2e/component, not started) with the Volcano provider
# (gangSchedulingManagement.schedulerProvider: volcano): one Volcano PodGroup per replica. Both
# listen on the same ports; a test swaps one for the other (tests/e2e/operators/lws.rs), never
# running both. LWS_HEALTH_URL (in e2e/.run/env) is where the running one answers /readyz.
start_lws() {
  local dir certs webhook health mode config
  dir=$(module_dir lws sigs.k8s.io/lws)
  kubectl apply --server-side -f "$dir/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml" >/dev/null
  wait_for 60 "the LeaderWorkerSet CRD" established leaderworkersets.leaderworkerset.x-k8s.io
  # Its DisaggregatedSet controller runs too, and stops the process when its kind is not served.
  kubectl apply --server-side -f "$dir/config/crd/bases/disaggregatedset.x-k8s.io_disaggregatedsets.yaml" >/dev/null
  wait_for 60 "the DisaggregatedSet CRD" established disaggregatedsets.disaggregatedset.x-k8s.io
  certs="$RUN_DIR/pki/lws"
  "$REPO_DIR/webhooks/gen-certs.sh" "$certs" localhost 127.0.0.1 >/dev/null
  webhook=$(free_port)
  health=$(free_port)
  for mode in none volcano; do
    config="$RUN_DIR/lws-$mode-config.yaml"
    cat >"$config" <<EOF
apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $webhook, certDir: "$certs"}
health: {healthProbeBindAddress: "127.0.0.1:$health"}
metrics: {bindAddress: "0"}
EOF
    if [[ $mode == volcano ]]; then
      echo "gangSchedulingManagement: {schedulerProvider: volcano}" >>"$config"
    fi
  done
  log "starting lws (all namespaces, no gang provider; lws-volcano recorded for e2e/component)"
  start lws "$lws_BIN" --config="$RUN_DIR/lws-none-config.yaml" --leader-elect=false \
    --kubeconfig="$RUN_DIR/kubeconfig"
  record lws-volcano "$lws_BIN" --config="$RUN_DIR/lws-volcano-config.yaml" --leader-elect=false \
    --kubeconfig="$RUN_DIR/kubeconfig"
  LWS_HEALTH_URL="http://127.0.0.1:$health"
  wait_for 120 "lws /readyz" curl -fsS "$LWS_HEALTH_URL/readyz"
  local ca url="https://127.0.0.1:$webhook"
  ca=$(base64 -w0 <"$certs/ca.crt")
  local pods="objectSelector: {matchExpressions: [{key: leaderworkerset.sigs.k8s.io/name, operator: Exists}]}"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: lws-mutating-webhook-configuration}
webhooks:
- name: mleaderworkerset.kb.io
  clientConfig: {url: "$url/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", caBundle: "$ca"}
  rules: [{apiGroups: [leaderworkerset.x-k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [leaderworkersets]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: mpod.kb.io
  clientConfig: {url: "$url/mutate--v1-pod", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  $pods
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: lws-validating-webhook-configuration}
webhooks:
- name: vleaderworkerset.kb.io
  clientConfig: {url: "$url/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset", caBundle: "$ca"}
  rules: [{apiGroups: [leaderworkerset.x-k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [leaderworkersets]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: vpod.kb.io
  clientConfig: {url: "$url/validate--v1-pod", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  $pods
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: vdisaggregatedset.kb.io
  clientConfig: {url: "$url/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset", caBundle: "$ca"}
  rules: [{apiGroups: [disaggregatedset.x-k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [disaggregatedsets]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
EOF
}

# Kubeflow Trainer's controller manager (trainer.kubeflow.org/v1alpha1 TrainJob, rendered
# through its TrainingRuntime or ClusterTrainingRuntime into a JobSet, so it needs jobset
# started first), with its webhooks, as in a cluster: TrainJob defaulting and validation, and
# the runtimes' validation, registered here under upstream's names with a URL on 127.0.0.1 and a
# certificate made by webhooks/gen-certs.sh. Its own certificate management, which needs a
# Service, is off (certManagement.enable false); with it off the manager reads the certificate
# from controller-runtime's default directory under the temporary directory, so it runs with a
# TMPDIR of its own (the training-operator's certificates live in the shared one). Leader
# election is off and metrics are not served. It has no gang flag: a runtime's
# spec.podGroupPolicy (coscheduling or volcano) says whether Trainer writes a PodGroup.
start_trainer() {
  local dir certs webhook health tmp config
  established jobsets.jobset.x-k8s.io ||
    die "--operators: trainer renders TrainJobs into JobSets: list jobset before it"
  dir=$(module_dir trainer github.com/kubeflow/trainer/v2)
  for kind in trainjobs trainingruntimes clustertrainingruntimes; do
    kubectl apply --server-side -f "$dir/manifests/base/crds/trainer.kubeflow.org_$kind.yaml" >/dev/null
    wait_for 60 "the $kind CRD" established "$kind.trainer.kubeflow.org"
  done
  tmp="$RUN_DIR/trainer-tmp"
  certs="$tmp/k8s-webhook-server/serving-certs"
  "$REPO_DIR/webhooks/gen-certs.sh" "$certs" localhost 127.0.0.1 >/dev/null
  webhook=$(free_port)
  health=$(free_port)
  config="$RUN_DIR/trainer-config.yaml"
  cat >"$config" <<YAML
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health: {healthProbeBindAddress: "127.0.0.1:$health", readinessEndpointName: readyz, livenessEndpointName: healthz}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $webhook}
leaderElection: {leaderElect: false}
certManagement: {enable: false}
YAML
  log "starting trainer (TrainJob in all namespaces; gangs as each runtime's podGroupPolicy says)"
  TMPDIR="$tmp" KUBECONFIG="$RUN_DIR/kubeconfig" start trainer "$trainer_BIN" --config="$config"
  wait_for 120 "trainer /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
  local ca url="https://127.0.0.1:$webhook" kind validators=""
  ca=$(base64 -w0 <"$certs/ca.crt")
  # One validating webhook per kind, named and routed as upstream's manifests do.
  for kind in clustertrainingruntime trainingruntime trainjob; do
    validators+="
- name: validator.$kind.trainer.kubeflow.org
  clientConfig: {url: \"$url/validate-trainer-kubeflow-org-v1alpha1-$kind\", caBundle: \"$ca\"}
  rules: [{apiGroups: [trainer.kubeflow.org], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [${kind}s]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail"
  done
  kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: defaulter.trainer.kubeflow.org}
webhooks:
- name: defaulter.trainjob.trainer.kubeflow.org
  clientConfig: {url: "$url/mutate-trainer-kubeflow-org-v1alpha1-trainjob", caBundle: "$ca"}
  rules: [{apiGroups: [trainer.kubeflow.org], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [trainjobs]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validator.trainer.kubeflow.org}
webhooks:$validators
YAML
}

# spark_home: prints the SPARK_HOME spark-operator's spark-submit runs from, making it if needed
# (cached like the operators): the jars of Spark's Kubernetes submission client from Maven
# Central (e2e/operators/spark-operator/spark/pom.xml, fetched by Maven into its local
# repository), a RELEASE file (Spark's launcher then takes SPARK_HOME/jars as its class path)
# and bin/spark-submit (that directory's spark-submit: Spark's own scripts are not published on
# Maven Central; it runs Spark's launcher as Spark's bin/spark-class does).
spark_home() {
  local source="$E2E_DIR/operators/spark-operator/spark" home
  home="$CACHE_DIR/spark-$(cat "$source"/* <(java -version 2>&1) | sha256sum | cut -c1-16)"
  if [[ ! -x $home/bin/spark-submit ]]; then
    log "fetching Spark's jars with Maven (cold fetches take a minute or two; cached in $home)"
    rm -rf "$home.tmp" && mkdir -p "$home.tmp/bin"
    mvn -q -B -f "$source/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$home.tmp/jars" >&2 || die "fetching Spark's jars failed"
    touch "$home.tmp/RELEASE"
    cp "$source/spark-submit" "$home.tmp/bin/spark-submit"
    rm -rf "$home" && mv "$home.tmp" "$home"
  fi
  echo "$home"
}

# Namespace the spark-operator watches (the suite's tests of that operator create their
# SparkApplications there).
SPARK_OPERATOR_NAMESPACE=spark-operator

# Kubeflow's spark-operator (sparkoperator.k8s.io/v1beta2 SparkApplication), its controller only
# (`controller start`), confined to its namespace (--namespaces), with batch schedulers enabled
# (--enable-batch-scheduler) and none by default: an application with `spec.batchScheduler:
# volcano` gets a scheduling.volcano.sh PodGroup of minMember 1 whose minResources are its driver
# and executors, named on its pods by Volcano's group annotation; one without gets no PodGroup.
# It submits each application by running $SPARK_HOME/bin/spark-submit (spark_home), which creates
# the driver pod through the API server the operator names from KUBERNETES_SERVICE_HOST and
# _PORT (set here to the local API server), authenticated by the kubeconfig in KUBECONFIG. Its
# pod webhook (the `webhook start` command) is not run: it completes pods with what the
# application's spec says beyond Spark's own pod templates, which nothing here asks for. Leader
# election is off (its default), and metrics are not served.
start_spark_operator() {
  local dir health port
  dir=$(module_dir spark-operator github.com/kubeflow/spark-operator/v2)
  # All three kinds: the controller manager runs a controller for each.
  for kind in sparkapplications scheduledsparkapplications sparkconnects; do
    kubectl apply --server-side -f "$dir/config/crd/bases/sparkoperator.k8s.io_$kind.yaml" >/dev/null
    wait_for 60 "the $kind CRD" established "$kind.sparkoperator.k8s.io"
  done
  health=$(free_port)
  port=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  port=${port##*:}
  log "starting spark-operator (SparkApplication in namespace $SPARK_OPERATOR_NAMESPACE, batch schedulers on)"
  # Its environment is part of the recorded command line, so that e2e/component restarts it whole.
  start spark-operator env SPARK_HOME="$spark_operator_HOME" KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$port" KUBECONFIG="$RUN_DIR/kubeconfig" \
    "$spark_operator_BIN" controller start \
    --namespaces="$SPARK_OPERATOR_NAMESPACE" --enable-batch-scheduler=true \
    --enable-ui-service=false --metrics-bind-address=0 \
    --health-probe-bind-address="127.0.0.1:$health"
  wait_for 120 "spark-operator /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
}

# kueue_crds: Kueue's CRDs, as its module ships them (config/components/crd/bases), served, and
# its namespace kueue-system.
kueue_crds() {
  local dir
  dir=$(module_dir kueue sigs.k8s.io/kueue)
  kubectl apply --server-side -f "$dir/config/components/crd/bases/" >/dev/null
  kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  for crd in admissionchecks clusterqueues localqueues resourceflavors workloads; do
    wait_for 60 "the Kueue $crd CRD" established "$crd.kueue.x-k8s.io"
  done
}

# Kueue's controller manager (kueue.x-k8s.io/v1beta2: ClusterQueues, LocalQueues, Workloads,
# AdmissionChecks), with the webhooks that hold a batch/v1 Job labelled with a LocalQueue
# (kueue.x-k8s.io/queue-name) suspended until Kueue admits it, and that default and validate
# Workloads: registered here under upstream's names with a URL on 127.0.0.1 and a certificate
# made by webhooks/gen-certs.sh (its own certificate management, which needs a Service and
# conversion webhooks in its CRDs, is off; the CRDs are the module's bases, served without
# conversion, so clients use v1beta2 only). Kueue reads its metrics certificate from the
# directory KUEUE_METRICS_CERTS names (a build-time patch, e2e/operators/kueue/*.sed), the
# same certificate. Leader election and the visibility server are off; the batch/Job
# integration runs, and the JobSet one where the JobSet operator runs (its webhooks are
# registered either way, for JobSets labelled with a queue). It works in namespace
# kueue-system, which this creates.
# With GP_KUEUE_WORKERS (run directories of other local clusters, e2e/multikueue) this Kueue is
# a MultiKueue manager: a MultiKueueCluster worker-<i> for each, its kubeconfig (flattened:
# MultiKueue refuses certificate files) in Secret worker-<i>-kubeconfig, a worker lost after
# GP_KUEUE_WORKER_LOST_TIMEOUT (default 30s; Kueue's own default is 15m), remote objects
# whose job is gone collected every 10 s; with GP_KUEUE_DISPATCHER=gangplank its dispatcher is
# Gangplank's (scheduling.gangplank.dev/fit; e2e/up then runs Gangplank with
# --multikueue-dispatcher true), else Kueue's default, all at once.
start_kueue() {
  local certs webhook health metrics multikueue="" frameworks='"batch/job"'
  # JobSets too where the JobSet operator runs (it is started before Kueue, which needs its CRD).
  [[ " $operators " == *" jobset "* ]] && frameworks+=', "jobset.x-k8s.io/jobset"'
  kueue_crds
  if [[ -n ${GP_KUEUE_WORKERS:-} ]]; then
    local dispatcher=""
    [[ ${GP_KUEUE_DISPATCHER:-} == gangplank ]] && dispatcher=", dispatcherName: scheduling.gangplank.dev/fit"
    multikueue="multiKueue: {gcInterval: 10s, workerLostTimeout: ${GP_KUEUE_WORKER_LOST_TIMEOUT:-30s}$dispatcher}"
  fi
  certs="$RUN_DIR/pki/kueue"
  "$REPO_DIR/webhooks/gen-certs.sh" "$certs" localhost 127.0.0.1 >/dev/null
  webhook=$(free_port)
  health=$(free_port)
  metrics=$(free_port)
  cat >"$RUN_DIR/kueue-config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: $webhook, certDir: "$certs"}
health: {healthProbeBindAddress: "127.0.0.1:$health"}
metrics: {bindAddress: "127.0.0.1:$metrics"}
integrations: {frameworks: [$frameworks]}
featureGates: {VisibilityOnDemand: false}
$multikueue
EOF
  log "starting kueue (integrations: $frameworks${multikueue:+; a MultiKueue manager})"
  KUEUE_METRICS_CERTS="$certs" start kueue "$kueue_BIN" --config="$RUN_DIR/kueue-config.yaml" \
    --kubeconfig="$RUN_DIR/kubeconfig"
  wait_for 120 "kueue /readyz" curl -fsS "http://127.0.0.1:$health/readyz"
  local ca url="https://127.0.0.1:$webhook"
  ca=$(base64 -w0 <"$certs/ca.crt")
  local jobs="objectSelector: {matchExpressions: [{key: kueue.x-k8s.io/queue-name, operator: Exists}]}"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: kueue-mutating-webhook-configuration}
webhooks:
- name: mjob.kb.io
  clientConfig: {url: "$url/mutate-batch-v1-job", caBundle: "$ca"}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
  $jobs
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: mjobset.kb.io
  clientConfig: {url: "$url/mutate-jobset-x-k8s-io-v1alpha2-jobset", caBundle: "$ca"}
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE], resources: [jobsets]}]
  $jobs
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: mworkload.kb.io
  clientConfig: {url: "$url/mutate-kueue-x-k8s-io-v1beta2-workload", caBundle: "$ca"}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE], resources: [workloads]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: kueue-validating-webhook-configuration}
webhooks:
- name: vjob.kb.io
  clientConfig: {url: "$url/validate-batch-v1-job", caBundle: "$ca"}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [jobs]}]
  $jobs
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: vjobset.kb.io
  clientConfig: {url: "$url/validate-jobset-x-k8s-io-v1alpha2-jobset", caBundle: "$ca"}
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE, UPDATE], resources: [jobsets]}]
  $jobs
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
- name: vworkload.kb.io
  clientConfig: {url: "$url/validate-kueue-x-k8s-io-v1beta2-workload", caBundle: "$ca"}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE, UPDATE], resources: [workloads, workloads/status]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
EOF
  [[ -z ${GP_KUEUE_WORKERS:-} ]] || multikueue_clusters $GP_KUEUE_WORKERS
}

# multikueue_clusters RUN_DIR...: each cluster's kubeconfig as a Secret and a MultiKueueCluster
# worker-<i> naming it, for the manager's Kueue; waits until each is Active (connected).
multikueue_clusters() {
  local i=0 dir
  for dir in "$@"; do
    i=$((i + 1))
    "$RUN_DIR/bin/kubectl" config view --raw --flatten --kubeconfig="$dir/kubeconfig" >"$RUN_DIR/worker-$i.kubeconfig"
    kubectl create secret generic "worker-$i-kubeconfig" -n kueue-system \
      --from-file=kubeconfig="$RUN_DIR/worker-$i.kubeconfig" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl apply -f - >/dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker-$i}
spec: {clusterSource: {kubeConfig: {locationType: Secret, location: worker-$i-kubeconfig}}}
EOF
    wait_for 60 "MultiKueueCluster worker-$i Active" \
      kubectl wait --for=condition=Active --timeout=1s "multikueuecluster/worker-$i"
  done
}
