//go:build tools

// Package tools pins Karpenter with its kwok cloud provider so that `go build sigs.k8s.io/karpenter/kwok`
// builds the version in go.mod, with the dependencies that version asks for. e2e/up
// --autoscaler karpenter runs it as a local process against the local cluster: a real
// autoscaler whose nodes are kwok's fake ones.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
