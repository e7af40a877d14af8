#!/usr/bin/env bash
# Installs what the demo and the tests use, on a fresh Debian machine with Go and Rust (rustup)
# already present: openssl (certificates), curl (readiness probes), python3 (free ports, JSON),
# chromium (the test that opens the HTML report in a real browser), ssh-keygen (the test that
# reads the batch Job ssh plugin's key), Java 17 and Maven (spark-operator's spark-submit, a
# Spark made of its Maven jars), buildah and binutils (scripts/image), rustfmt and clippy. Go
# modules and crates are fetched by the builds themselves.
# Idempotent and quick when everything is there.
set -euo pipefail
need=()
for tool in openssl:openssl curl:curl python3:python3 setsid:util-linux sha256sum:coreutils base64:coreutils chromium:chromium ssh-keygen:openssh-client java:openjdk-17-jre-headless mvn:maven buildah:buildah readelf:binutils strip:binutils; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if ((${#need[@]})); then
  echo "installing Debian packages: ${need[*]}" >&2
  sudo_cmd=()
  ((EUID == 0)) || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

command -v go >/dev/null || { echo "Go is required (1.26 or newer): https://go.dev/doc/install" >&2; exit 1; }
command -v cargo >/dev/null || { echo "Rust is required (rustup, 1.89 or newer)" >&2; exit 1; }
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if ((go_minor < 26)); then
  echo "Go 1.26 or newer is required to build Kubernetes 1.36 (found $(go env GOVERSION))" >&2
  exit 1
fi
if command -v rustup >/dev/null; then
  for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
fi
