//go:build tools

// Package tools pins Helm's command line, which e2e/lib/helm.sh builds from this module: the
// chart in charts/gangplank is linted and rendered with it (no Helm package is installed).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
