#!/usr/bin/env bash
# The test command: formatting, lints, unit and handler tests, the generated-files check, then
# the end-to-end suite on the local control plane (built from Go modules on first use).
# Options after the script name are passed to e2e/test (for example --nodes 8).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
step() { printf '\n==> %s\n' "$*"; }
step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test (unit, handler and generated-file tests)"
cargo test
step "end-to-end suite (e2e/test)"
e2e/test "$@"
