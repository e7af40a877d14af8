# Builds Helm's command line from the module in e2e/tools/helm (cached like the control plane),
# for scripts/chart and e2e/up. Needs common.sh and go-build.sh.
helm_binary() {
  go_build helm "$E2E_DIR/tools/helm" helm.sh/helm/v3/cmd/helm "-s -w"
}
