//! Command-line and environment configuration.
//!
//! Every flag can also be set through an environment variable named `GANGPLANK_<FLAG>` (for
//! example `--extender-addr` and `GANGPLANK_EXTENDER_ADDR`), so the same binary is configured
//! the same way from a shell, a Deployment's `env:` or a sidecar. The doc comment on each flag
//! is its help text, and the flag table of `docs/install.md` is generated from `gangplank serve
//! --help` (`tests/docs_are_current.rs`): keep them precise.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::telemetry::LogFormat;
use gangplank_core::policy::placement::Strategy;

/// Gang scheduling, queues and fair share for the stock kube-scheduler.
#[derive(Debug, Parser)]
#[command(name = "gangplank", version = crate::runtime::build::LONG_VERSION, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scheduler extender, the probes and the metrics endpoint.
    Serve(Box<ServeArgs>),
    /// Print the CustomResourceDefinition YAML generated from the Rust types.
    Crdgen,
    /// Print the Grafana dashboard (JSON model) for queue usage and Gangplank's health.
    Dashboard {
        /// Print it inside a ConfigMap labelled `grafana_dashboard: "1"` for Grafana's sidecar.
        #[arg(long)]
        configmap: bool,
    },
    /// Each queue's weight, deserved share, use, borrowing and groups, as a tree (also
    /// `kubectl gangplank queues`).
    Queues(crate::cli::QueuesArgs),
    /// PodGroups with their phase, members placed, queue, age and why they wait.
    Groups(crate::cli::GroupsArgs),
    /// The workloads that own a PodGroup (Jobs, JobSets, training jobs, RayClusters, other
    /// schedulers' PodGroups) with their group's phase, members placed and why they wait.
    Jobs(crate::cli::GroupsArgs),
    /// Why a pod, PodGroup or Job waits: the group's conditions, the Events about it and its
    /// pods, and the scheduler's last word on each pod.
    Why(crate::cli::WhyArgs),
    /// A live view, shown again every 2 seconds until interrupted: the queues, then every
    /// group waiting for admission by queue, the head of the line first, then oldest first.
    Top(crate::cli::Common),
    /// Record the queues and groups every 2 seconds for a while, then write what happened: a
    /// text report and an HTML page with charts (shares over time, waiting groups, each
    /// group's timeline and why it waited).
    Report(crate::cli::report::ReportArgs),
    /// Watch the cluster's nodes, Queues, PodGroups and pods for a while and write them to a
    /// file that `simulate --recording` replays.
    Record(crate::simulate::record::RecordArgs),
    /// Replay a recording (or a trace) through Gangplank's own decisions in virtual time, once
    /// per configuration (queues, placement, nodes), and compare waits, shares, utilisation and
    /// evictions side by side.
    Simulate(crate::simulate::command::SimulateArgs),
}

