# The training-operator v1.8.1's certificate rotator waits for its certificate in the fixed
# directory /tmp/k8s-webhook-server/serving-certs (pkg/cert/cert.go), while its webhook server
# reads it from controller-runtime's default under the temporary directory, $TMPDIR, where
# e2e/lib/operators.sh copies it from its Secret. On a machine whose /tmp lacks that directory
# the rotator never saw it, and the operator was never ready. This patch, applied at build time
# (e2e/lib/go-build.sh; nothing else changes), makes the rotator wait for it under $TMPDIR too.
# module: github.com/kubeflow/training-operator
# file: pkg/cert/cert.go
s|CertDir:        certDir,|CertDir:        os.TempDir() + "/k8s-webhook-server/serving-certs",|
