//go:build tools

// Package tools pins Kueue's controller manager so that `go build sigs.k8s.io/kueue/cmd/kueue`
// builds the version in go.mod, with the dependencies that version asks for. The e2e suite runs
// it as a local process against the local cluster, to test Gangplank beside Kueue as teams run it.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
