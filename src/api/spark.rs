//! Spark applications of Kubeflow's spark-operator (`sparkoperator.k8s.io` SparkApplication):
//! what Gangplank reads to make one a gang when the application names no batch scheduler
//! (with `spec.batchScheduler: volcano`, the operator writes a Volcano PodGroup itself, read
//! like any other).
//!
//! The driver comes first and makes its executors, so the gang is the driver alone
//! (`minMember` 1) with the room of the whole application kept for it ([`room`]), as the
//! operator's own Volcano PodGroup asks: no driver starts without room for its executors.
//! The operator labels the driver and every executor with [`APP_NAME_LABEL`] and
//! [`LAUNCHED_LABEL`]; an executor's controller is the driver pod, so those labels are what tie
//! the pods to their application (`crate::api::workloads::of`).

use gangplank_core::model::Resources;
use gangplank_core::model::quantity::{Scale, parse};
use serde_json::Value;

/// The application's name, on its driver and executor pods.
pub const APP_NAME_LABEL: &str = "sparkoperator.k8s.io/app-name";
/// `"true"` on the pods the operator launched.
pub const LAUNCHED_LABEL: &str = "sparkoperator.k8s.io/launched-by-spark-operator";
/// The API version Gangplank reads applications with.
pub const API_VERSION: &str = "sparkoperator.k8s.io/v1beta2";

const MIB: i64 = 1 << 20;
/// Spark's smallest memory overhead (`spark.driver.minMemoryOverhead`, and the executors'),
/// and its default share of the memory (`spark.driver.memoryOverheadFactor`).
const MIN_OVERHEAD: i64 = 384 * MIB;
const OVERHEAD_FACTOR: f64 = 0.1;
/// Spark's default memory of a driver or an executor (`spark.driver.memory`), and the
/// executors it starts when the spec names no count (`spark.executor.instances`).
const DEFAULT_MEMORY: i64 = 1024 * MIB;
const DEFAULT_EXECUTORS: i64 = 2;

/// What the application asks in all when its driver and first executors run: the driver's
/// requests plus those of the executors it starts with, each as Spark's Kubernetes backend
/// sets a pod's requests: CPU `coreRequest`, else `cores`, else 1; memory `memory` (Spark's
/// units: `512m` is 512 MiB) plus `memoryOverhead`, else the larger of 384 MiB and
/// `memoryOverheadFactor` (0.1 when unset) of the memory. The executors it starts with are
/// `executor.instances` (2 when unset), or with dynamic allocation the largest of that,
/// `initialExecutors` and `minExecutors` (as spark-operator counts them); executors beyond
/// are elastic. `spec` is the application's spec; the error names the field to change.
pub fn room(spec: &Value) -> Result<Resources, String> {
    let factor = match spec.get("memoryOverheadFactor") {
        None | Some(Value::Null) => OVERHEAD_FACTOR,
        Some(v) => v
            .as_str()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or("spec.memoryOverheadFactor must be a non-negative number, like \"0.1\"")?,
    };
    let driver = pod(spec, "driver", factor)?;
    let executor = pod(spec, "executor", factor)?;
    let executors = executors(spec)?;
    let mut total = driver;
    for (name, amount) in executor.iter() {
        total.set(
            name,
            total
                .get(name)
                .saturating_add(amount.saturating_mul(executors)),
        );
    }
    Ok(total)
}

/// The executors the application starts with (see [`room`]).
fn executors(spec: &Value) -> Result<i64, String> {
    let count =
        |path: &str| -> Result<Option<i64>, String> {
            match spec.pointer(path) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_i64().filter(|n| *n >= 0).map(Some).ok_or_else(|| {
                    format!("spec{} must be a whole number", path.replace('/', "."))
                }),
            }
        };
    let instances = count("/executor/instances")?;
    let dynamic = spec
        .pointer("/dynamicAllocation/enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !dynamic {
        return Ok(instances.unwrap_or(DEFAULT_EXECUTORS));
    }
    let initial = count("/dynamicAllocation/initialExecutors")?;
    let min = count("/dynamicAllocation/minExecutors")?;
    Ok([instances, initial, min]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0))
}

