# The Deployment layout of e2e/up (--layout deployment): Gangplank as the chart's own Deployment,
# its pods run from the image by e2e/lib/podhost.py on the node gp-pod-host, Services routed by
# kube-proxy. docs/local-control-plane.md, "The Deployment layout", says what differs from a
# kubelet. Sourced by e2e/up and e2e/down; needs common.sh.
# shellcheck shell=bash

# The node the pods run on, and its network: a link of its own (one end of a veth pair) holding the pods' gateway (the host's
# address on the pod network, which the API server advertises), each pod a /32 in POD_NET
# behind a veth, and a route for the Service range so that connections to a ClusterIP get a
# source address before kube-proxy's DNAT rewrites their destination.
POD_HOST_NODE=gp-pod-host
POD_HOST_LINK=gp-host0
POD_GATEWAY=10.245.0.1
POD_IP_PREFIX=10.245.0
SERVICE_CIDR=10.96.0.0/16
# The gangplank-extender Service's fixed ClusterIP (chart value extender.clusterIP): the
# scheduler's urlPrefix, and a name in the certificate the chart makes.
EXTENDER_CLUSTER_IP=10.96.100.10
# The image scripts/image builds for this layout, in buildah's local storage (vfs).
DEPLOYMENT_IMAGE_REPOSITORY=localhost/gangplank-e2e
DEPLOYMENT_IMAGE_TAG=dev
BUILDAH=(buildah --storage-driver vfs)

# pod_network_free: dies when that link exists: another cluster in this layout runs on
# this machine (or a killed one left it; e2e/down of its run directory removes it).
pod_network_free() {
  if ip link show "$POD_HOST_LINK" >/dev/null 2>&1; then
    die "the link $POD_HOST_LINK exists: a Deployment-layout cluster runs on this machine already (one at a time), or one was killed; e2e/down of its run directory removes it"
  fi
}

# pod_network_up: the link with the gateway address and the Service route.
pod_network_up() {
  # A veth pair with both ends on the host, as the kernel here has no dummy links.
  ip link add "$POD_HOST_LINK" type veth peer name "$POD_HOST_LINK-peer"
  ip link set "$POD_HOST_LINK-peer" up
  ip addr add "$POD_GATEWAY/32" dev "$POD_HOST_LINK"
  ip link set "$POD_HOST_LINK" up
  ip route add "$SERVICE_CIDR" dev "$POD_HOST_LINK" src "$POD_GATEWAY"
}

