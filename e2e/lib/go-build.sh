# Builds Go programs from the pinned modules under e2e/ into the cache, once per set of inputs.
# Sourced by build.sh (the control plane) and operators.sh (the operators); needs common.sh.

go_version=$(go env GOVERSION)

# key_of DIR: a short hash of the module's inputs and the toolchain.
key_of() {
  cat "$1"/go.mod "$1"/go.sum "$1"/*.go <(echo "$go_version") | sha256sum | cut -c1-16
}

# go_build NAME DIR PACKAGE LDFLAGS [TAGS]: builds PACKAGE in module DIR into the cache unless
# present.
go_build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 tags=${5:-}
  local out="$CACHE_DIR/bin/$name-$(key_of "$dir")/$name"
  if [[ ! -x $out ]]; then
    log "building $name (cold builds take a while; cached afterwards in $(dirname "$out"))"
    local started=$SECONDS
    mkdir -p "$(dirname "$out")"
    (cd "$dir" && go mod download && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    log "built $name in $((SECONDS - started))s"
  fi
  echo "$out"
}
