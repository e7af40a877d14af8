//go:build tools

// Package tools pins Kubeflow's spark-operator so that `go build` builds the version in go.mod,
// with the dependencies that version asks for. The e2e suite runs its controller as a local
// process against the local cluster, to test Gangplank with the operator as users run it.
package tools

import _ "github.com/kubeflow/spark-operator/v2/cmd/operator"