# pod_network_down: removes what this layout adds to the host, also after a crash: the pods'
# network namespaces (and what still runs in them) and veths, kube-proxy's rules (kube-proxy --cleanup), the Service route
# and the link, buildah's working containers of the image, and the image.
pod_network_down() {
  local netns pid link container
  # A pod host killed before it stopped its containers leaves them running in their network
  # namespaces: they go first, by the PIDs each namespace holds.
  for netns in $(ip netns list 2>/dev/null | awk '$1 ~ /^gp-pod-/ {print $1}'); do
    for pid in $(ip netns pids "$netns" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns del "$netns" 2>/dev/null || true
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^gpv/ {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$link" 2>/dev/null || true
  done
  if [[ -x $RUN_DIR/bin/kube-proxy ]]; then
    "$RUN_DIR/bin/kube-proxy" --cleanup --proxy-mode=iptables >/dev/null 2>&1 || true
  fi
  # kube-proxy's cleanup leaves the chain KUBE-FIREWALL (the kubelet's too, on a real node) and
  # its jumps from INPUT and OUTPUT: removed unless the chain was there before kube-proxy ran.
  local iptables
  if [[ -e $RUN_DIR/kube-proxy-started && ! -e $RUN_DIR/kube-firewall-existed ]]; then
    for iptables in iptables ip6tables; do
      while "$iptables" -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
      while "$iptables" -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
      "$iptables" -F KUBE-FIREWALL 2>/dev/null || true
      "$iptables" -X KUBE-FIREWALL 2>/dev/null || true
    done
  fi
  ip route del "$SERVICE_CIDR" dev "$POD_HOST_LINK" 2>/dev/null || true
  ip link del "$POD_HOST_LINK" 2>/dev/null || true
  # Every tag of the layout's image: dev, and the versions e2e/up --image-archive adds.
  for container in $("${BUILDAH[@]}" containers --noheading --format '{{.ContainerID}} {{.ImageName}}' 2>/dev/null |
    awk -v repository="$DEPLOYMENT_IMAGE_REPOSITORY:" 'index($2, repository) == 1 {print $1}'); do
    "${BUILDAH[@]}" rm "$container" >/dev/null 2>&1 || true
  done
  for image in $("${BUILDAH[@]}" images --noheading --format '{{.Name}}:{{.Tag}}' 2>/dev/null |
    awk -v repository="$DEPLOYMENT_IMAGE_REPOSITORY:" 'index($1, repository) == 1'); do
    "${BUILDAH[@]}" rmi "$image" >/dev/null 2>&1 || true
  done
}

# build_deployment_image: the image, as scripts/image builds it (dev profile: the static build
# test.sh's scripts/check-image made, so cargo has nothing left to do there), into buildah's
# local storage and an OCI archive in the run directory.
build_deployment_image() {
  log "building the image $DEPLOYMENT_IMAGE_REPOSITORY:$DEPLOYMENT_IMAGE_TAG (scripts/image --profile dev)"
  "$REPO_DIR/scripts/image" --profile dev --out "$RUN_DIR/image/gangplank.oci.tar" \
    --tag "$DEPLOYMENT_IMAGE_REPOSITORY:$DEPLOYMENT_IMAGE_TAG" >"$RUN_DIR/logs/image.log" ||
    die "scripts/image failed; see $RUN_DIR/logs/image.log"
}

# start_kube_proxy: kube-proxy in iptables mode for the node gp-pod-host (which must exist:
# kube-proxy waits for it before it serves /healthz), leaving the machine's
# sysctls alone (no conntrack sizes, no localhost NodePorts) and NodePorts on the gateway only.
start_kube_proxy() {
  local healthz metrics
  healthz=$(free_port)
  metrics=$(free_port)
  log "starting kube-proxy (iptables mode, healthz http://127.0.0.1:$healthz)"
  iptables -S KUBE-FIREWALL >/dev/null 2>&1 && touch "$RUN_DIR/kube-firewall-existed"
  touch "$RUN_DIR/kube-proxy-started"
  start kube-proxy "$RUN_DIR/bin/kube-proxy" --kubeconfig="$RUN_DIR/kubeconfig" \
    --hostname-override="$POD_HOST_NODE" --proxy-mode=iptables \
    --healthz-bind-address="127.0.0.1:$healthz" --metrics-bind-address="127.0.0.1:$metrics" \
    --iptables-localhost-nodeports=false --nodeport-addresses="$POD_GATEWAY/32" \
    --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 \
    --conntrack-tcp-timeout-close-wait=0
  KUBE_PROXY_HEALTHZ=http://127.0.0.1:$healthz/healthz
}

# start_pod_host APISERVER_PORT: the node gp-pod-host and the pods placed on it
# (e2e/lib/podhost.py), acting with the admin's client certificate.
start_pod_host() {
  log "starting the pod host (node $POD_HOST_NODE, pods in $POD_IP_PREFIX.0/24 run by buildah)"
  start podhost python3 "$E2E_DIR/lib/podhost.py" run --node "$POD_HOST_NODE" \
    --server "https://127.0.0.1:$1" --ca "$RUN_DIR/pki/ca.crt" \
    --cert "$RUN_DIR/pki/admin.crt" --key "$RUN_DIR/pki/admin.key" --dir "$RUN_DIR/podhost" \
    --gateway "$POD_GATEWAY" --pod-ips "$POD_IP_PREFIX"
  wait_for 60 "the node $POD_HOST_NODE" kubectl get node "$POD_HOST_NODE"
}

# render_deployment_chart OUT: the chart in its default layout, as an install would render it,
# with only these values set: the image built above, the extender's ClusterIP, the namespace and
# the third-party CRDs rendered as objects (as in the sidecar layout), and the pods placed on
# gp-pod-host (its label as nodeSelector, its taint tolerated).
render_deployment_chart() {
  "$RUN_DIR/bin/helm" template gangplank "$REPO_DIR/charts/gangplank" --namespace gangplank-system \
    --kube-version "$K8S_VERSION" --include-crds --set namespace.create=true \
    --set thirdPartyCRDs.create=true \
    --set image.repository="$DEPLOYMENT_IMAGE_REPOSITORY" --set image.tag="$DEPLOYMENT_IMAGE_TAG" \
    --set extender.clusterIP="$EXTENDER_CLUSTER_IP" \
    --set-json "nodeSelector={\"gangplank.dev/e2e-pod-host\":\"true\"}" \
    --set-json 'tolerations=[{"key":"gangplank.dev/e2e-pod-host","operator":"Equal","value":"true","effect":"NoSchedule"}]' \
    >"$1"
}

# tag_deployment_image_with_version: the image built above tagged with this checkout's version
# too, the tag the repository's chart names by default (e2e/up --chart leaves the tag to the
# chart), for an install of it or a helm upgrade to it.
tag_deployment_image_with_version() {
  "${BUILDAH[@]}" tag "$DEPLOYMENT_IMAGE_REPOSITORY:$DEPLOYMENT_IMAGE_TAG" \
    "$DEPLOYMENT_IMAGE_REPOSITORY:$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_DIR/Cargo.toml" | head -n 1)"
}

# load_image_archive FILE: the image in the OCI archive FILE (an earlier release's,
# scripts/previous-release) as $DEPLOYMENT_IMAGE_REPOSITORY:<its version label>, the tag the
# chart of that version names by default.
load_image_archive() {
  local id version
  id=$("${BUILDAH[@]}" pull --quiet "oci-archive:$1") || die "failed to load the image archive $1"
  version=$("${BUILDAH[@]}" inspect --type image \
    --format '{{index .OCIv1.Config.Labels "org.opencontainers.image.version"}}' "$id")
  [[ -n $version ]] || die "the image in $1 has no label org.opencontainers.image.version"
  "${BUILDAH[@]}" tag "$id" "$DEPLOYMENT_IMAGE_REPOSITORY:$version"
  # The name the archive gave it goes (e2e/down removes the layout's names only).
  "${BUILDAH[@]}" images --noheading --no-trunc --format '{{.ID}} {{.Name}}:{{.Tag}}' |
    awk -v id="${id#sha256:}" -v keep="$DEPLOYMENT_IMAGE_REPOSITORY:$version" \
      '($1 == id || $1 == "sha256:" id) && $2 != keep {print $2}' |
    while read -r name; do "${BUILDAH[@]}" rmi "$name" >/dev/null; done
  log "loaded $1 as $DEPLOYMENT_IMAGE_REPOSITORY:$version"
}

# write_chart_values OUT: the values render_deployment_chart sets, as a values file for helm
# install and upgrade, but for the image's tag, left to the chart's appVersion, and the
# namespace, which helm install --create-namespace makes (a Helm release's record lives in it).
write_chart_values() {
  cat >"$1" <<VALUES
# Written by e2e/up --chart: the Deployment layout's values, for helm install and helm upgrade.
thirdPartyCRDs: {create: true}
image: {repository: $DEPLOYMENT_IMAGE_REPOSITORY}
extender: {clusterIP: $EXTENDER_CLUSTER_IP}
nodeSelector: {gangplank.dev/e2e-pod-host: "true"}
tolerations:
- {key: gangplank.dev/e2e-pod-host, operator: Equal, value: "true", effect: NoSchedule}
VALUES
}

# helm_install_chart DIR: the chart in DIR as the Helm release gangplank in gangplank-system,
# with the values write_chart_values writes to $RUN_DIR/chart-values.yaml (its CRDs from crds/,
# as helm install puts them in).
helm_install_chart() {
  write_chart_values "$RUN_DIR/chart-values.yaml"
  log "installing the chart $1 with helm install (release gangplank in gangplank-system)"
  "$RUN_DIR/bin/helm" --kubeconfig "$RUN_DIR/kubeconfig" install gangplank "$1" \
    --namespace gangplank-system --create-namespace -f "$RUN_DIR/chart-values.yaml" \
    >"$RUN_DIR/logs/helm-install.log" || die "helm install failed; see $RUN_DIR/logs/helm-install.log"
}

# extender_endpoint: the address the gangplank-extender Service's EndpointSlices send to (the
# leader's pod IP), empty when none is ready.
extender_endpoint() {
  kubectl get endpointslices -n gangplank-system -l kubernetes.io/service-name=gangplank-extender \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}'
}

