//go:build tools

// Package tools pins Kubeflow Trainer's controller manager so that `go build` builds the version in
// go.mod, with the dependencies that version asks for. The e2e suite runs it as a local process
// against the local cluster, to test Gangplank with the operator as users run it.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
