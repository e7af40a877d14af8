# Kueue v0.17.0, with its own certificate management off, reads its metrics server's
# certificate from the fixed directory /etc/kueue/metrics/certs (cmd/kueue/main.go), which a
# local process should not need. This patch, applied at build time (e2e/lib/go-build.sh;
# nothing else changes), lets KUEUE_METRICS_CERTS choose the directory.
# module: sigs.k8s.io/kueue
# file: cmd/kueue/main.go
s|metricsCertPath := "/etc/kueue/metrics/certs"|metricsCertPath := os.Getenv("KUEUE_METRICS_CERTS")|