/// Flags of `gangplank serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address the scheduler extender listens on; kube-scheduler's `urlPrefix` must point here,
    /// with the path prefix `/scheduler`. A loopback address suits the sidecar layout (the
    /// scheduler in the same network namespace). Every address needs --extender-client-ca-file,
    /// so that only the scheduler can call the extender's verbs (on loopback, every process of
    /// the host network could otherwise), unless --extender-insecure-loopback.
    #[arg(
        long,
        env = "GANGPLANK_EXTENDER_ADDR",
        value_name = "ADDR",
        default_value = "127.0.0.1:8443"
    )]
    pub extender_addr: SocketAddr,

    /// PEM bundle of the CAs whose client certificates the extender port accepts (mutual TLS):
    /// a connection without a certificate one of them signed for client authentication is
    /// refused during the handshake. Give the scheduler that certificate in its extender
    /// `tlsConfig` (`certData`/`keyData`). Needs --tls-cert-file; reloaded like it.
    #[arg(
        long,
        env = "GANGPLANK_EXTENDER_CLIENT_CA_FILE",
        value_name = "FILE",
        requires = "tls_cert_file"
    )]
    pub extender_client_ca_file: Option<PathBuf>,

    /// The subject common name the extender's client certificate must have (with
    /// --extender-client-ca-file): any other certificate that CA signed is refused during the
    /// handshake. The default is the name webhooks/gen-certs.sh and the chart issue the
    /// scheduler's certificate for.
    #[arg(
        long,
        env = "GANGPLANK_EXTENDER_CLIENT_NAME",
        value_name = "NAME",
        default_value = "system:kube-scheduler"
    )]
    pub extender_client_name: String,

    /// Serve the extender on a loopback address without asking for a client certificate, for
    /// development: every process that reaches the address (on a node, every pod of the host
    /// network) may then call bind.
    #[arg(
        long,
        env = "GANGPLANK_EXTENDER_INSECURE_LOOPBACK",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub extender_insecure_loopback: bool,

    /// Address the admission webhooks listen on (HTTPS with --tls-cert-file, which the API
    /// server requires); the webhook registrations' Service port or URL must point here.
    #[arg(
        long,
        env = "GANGPLANK_WEBHOOK_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:9443"
    )]
    pub webhook_addr: SocketAddr,

    /// Address of the plain-HTTP endpoint that serves `/metrics` (Prometheus), `/livez`,
    /// `/readyz` (ready while every watch has listed the cluster since it started or last
    /// failed) and `/version` (the build's version and commit, as JSON).
    #[arg(
        long,
        env = "GANGPLANK_METRICS_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_addr: SocketAddr,

    /// PEM certificate (chain) for the extender and webhook ports. With --tls-key-file, both
    /// serve HTTPS and reload the files when they change on disk (checked every 10 seconds);
    /// without them they serve plain HTTP.
    #[arg(
        long,
        env = "GANGPLANK_TLS_CERT_FILE",
        value_name = "FILE",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key (PKCS#8, PKCS#1 or SEC1) matching --tls-cert-file.
    #[arg(
        long,
        env = "GANGPLANK_TLS_KEY_FILE",
        value_name = "FILE",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Longest time, in seconds, a gang's bind calls are held from the first of them while the
    /// gang gathers quorum (minMember placed), however it progresses. It also caps the gang's own
    /// timeout, the PodGroup's `scheduleTimeoutSeconds` (60 when unset), which counts from the
    /// gang's latest member placed. Must stay below the scheduler's extender `httpTimeout` for
    /// binds (330s in the shipped configuration), so that held calls are answered with an error
    /// the scheduler acts on, not cut off. A scheduler started on a backlog takes the pending pods
    /// in no gang order, so a gang's members can be as far apart as the whole backlog takes to
    /// place: raise both if that may take longer (see "Performance").
    #[arg(
        long,
        env = "GANGPLANK_MAX_BIND_HOLD_SECONDS",
        value_name = "SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub max_bind_hold_seconds: u64,

    /// How gang members are placed: `binpack` fills nodes (keeps whole nodes free for the next
    /// gang), `spread` prefers the emptiest nodes. Used to plan gang claims and to score nodes.
    #[arg(long, env = "GANGPLANK_PLACEMENT", value_parser = strategy_parser(), default_value_t = Strategy::Binpack)]
    pub placement: Strategy,

    /// Log output format.
    #[arg(long, env = "GANGPLANK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter in tracing's env-filter syntax, for example `info` or
    /// `info,gangplank::extender=debug`.
    #[arg(
        long,
        env = "GANGPLANK_LOG_LEVEL",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub log_level: String,

    /// Debugging aid: write the body of every extender request to `DIR/<verb>-<n>.json`
    /// (n increasing, continuing after files already there). The end-to-end harness uses it to
    /// capture what a real kube-scheduler sends, as golden fixtures. Leave unset in production.
    #[arg(long, env = "GANGPLANK_CAPTURE_DIR", value_name = "DIR")]
    pub capture_dir: Option<PathBuf>,

    /// Whether the mutating webhook puts the scheduling gate `scheduling.gangplank.dev/admission`
    /// on new pods of a group or queue, so that they wait until Gangplank's admission loop admits
    /// their group. With `false` they still get the marker resource and normalised labels, and
    /// are scheduled at once through the extender (for clusters, or test setups, without the
    /// admission loop: a gate nobody removes strands the pod).
    #[arg(
        long,
        env = "GANGPLANK_GATE_PODS",
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub gate_pods: bool,

    /// Whether a gang may be admitted when its first member is created, so that its members
    /// are created without the admission gate (no gate removal later): only while the last
    /// admission pass left nothing waiting but for members, only when `minMember` copies of
    /// the first member fit in the room that pass left (less recent arrivals and every queue's
    /// unused guarantee), and never for gangs with a topology key, elastic gangs or queues
    /// with a capability. With `false`, every new managed pod is gated and released by a pass.
    #[arg(
        long,
        env = "GANGPLANK_ADMIT_ON_ARRIVAL",
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub admit_on_arrival: bool,

    /// Whether the members of a gang admitted on arrival also carry the placing extender's
    /// marker `scheduling.gangplank.dev/placement`, so Gangplank filters and scores them (a
    /// whole-gang claim at filter, the `--placement` strategy). With `false` the scheduler
    /// places them with its own plugins alone, which saves two calls per member inside its
    /// one-at-a-time scheduling cycle; their binds still wait for quorum in Gangplank (the
    /// binding extender), so the gang is never bound partially. Pods of priority above zero
    /// always carry it, so that Gangplank's preempt verb vets the victims they may ask for.
    #[arg(
        long,
        env = "GANGPLANK_PLACE_ARRIVALS",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub place_arrivals: bool,

    /// The scheduler names the cluster's schedulers serve, comma-separated: the profiles of
    /// the kube-scheduler's configuration (the shipped one serves these three) and any other
    /// scheduler that runs. A managed pod that names another is placed by nobody: the webhook
    /// warns when it is created and never admits it on arrival, and its gang waits, reason
    /// `SchedulerNotServed`, holding no room. An empty list trusts every name.
    #[arg(
        long,
        env = "GANGPLANK_SCHEDULER_NAMES",
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = "default-scheduler,scheduler-plugins-scheduler,volcano"
    )]
    pub scheduler_names: Vec<String>,

    /// Whether the cluster grows when pods do not fit (a node autoscaler such as Karpenter or
    /// the Cluster Autoscaler runs): a gang within its queue's quota that finds no room then
    /// asks for it with stand-in pods in Gangplank's namespace (--leader-election-namespace),
    /// which the autoscaler provisions for, instead of holding a reservation of today's nodes.
    /// See docs/autoscaling.md.
    #[arg(
        long,
        env = "GANGPLANK_NODE_AUTOSCALING",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub node_autoscaling: bool,

    /// On a MultiKueue manager whose Kueue sets `multiKueue.dispatcherName:
    /// scheduling.gangplank.dev/fit`: nominate for each Workload the workers that can hold its
    /// whole gang now (reading each worker's nodes and pods through the kubeconfig MultiKueue
    /// uses for it), and none, saying why in an Event, when no worker can. See
    /// docs/multi-cluster.md.
    #[arg(
        long,
        env = "GANGPLANK_MULTIKUEUE_DISPATCHER",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub multikueue_dispatcher: bool,

    /// With --multikueue-dispatcher: Kueue's namespace, where the MultiKueueClusters'
    /// kubeconfig Secrets are.
    #[arg(
        long,
        env = "GANGPLANK_KUEUE_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "kueue-system"
    )]
    pub kueue_namespace: String,

    /// With --node-autoscaling: how long a gang's stand-in pods may stay unplaced before its
    /// growth is given up (the stand-ins deleted, the gang waiting with reason GrowthFailed);
    /// also how long it then waits before asking again.
    #[arg(
        long,
        env = "GANGPLANK_GROWTH_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 600,
        value_parser = clap::value_parser!(u32).range(1..=86_400)
    )]
    pub growth_timeout: u32,

    /// With --node-autoscaling: how many gangs may grow the cluster at once, taken in
    /// fair-share order.
    #[arg(
        long,
        env = "GANGPLANK_GROWTH_AT_ONCE",
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=1_000)
    )]
    pub growth_at_once: u32,

    /// The image of stand-in pods (it never runs a command of its own: the pause image).
    #[arg(
        long,
        env = "GANGPLANK_STAND_IN_IMAGE",
        value_name = "IMAGE",
        default_value = "registry.k8s.io/pause:3.10"
    )]
    pub stand_in_image: String,

    /// The PriorityClass of stand-in pods, which must exist: one below every workload's, so
    /// that the scheduler preempts a stand-in for a gang's member that needs its node (another
    /// gang's stand-ins would otherwise hold the room that gang was admitted into). The chart
    /// makes `gangplank-stand-in` (value -1000, preemptionPolicy Never). Empty: none (priority
    /// 0), for a cluster whose workloads all have a higher priority.
    #[arg(
        long,
        env = "GANGPLANK_STAND_IN_PRIORITY_CLASS",
        value_name = "NAME",
        default_value = "gangplank-stand-in"
    )]
    pub stand_in_priority_class: String,

    /// Whether the extender's bind verb also binds pods that do not carry the marker resource
    /// `scheduling.gangplank.dev/managed`. Only the every-pod scheduler configuration
    /// (`scheduler-config/gangplank-all-pods.yaml`) needs `true`: there the scheduler sends the
    /// bind of every pod to Gangplank. With `false`, a bind of an unmarked pod is refused.
    #[arg(
        long,
        env = "GANGPLANK_BIND_UNMARKED_PODS",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub bind_unmarked_pods: bool,

    /// Whether the bind verb holds the binds of a gang the stock scheduler places whole itself
    /// (a Workload API PodGroup of a gang policy, with `GenericWorkload` on) until quorum, as
    /// it does for every other gang. With `false` it binds each such member at once and leaves
    /// all-or-nothing to the scheduler's PodGroup cycle and its `GangScheduling` Permit. Set
    /// `true` only for a scheduler profile that disables `GangScheduling`.
    #[arg(
        long,
        env = "GANGPLANK_HOLD_WORKLOAD_API_GANG_BINDS",
        value_name = "BOOL",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub hold_workload_api_gang_binds: bool,

    /// Whether replicas elect a leader with a Lease: only the leader runs the admission loop,
    /// the controller and the scheduler extender; every replica serves the webhooks. With
    /// `false` this process does all of it at once: run exactly one.
    #[arg(
        long,
        env = "GANGPLANK_LEADER_ELECT",
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub leader_elect: bool,

    /// Namespace of the leader Lease: the pod's own (the Deployment sets POD_NAMESPACE).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "gangplank-system"
    )]
    pub leader_election_namespace: String,

    /// Name of the leader Lease.
    #[arg(
        long,
        env = "GANGPLANK_LEADER_ELECTION_LEASE",
        value_name = "NAME",
        default_value = "gangplank"
    )]
    pub leader_election_lease: String,

    /// This replica's name in the Lease, unique among the replicas: the pod's name (the
    /// Deployment sets POD_NAME); by default the host name.
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub leader_election_identity: Option<String>,

    /// How long the Lease lasts unrenewed before another replica takes over: the longest a
    /// failover takes when the leader dies without giving it up. The leader renews every fifth
    /// of it and stops leading when it could not renew for two thirds of it.
    #[arg(
        long,
        env = "GANGPLANK_LEADER_ELECTION_LEASE_SECONDS",
        value_name = "SECONDS",
        default_value_t = 15
    )]
    pub leader_election_lease_seconds: u64,

    /// The scheduler's own leader Lease, as `NAMESPACE/NAME` (kubeadm's scheduler:
    /// `kube-system/kube-scheduler`), for Gangplank run as a sidecar of each scheduler: this
    /// replica competes for Gangplank's Lease only while that Lease names the scheduler beside
    /// it (its holder is `<identity>_<uuid>`, as kube-scheduler writes it, so the identity must
    /// be the node's host name), and gives Gangplank's Lease up when the scheduler's moves to
    /// another node. Unset: any replica may lead.
    #[arg(
        long,
        env = "GANGPLANK_LEADER_ELECTION_FOLLOW",
        value_name = "NAMESPACE/NAME",
        value_parser = namespaced_name
    )]
    pub leader_election_follow: Option<(String, String)>,
}

