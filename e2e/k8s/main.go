// Command k8s is a multi-call binary (hyperkube style) holding the stock Kubernetes components
// that the Gangplank end-to-end harness runs: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kube-proxy (the Deployment layout's Service routing) and kubectl. One link
// step and one cached artifact instead of six. The component is chosen by the name it is invoked as (symlinks), or by the
// first argument: `k8s kube-scheduler --version`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubectl"}

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args
	if !known(name) && len(os.Args) > 1 && known(os.Args[1]) {
		name, args = os.Args[1], os.Args[1:]
	}
	os.Args = args
	switch name {
	case "etcd":
		etcdmain.Main(args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(kcm.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kube-proxy":
		os.Exit(cli.Run(proxy.NewProxyCommand()))
	case "kubectl":
		// As k8s.io/kubernetes/cmd/kubectl does it.
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "usage: k8s COMPONENT [args]; COMPONENT is one of %v (or invoke through a symlink of that name)\n", components)
		os.Exit(2)
	}
}

func known(name string) bool {
	for _, c := range components {
		if c == name {
			return true
		}
	}
	return false
}
