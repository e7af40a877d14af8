//go:build tools

// Package tools pins Prometheus so that `go build github.com/prometheus/prometheus/cmd/prometheus`
// builds the version in go.mod. The end-to-end suite runs it to scrape Gangplank and evaluate
// every query of the Grafana dashboard (manifests/grafana/) against real data. It lives in its
// own module: it needs k8s.io/* and other shared modules at its own versions.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