# services_route: kube-proxy sends both Services to a replica that answers: the webhook port at
# the name the API server calls (gangplank.gangplank-system.svc, here resolved to the Service's
# ClusterIP as the API server resolves it) and the extender at its ClusterIP, as the scheduler
# calls it, with the scheduler's client certificate. Any HTTP answer counts.
services_route() {
  local pki=$RUN_DIR/pki/chart webhook_ip
  webhook_ip=$(kubectl get service gangplank -n gangplank-system -o jsonpath='{.spec.clusterIP}')
  curl -sS -o /dev/null --max-time 5 --noproxy '*' --cacert "$pki/scheduler-client-ca.crt" \
    --resolve "gangplank.gangplank-system.svc:9443:$webhook_ip" https://gangplank.gangplank-system.svc:9443/ &&
    curl -sS -o /dev/null --max-time 5 --noproxy '*' --cacert "$pki/scheduler-client-ca.crt" \
      --cert "$pki/scheduler-client-tls.crt" --key "$pki/scheduler-client-tls.key" \
      "https://$EXTENDER_CLUSTER_IP:8443/scheduler/filter"
}

# deployment_ready: both replicas ready, the extender Service pointing at one of them, and both
# Services routed.
deployment_ready() {
  [[ $(kubectl get deployment gangplank -n gangplank-system -o jsonpath='{.status.readyReplicas}') == 2 ]] &&
    [[ -n $(extender_endpoint) ]] && services_route
}
