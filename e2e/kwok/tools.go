//go:build tools

// Package tools pins sigs.k8s.io/kwok so that `go build sigs.k8s.io/kwok/cmd/kwok` builds the
// version in go.mod. kwok lives in its own module: it needs k8s.io/* at its own versions, which the
// control-plane wrapper module (../k8s) pins differently.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