/// A combination of flags Gangplank refuses to start with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "refusing to serve the scheduler extender on {addr} without --extender-client-ca-file: anyone who reaches that address could bind pods; give the CA of the scheduler's client certificate (for development on a loopback address only: --extender-insecure-loopback=true)"
    )]
    UnauthenticatedExtender { addr: SocketAddr },
    #[error(
        "--leader-election-follow needs --leader-elect=true: without an election every copy leads, whichever scheduler leads"
    )]
    FollowWithoutElection,
}

impl ServeArgs {
    /// The scheduler names served (`--scheduler-names`; none listed: every name).
    pub fn schedulers(&self) -> gangplank_core::model::Schedulers {
        let names: Vec<String> = (self.scheduler_names.iter())
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            gangplank_core::model::Schedulers::default()
        } else {
            gangplank_core::model::Schedulers::only(names)
        }
    }

    /// `gangplank serve`'s flags all at their defaults, whatever the environment says: the
    /// settings `gangplank simulate` starts from.
    pub fn defaults() -> ServeArgs {
        use clap::FromArgMatches;
        let command = ServeArgs::augment_args(clap::Command::new("serve"))
            .mut_args(|arg| arg.env(None::<&str>));
        let matches = command
            .try_get_matches_from(["serve"])
            .expect("every flag of gangplank serve has a default");
        ServeArgs::from_arg_matches(&matches).expect("the defaults are flags of serve")
    }

    /// Settings of gang claims and held binds.
    pub fn gang_settings(&self) -> gangplank_core::claims::Settings {
        gangplank_core::claims::Settings {
            strategy: self.placement,
            max_hold: std::time::Duration::from_secs(self.max_bind_hold_seconds),
            bind_unmarked: self.bind_unmarked_pods,
            hold_scheduler_gangs: self.hold_workload_api_gang_binds,
            gated_admission: self.gate_pods,
        }
    }

    /// The MultiKueue dispatcher's settings, or `None` without --multikueue-dispatcher.
    pub fn multikueue_dispatcher(&self) -> Option<crate::multikueue::Settings> {
        self.multikueue_dispatcher
            .then(|| crate::multikueue::Settings {
                kueue_namespace: self.kueue_namespace.clone(),
            })
    }

    /// How the cluster grows, or `None` without --node-autoscaling.
    pub fn growth(&self) -> Option<gangplank_core::model::Growth> {
        self.node_autoscaling
            .then(|| gangplank_core::model::Growth {
                namespace: self.leader_election_namespace.as_str().into(),
                timeout_secs: i64::from(self.growth_timeout),
                at_once: self.growth_at_once as usize,
            })
    }

    /// The leader election's settings, or `None` when it is off.
    pub fn leader_election(&self) -> Option<crate::leader::Election> {
        self.leader_elect.then(|| crate::leader::Election {
            namespace: self.leader_election_namespace.clone(),
            name: self.leader_election_lease.clone(),
            identity: self
                .leader_election_identity
                .clone()
                .unwrap_or_else(host_name),
            duration: std::time::Duration::from_secs(self.leader_election_lease_seconds.max(3)),
            pod: own_pod(),
            follow: self.leader_election_follow.clone(),
        })
    }

    /// Refuses an extender that any process reaching its address could call.
    pub fn check(&self) -> Result<(), Error> {
        let insecure = self.extender_insecure_loopback && self.extender_addr.ip().is_loopback();
        if self.extender_client_ca_file.is_none() && !insecure {
            return Err(Error::UnauthenticatedExtender {
                addr: self.extender_addr,
            });
        }
        if self.leader_election_follow.is_some() && !self.leader_elect {
            return Err(Error::FollowWithoutElection);
        }
        Ok(())
    }

    /// The extender port's TLS files (client CA included), when TLS is configured.
    pub fn extender_tls(&self) -> Option<crate::tls::Files> {
        let mut files = self.webhook_tls()?;
        files.client_ca = self.extender_client_ca_file.clone();
        files.client_name = Some(self.extender_client_name.clone());
        Some(files)
    }

    /// The webhook port's TLS files, when TLS is configured.
    pub fn webhook_tls(&self) -> Option<crate::tls::Files> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::Files {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: None,
                client_name: None,
            }),
            _ => None,
        }
    }
}

