//go:build tools

// Package tools pins KubeRay's ray-operator so that `go build github.com/ray-project/kuberay/ray-operator`
// builds the version in go.mod, with the dependencies that version asks for. The e2e suite runs it
// as a local process against the local cluster, to test Gangplank with the operator as users run it.
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
