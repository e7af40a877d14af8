#!/usr/bin/env bash
# Makes the certificates Gangplank serves its extender and webhooks with, and the one the
# scheduler presents to the extender:
#   OUT/ca.crt, OUT/ca.key   a CA (kept if already there, so re-running only renews the leaves)
#   OUT/tls.crt, OUT/tls.key a serving certificate signed by that CA for the given hosts
#   OUT/scheduler-client.crt, OUT/scheduler-client.key
#                            a client certificate signed by that CA (CN system:kube-scheduler,
#                            client authentication only), for the scheduler's extender tlsConfig
#                            certData/keyData; Gangplank checks it with
#                            --extender-client-ca-file OUT/ca.crt
# Usage: webhooks/gen-certs.sh OUT [HOST...]
#   HOSTs are DNS names or IP addresses; default: the in-cluster Service names of
#   gangplank in gangplank-system, plus localhost and 127.0.0.1 for the sidecar case.
# Then: put base64 of OUT/ca.crt in the webhook registrations' caBundle and the scheduler
# config's tlsConfig.caData (webhooks/render.sh does the former), base64 of
# OUT/scheduler-client.{crt,key} in its tlsConfig certData/keyData, and load OUT/tls.* and
# OUT/ca.crt into the Secret gangplank-tls. Gangplank reloads rotated files without a restart.
# Needs openssl.
set -euo pipefail
out=${1:?usage: gen-certs.sh OUT [HOST...]}
shift
hosts=("$@")
if ((${#hosts[@]} == 0)); then
  hosts=(gangplank.gangplank-system.svc gangplank.gangplank-system.svc.cluster.local gangplank-extender.gangplank-system.svc gangplank-extender.gangplank-system.svc.cluster.local localhost 127.0.0.1)
fi
days=${GANGPLANK_CERT_DAYS:-365}
mkdir -p "$out"
umask 077

if [[ ! -s $out/ca.crt || ! -s $out/ca.key ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=gangplank-ca" -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null
fi

san=""
for h in "${hosts[@]}"; do
  if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
done
san=${san%,}

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${hosts[0]}" \
  -keyout "$out/tls.key.new" -out "$out/tls.csr" 2>/dev/null
openssl x509 -req -in "$out/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -out "$out/tls.crt.new" \
  -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n' "$san") 2>/dev/null
# Key first, then certificate: a reader that sees the new certificate also sees its key.
mv "$out/tls.key.new" "$out/tls.key"
mv "$out/tls.crt.new" "$out/tls.crt"

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=system:kube-scheduler" \
  -keyout "$out/scheduler-client.key" -out "$out/scheduler-client.csr" 2>/dev/null
openssl x509 -req -in "$out/scheduler-client.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -out "$out/scheduler-client.crt" \
  -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\nbasicConstraints=CA:FALSE\n') 2>/dev/null
rm -f "$out/tls.csr" "$out/scheduler-client.csr" "$out/ca.srl"
echo "wrote $out/tls.crt for ${hosts[*]} and $out/scheduler-client.crt (CA $out/ca.crt)" >&2