/// `--placement`: the names of [`Strategy`], listed in `--help`.
fn strategy_parser() -> impl clap::builder::TypedValueParser<Value = Strategy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Strategy::ALL.map(Strategy::as_str))
        .map(|name| Strategy::named(&name).expect("clap accepts only the names of the strategies"))
}

/// `NAMESPACE/NAME`, both parts non-empty.
fn namespaced_name(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "{text:?} is not NAMESPACE/NAME (for kubeadm's scheduler: kube-system/kube-scheduler)"
        )),
    }
}

/// The pod this process runs in, from the downward API's POD_NAMESPACE and POD_NAME (the
/// Deployment sets both); `None` outside a pod.
fn own_pod() -> Option<(String, String)> {
    let namespace = std::env::var("POD_NAMESPACE").ok()?;
    let name = std::env::var("POD_NAME").ok()?;
    Some((namespace, name))
}

/// This machine's host name (a pod's name in Kubernetes), or "gangplank" if none can be read.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gangplank".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::Path;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_shipped_scheduler_names_are_served_unless_others_are_listed_and_none_means_any() {
        use gangplank_core::model::Pod;
        let asking = |name: &str| Pod {
            scheduler: (name != "default-scheduler").then(|| name.into()),
            ..Pod::default()
        };
        let shipped = serve(&[]).schedulers();
        for name in [
            "default-scheduler",
            "scheduler-plugins-scheduler",
            "volcano",
        ] {
            assert_eq!(shipped.unserved(&asking(name)), None, "{name}");
        }
        assert_eq!(shipped.unserved(&asking("nobody")), Some("nobody"));
        let only = serve(&["--scheduler-names", "default-scheduler, batch"]).schedulers();
        assert_eq!(only.unserved(&asking("batch")), None);
        assert_eq!(only.unserved(&asking("volcano")), Some("volcano"));
        let any = serve(&["--scheduler-names", ""]).schedulers();
        assert_eq!(any.unserved(&asking("nobody")), None);
    }

    #[test]
    fn the_defaults_are_those_of_an_empty_command_line() {
        let defaults = ServeArgs::defaults();
        assert_eq!(defaults.max_bind_hold_seconds, 300);
        assert_eq!(defaults.placement, Strategy::Binpack);
        assert!(defaults.gate_pods && !defaults.bind_unmarked_pods);
        let command = ServeArgs::augment_args(clap::Command::new("serve"));
        assert!(
            command.get_arguments().any(|a| a.get_env().is_some()),
            "serve reads its environment, which defaults() ignores"
        );
    }

    #[test]
    fn serve_defaults_to_plain_http_on_the_documented_ports() {
        let args = serve(&[]);
        assert_eq!(args.extender_addr.to_string(), "127.0.0.1:8443");
        assert_eq!(args.webhook_addr.to_string(), "0.0.0.0:9443");
        assert_eq!(args.metrics_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(args.extender_tls(), None);
        assert_eq!(args.webhook_tls(), None);
        assert!(!args.bind_unmarked_pods);
        assert!(
            args.check().is_err(),
            "the defaults serve no extender that anyone local could call"
        );
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(args.log_level, "info");
        assert_eq!(args.capture_dir, None);
        assert!(args.gate_pods);
        assert!(args.admit_on_arrival);
        assert!(!args.place_arrivals);
    }

    #[test]
    fn pod_gating_is_switched_off_with_an_explicit_false() {
        assert!(!serve(&["--gate-pods", "false"]).gate_pods);
    }

    fn serve(flags: &[&str]) -> ServeArgs {
        let cli = Cli::try_parse_from(["gangplank", "serve"].iter().chain(flags)).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        *args
    }

    #[test]
    fn an_extender_on_a_network_address_without_a_client_ca_is_refused() {
        let err = serve(&["--extender-addr", "0.0.0.0:8443"])
            .check()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("without --extender-client-ca-file"),
            "{err}"
        );
    }

    #[test]
    fn an_extender_on_loopback_asks_for_the_schedulers_certificate_unless_told_it_is_development() {
        let err = serve(&["--extender-addr", "127.0.0.1:8443"])
            .check()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("--extender-insecure-loopback=true"),
            "{err}"
        );
        let development = serve(&["--extender-insecure-loopback", "true"]);
        development.check().unwrap();
        let network = serve(&[
            "--extender-addr",
            "0.0.0.0:8443",
            "--extender-insecure-loopback",
            "true",
        ]);
        assert!(
            network.check().is_err(),
            "the flag opens loopback only, never a network address"
        );
    }

    #[test]
    fn a_sidecar_follows_the_lease_it_names_and_only_with_an_election() {
        let args = serve(&[
            "--leader-election-follow",
            "kube-system/kube-scheduler",
            "--extender-insecure-loopback",
            "true",
        ]);
        args.check().unwrap();
        let settings = args.leader_election().unwrap();
        assert_eq!(
            settings.follow,
            Some(("kube-system".to_owned(), "kube-scheduler".to_owned()))
        );
        let without = serve(&[
            "--leader-election-follow",
            "kube-system/kube-scheduler",
            "--leader-elect",
            "false",
            "--extender-insecure-loopback",
            "true",
        ]);
        assert!(matches!(without.check(), Err(Error::FollowWithoutElection)));
        let err = Cli::try_parse_from([
            "gangplank",
            "serve",
            "--leader-election-follow",
            "kube-scheduler",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("is not NAMESPACE/NAME"), "{err}");
    }

    #[test]
    fn an_extender_on_a_network_address_with_a_client_ca_verifies_clients() {
        let args = serve(&[
            "--extender-addr",
            "0.0.0.0:8443",
            "--tls-cert-file",
            "/tls/tls.crt",
            "--tls-key-file",
            "/tls/tls.key",
            "--extender-client-ca-file",
            "/tls/ca.crt",
        ]);
        args.check().unwrap();
        let extender = args.extender_tls().unwrap();
        assert_eq!(
            extender.client_ca.as_deref(),
            Some(Path::new("/tls/ca.crt"))
        );
        assert_eq!(
            extender.client_name.as_deref(),
            Some("system:kube-scheduler"),
            "only the scheduler's certificate by default"
        );
        assert_eq!(args.webhook_tls().unwrap().client_ca, None);
    }

    #[test]
    fn a_client_ca_without_a_serving_certificate_is_rejected() {
        let err =
            Cli::try_parse_from(["gangplank", "serve", "--extender-client-ca-file", "/ca.crt"])
                .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn a_certificate_without_a_key_is_rejected() {
        let err = Cli::try_parse_from(["gangplank", "serve", "--tls-cert-file", "/tls/tls.crt"])
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
