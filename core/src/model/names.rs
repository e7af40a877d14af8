//! The names Gangplank gives things in the API that the model and the policy read too: the
//! admission gate, the marker resources, the default queue and the default gang timeout. The API
//! types re-export them, so each is written once.

/// Scheduling gate the mutating webhook puts on managed pods; the admission loop removes it when
/// the pod's group is admitted.
pub const ADMISSION_GATE: &str = "scheduling.gangplank.dev/admission";

/// Annotation that records on a pod that Gangplank admitted it (its value: when, RFC 3339):
/// written by the admission loop in the same patch that removes the gate, or by the mutating
/// webhook when it admits the pod on arrival. Only Gangplank may write it (the API server's
/// policy `gangplank-pods`), so the bind verb refuses a managed pod that lost its gate without
/// it: someone else removed the gate.
pub const ADMITTED_ANNOTATION: &str = "scheduling.gangplank.dev/admitted";

/// Extended resource (named in request and limit; the webhook gives it zero units) that marks a
/// pod as managed by Gangplank, so the scheduler sends only those pods' bind calls to Gangplank
/// (the binding extender's `managedResources`, which looks at the name, not the amount).
pub const MANAGED_RESOURCE: &str = "scheduling.gangplank.dev/managed";

/// Second marker on every managed pod, the placing extender's `managedResources`: its filter,
/// prioritize and preempt calls have a short `httpTimeout`, so a hung Gangplank holds the
/// scheduling cycle for seconds, while held binds keep the binding extender's long one. The
/// scheduler refuses one resource name in two extenders, hence two markers.
pub const PLACEMENT_RESOURCE: &str = "scheduling.gangplank.dev/placement";

/// Name of the queue that always exists and takes every managed pod that names no queue.
pub const DEFAULT_QUEUE: &str = "default";

/// How long a gang may go with no member placed, when `scheduleTimeoutSeconds` is unset (the
/// same figure as scheduler-plugins' coscheduling, whose timeout counts from each member).
pub const DEFAULT_SCHEDULE_TIMEOUT_SECONDS: i32 = 60;
