# The MPI operator v0.6.0 serves its health check on the fixed address :8080, so two copies
# cannot run on one host. This patch of cmd/mpi-operator/app/server.go, applied at build time
# (e2e/lib/go-build.sh; nothing else changes), lets MPI_OPERATOR_HEALTH_ADDRESS choose it.
# module: github.com/kubeflow/mpi-operator
# file: cmd/mpi-operator/app/server.go
s|Addr:    fmt.Sprintf(":%d", healthCheckPort),|Addr: func() string { if a := os.Getenv("MPI_OPERATOR_HEALTH_ADDRESS"); a != "" { return a }; return fmt.Sprintf(":%d", healthCheckPort) }(),|
