#!/usr/bin/env bash
# Prints Gangplank's webhook registrations (webhooks/mutating.yaml, then webhooks/validating.yaml)
# ready for `kubectl apply -f -`, with the lines marked "substituted by webhooks/render.sh"
# filled in mechanically; everything else is printed as written.
#
# Usage:
#   webhooks/render.sh --service --ca-file FILE
#       in-cluster: the API server calls the Service gangplank in gangplank-system, port 9443
#       (manifests/deployment.yaml), as written in the files.
#   webhooks/render.sh --url https://HOST:PORT --ca-file FILE
#       Gangplank outside the cluster (a scheduler sidecar on the host network, e2e/up): each
#       webhook's clientConfig becomes `url: https://HOST:PORT/webhooks/...`.
#   --ca-file FILE  PEM of the CA that signed Gangplank's serving certificate
#                   (webhooks/gen-certs.sh writes it as OUT/ca.crt); goes into every caBundle.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "webhooks/render.sh: $*" >&2; exit 2; }

dir=$(cd "$(dirname "$0")" && pwd)
marker='# substituted by webhooks/render.sh'
mode=""
url=""
ca_file=""
while (($#)); do
  case $1 in
    --service) mode=service ;;
    --url) mode=url; url=${2:-}; shift ;;
    --ca-file) ca_file=${2:-}; shift ;;
    -h | --help) usage ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[[ -n $mode ]] || die "give --service or --url https://HOST:PORT"
[[ -n $ca_file ]] || die "give --ca-file FILE (the CA that signed Gangplank's serving certificate)"
[[ -r $ca_file ]] || die "cannot read CA file '$ca_file'"
grep -q -- '-----BEGIN CERTIFICATE-----' "$ca_file" || die "'$ca_file' is not a PEM certificate"
if [[ $mode == url ]]; then
  url=${url%/}
  [[ $url =~ ^https://[^/|]+$ ]] || die "--url must be https://HOST:PORT with no path, not '$url'"
fi
ca_bundle=$(base64 -w0 "$ca_file")

substitutions=(-e "s|caBundle: .* $marker\$|caBundle: $ca_bundle|")
case $mode in
  service) substitutions+=(-e "s|^\( *service: {.*}\) $marker\$|\1|") ;;
  url) substitutions+=(-e "s|^\( *\)service: {.*path: \(/[^ ,}]*\)} $marker\$|\1url: $url\2|") ;;
esac

first=1
for file in "$dir/mutating.yaml" "$dir/validating.yaml"; do
  ((first)) || echo "---"
  first=0
  rendered=$(sed "${substitutions[@]}" "$file")
  if grep -q -- "$marker" <<<"$rendered"; then
    die "$(basename "$file") has a line marked '$marker' that render.sh does not know how to fill"
  fi
  printf '%s\n' "$rendered"
done
