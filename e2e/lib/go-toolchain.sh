# Which Go toolchain builds a module. This machine's Go (GOTOOLCHAIN=local) builds every module
# whose go.mod it is new enough for; a module whose go line asks for more (Karpenter's; Kubernetes
# 1.38's, which needs Go 1.27.0) is built with NEWER_GO_TOOLCHAIN, which the go command fetches
# once from the Go module proxy. Sourced by go-build.sh, autoscaler.sh and e2e/k8s/gen-gomod.sh.
# shellcheck shell=bash

NEWER_GO_TOOLCHAIN=go1.27.3

# go_toolchain_for GOMOD: prints the GOTOOLCHAIN for the module whose go.mod is GOMOD: local when
# this machine's Go is at least its go line, else NEWER_GO_TOOLCHAIN; fails when even that is
# too old.
go_toolchain_for() {
  local need have newer
  need=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$1")
  [[ -n $need ]] || { echo "go_toolchain_for: no go line in $1" >&2; return 1; }
  have=$(GOTOOLCHAIN=local go env GOVERSION) && have=${have#go}
  newer=${NEWER_GO_TOOLCHAIN#go}
  # At least: the larger of the two, in version order, is the one we have.
  at_least() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n1) == "$1" ]]; }
  if at_least "$have" "$need"; then
    echo local
  elif at_least "$newer" "$need"; then
    echo "$NEWER_GO_TOOLCHAIN"
  else
    echo "go_toolchain_for: $1 needs Go $need, newer than $NEWER_GO_TOOLCHAIN" >&2
    return 1
  fi
}
