//! End-to-end suite: real etcd, kube-apiserver, kube-controller-manager and the stock
//! kube-scheduler, kwok fake nodes, and Gangplank from the cargo build, all started by `e2e/up`.
//! Every test is `#[ignore]`d so that a plain `cargo test` does not need the cluster; `e2e/test`
//! brings the cluster up and runs them with `--ignored`, one at a time (they share the nodes).

mod support;

mod autoscaler;
mod backfill;
mod batch_jobs;
mod cli;
mod composite_pod_groups;
mod control_plane;
mod controller;
mod dashboard;
mod deployment_layout;
mod dra;
mod faults;
mod floods;
mod gangs;
mod instance_topology;
mod leader;
mod multi_cluster;
mod operators;
mod queues;
mod reclaim;
mod security;
mod simulate;
mod spark;
mod sub_groups;
mod tenancy;
mod topology;
mod upgrade;
mod webhooks;
mod workload_api;
