# Builds Go programs from the pinned modules under e2e/ into the cache, once per set of inputs.
# Sourced by build.sh (the control plane) and operators.sh (the operators); needs common.sh.

go_version=$(go env GOVERSION)
source "$(dirname "${BASH_SOURCE[0]}")/go-toolchain.sh"

# key_of DIR: a short hash of the module's inputs (with its overlay scripts) and the toolchain.
key_of() {
  cat "$1"/go.mod "$1"/go.sum "$1"/*.go "$1"/*.sed <(echo "$go_version") 2>/dev/null |
    sha256sum | cut -c1-16
}

# patched DIR OUT: where to build DIR's module. Normally DIR itself; when DIR holds SCRIPT.sed
# files (each names, in a line `# module: MODULE`, the module it patches, DIR's dependency, and
# in a line `# file: PATH` a file of it), a copy of that module under OUT with the scripts
# applied, built with the module's own go.mod (the versions DIR pins, which requires nothing
# else). Go refuses overlays of files in the module cache, hence the copy. Fails when a script
# changes nothing.
patched() {
  local dir=$1 out=$2 script module file original
  local scripts=("$dir"/*.sed)
  [[ -e ${scripts[0]} ]] || { echo "$dir"; return 0; }
  module=$(sed -n 's/^# module: //p' "${scripts[0]}")
  original=$(cd "$dir" && go list -m -f '{{.Dir}}' "$module") || return 1
  rm -rf "$out" && cp -r "$original" "$out" && chmod -R u+w "$out" || return 1
  for script in "${scripts[@]}"; do
    file=$(sed -n 's/^# file: //p' "$script")
    sed -i -f "$script" "$out/$file"
    ! cmp -s "$original/$file" "$out/$file" || { log "error: $script changed nothing"; return 1; }
  done
  echo "$out"
}

# go_build NAME DIR PACKAGE LDFLAGS [TAGS]: builds PACKAGE in module DIR into the cache unless
# present, with DIR's patches applied (patched).
go_build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 tags=${5:-}
  local out="$CACHE_DIR/bin/$name-$(key_of "$dir")/$name"
  if [[ ! -x $out ]]; then
    log "building $name (cold builds take a while; cached afterwards in $(dirname "$out"))"
    local started=$SECONDS source
    mkdir -p "$(dirname "$out")"
    (cd "$dir" && go mod download) || die "go mod download failed in $dir"
    source=$(patched "$dir" "$(dirname "$out")/src") || die "could not patch $name"
    # A file of this build's own, renamed into place: two builds of the same program at once
    # (test.sh's early build and scripts/chart's Helm) each leave a whole binary.
    (cd "$source" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.$$.tmp" "$pkg") ||
      die "building $name failed"
    mv "$out.$$.tmp" "$out"
    log "built $name in $((SECONDS - started))s"
  fi
  echo "$out"
}
