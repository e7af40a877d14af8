#!/usr/bin/env bash
# The main job: local control plane with Gangplank in the loop, the demo workload, and a report.
# Options are passed to e2e/up (for example --nodes 8 --node-gpu 4).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
exec e2e/demo "$@"