/// The requests of one pod of `role` (`driver` or `executor`).
fn pod(spec: &Value, role: &str, factor: f64) -> Result<Resources, String> {
    let field = |name: &str| {
        spec.pointer(&format!("/{role}/{name}"))
            .filter(|v| !v.is_null())
    };
    let path = |name: &str| format!("spec.{role}.{name}");
    let cpu = match (field("coreRequest"), field("cores")) {
        (Some(request), _) => request
            .as_str()
            .and_then(|q| parse(q, Scale::Milli).ok())
            .filter(|m| *m >= 0)
            .ok_or_else(|| {
                format!(
                    "{} must be a CPU quantity, like \"500m\"",
                    path("coreRequest")
                )
            })?,
        (None, Some(cores)) => cores
            .as_i64()
            .filter(|n| *n >= 0)
            .map(|n| n.saturating_mul(1000))
            .ok_or_else(|| format!("{} must be a whole number", path("cores")))?,
        (None, None) => 1000,
    };
    let memory = match field("memory") {
        Some(v) => spark_bytes(v).ok_or_else(|| format!("{} {MEMORY_FORMAT}", path("memory")))?,
        None => DEFAULT_MEMORY,
    };
    let overhead = match field("memoryOverhead") {
        Some(v) => {
            spark_bytes(v).ok_or_else(|| format!("{} {MEMORY_FORMAT}", path("memoryOverhead")))?
        }
        None => MIN_OVERHEAD.max((memory as f64 * factor) as i64),
    };
    let mut requests = Resources::new();
    requests.set("cpu", cpu);
    requests.set("memory", memory.saturating_add(overhead));
    Ok(requests)
}

const MEMORY_FORMAT: &str =
    "must be a whole amount in Spark's units (b, k, m, g, t, p; MiB when none), like \"512m\"";

/// A memory amount as Spark reads one (`JavaUtils.byteStringAsMb`, then bytes): whole digits
/// and a binary unit, `b`, `k`/`kb`, `m`/`mb`, `g`/`gb`, `t`/`tb` or `p`/`pb` in any case,
/// MiB when none.
fn spark_bytes(value: &Value) -> Option<i64> {
    let text = value.as_str()?.trim().to_ascii_lowercase();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit {
        "b" => 0,
        "k" | "kb" => 10,
        "" | "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        "p" | "pb" => 50,
        _ => return None,
    };
    number.parse::<i64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cpu_and_mib(spec: Value) -> (i64, i64) {
        let room = room(&spec).expect("a valid spec");
        (room.get("cpu"), room.get("memory") / MIB)
    }

    #[test]
    fn an_application_asks_for_its_driver_and_the_executors_it_starts_with() {
        let spec = json!({
            "driver": {"cores": 2, "memory": "4g"},
            "executor": {"instances": 3, "coreRequest": "1500m", "memory": "2048m",
                         "memoryOverhead": "1g"}});
        // The driver: 4 GiB and its overhead of 10% (409 MiB); each executor 2 GiB and 1 GiB.
        assert_eq!(cpu_and_mib(spec), (2000 + 3 * 1500, 4096 + 409 + 3 * 3072));
    }

    #[test]
    fn an_application_that_says_little_gets_sparks_defaults() {
        // 1 core and 1 GiB with the 384 MiB least overhead, for the driver and 2 executors.
        assert_eq!(
            cpu_and_mib(json!({"driver": {}, "executor": {}})),
            (3000, 3 * 1408)
        );
        let factor = json!({"memoryOverheadFactor": "0.5", "driver": {"memory": "2g"},
                            "executor": {"instances": 0}});
        assert_eq!(cpu_and_mib(factor), (1000, 3072));
    }

    #[test]
    fn with_dynamic_allocation_it_starts_with_the_most_of_its_counts() {
        let spec = json!({"driver": {"cores": 1}, "executor": {"instances": 1, "cores": 4},
            "dynamicAllocation": {"enabled": true, "initialExecutors": 2, "minExecutors": 3,
                                  "maxExecutors": 10}});
        assert_eq!(cpu_and_mib(spec).0, 1000 + 3 * 4000);
    }

    #[test]
    fn a_field_spark_cannot_read_is_named() {
        for (spec, field) in [
            (json!({"driver": {"memory": "1.5g"}}), "spec.driver.memory"),
            (
                json!({"executor": {"memoryOverhead": "2x"}}),
                "spec.executor.memoryOverhead",
            ),
            (
                json!({"executor": {"coreRequest": "lots"}}),
                "spec.executor.coreRequest",
            ),
            (json!({"driver": {"cores": -1}}), "spec.driver.cores"),
            (
                json!({"executor": {"instances": "3"}}),
                "spec.executor.instances",
            ),
            (
                json!({"memoryOverheadFactor": "-1"}),
                "spec.memoryOverheadFactor",
            ),
        ] {
            let why = room(&spec).expect_err("refused");
            assert!(why.starts_with(field), "{why} names {field}");
        }
    }
}
