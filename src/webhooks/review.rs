//! The AdmissionReview v1 wire format, both ways, and the verdict the rules return.
//!
//! Requests are decoded with kube's [`AdmissionReview`] typed per route (a pod route decodes
//! `Pod`s), so the rules get Rust types. Responses are written here rather than with kube's
//! `AdmissionResponse`, for two reasons: its `patch` serializes as a JSON array of numbers,
//! while the API documents (and every other webhook sends) a base64 string; and a denial
//! should carry the HTTP code and reason the API server passes on to the user (422 `Invalid`
//! for a wrong field, 403 `Forbidden` for a state that refuses the change, 404 `NotFound` for
//! a reference to an object that does not exist, 503
//! `ServiceUnavailable` when Gangplank cannot decide yet), not kube's generic 400.
//!
//! Every answer is HTTP 200 with the verdict in the body; HTTP 400 is only for a body that is
//! not an AdmissionReview at all (see [`super::Review`]).

use std::fmt;

use base64::Engine;
use json_patch::Patch;
use kube::core::admission::{AdmissionRequest, Operation};
use serde::Serialize;

/// `apiVersion` of the only AdmissionReview version Gangplank speaks (registrations list
/// `admissionReviewVersions: [v1]`).
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// `kind` of an AdmissionReview.
pub const KIND: &str = "AdmissionReview";

/// What a webhook decided about one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Admit, after applying `patch` (mutating webhooks; empty for "unchanged"). `warnings`
    /// are shown to the client (kubectl prints them) without refusing anything.
    Allow { patch: Patch, warnings: Vec<String> },
    /// Refuse, with the reason shown to the client.
    Deny(Denial),
}

impl Verdict {
    /// Admit unchanged.
    pub fn allow() -> Self {
        Verdict::Allow {
            patch: Patch(Vec::new()),
            warnings: Vec::new(),
        }
    }

    /// Admit after `patch` (which may be empty).
    pub fn patch(patch: Patch) -> Self {
        Verdict::Allow {
            patch,
            warnings: Vec::new(),
        }
    }

    /// Adds a warning for the client; no effect on a denial.
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        if let Verdict::Allow { warnings, .. } = &mut self {
            warnings.push(warning.into());
        }
        self
    }

    /// For the `outcome` label of `gangplank_webhook_requests_total`.
    pub fn outcome(&self) -> Outcome {
        match self {
            Verdict::Allow { patch, .. } if patch.0.is_empty() => Outcome::Allowed,
            Verdict::Allow { .. } => Outcome::Patched,
            Verdict::Deny(denial) if denial.reason == DenialReason::Unavailable => Outcome::Error,
            Verdict::Deny(_) => Outcome::Denied,
        }
    }
}

impl From<Result<Verdict, Denial>> for Verdict {
    fn from(result: Result<Verdict, Denial>) -> Self {
        result.unwrap_or_else(Verdict::Deny)
    }
}

/// Why a request is refused, in words for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: DenialReason,
    /// The whole message; for field errors `<field>: <what is wrong and what would be
    /// accepted>`, several joined with `; `.
    pub message: String,
}

impl Denial {
    /// One wrong field: `"spec.weight", "must be at least 1, got 0"`.
    pub fn invalid(field: impl fmt::Display, problem: impl fmt::Display) -> Self {
        Denial {
            reason: DenialReason::Invalid,
            message: format!("{field}: {problem}"),
        }
    }

    /// A valid object that the current state of the cluster refuses (a closed queue, a
    /// running gang).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Denial {
            reason: DenialReason::Forbidden,
            message: message.into(),
        }
    }

    /// The object names another object (a queue, a parent) that does not exist. The handler
    /// looks again for a moment before answering, in case it was created just before.
    pub fn not_found(field: impl fmt::Display, problem: impl fmt::Display) -> Self {
        Denial {
            reason: DenialReason::NotFound,
            message: format!("{field}: {problem}"),
        }
    }

    /// Gangplank cannot decide right now (its view of the cluster is not loaded yet).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Denial {
            reason: DenialReason::Unavailable,
            message: message.into(),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Collects every field error of one object, so that a user fixes them all in one go instead
/// of meeting them one by one.
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<String>);

impl FieldErrors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `field` unless it is unset or at least one second.
    pub fn seconds(&mut self, field: &str, value: Option<i32>) {
        if let Some(value) = value
            && value < 1
        {
            self.add(
                field,
                format!("must be at least 1 (seconds) or unset, got {value}"),
            );
        }
    }

    /// Records `field` when `value` members are more than a gang may have
    /// ([`gangplank_core::limits::MAX_MEMBERS`]).
    pub fn members(&mut self, field: impl fmt::Display, value: i64) {
        let limit = gangplank_core::limits::MAX_MEMBERS;
        if value > i64::from(limit) {
            self.add(
                field,
                format!("must be at most {limit}, Gangplank's largest gang, got {value}"),
            );
        }
    }

    /// Records that `field` is wrong: `problem` says how, and what would be accepted.
    pub fn add(&mut self, field: impl fmt::Display, problem: impl fmt::Display) {
        self.0.push(format!("{field}: {problem}"));
    }

    /// Records a problem already worded `<field>: <problem>`.
    pub fn push(&mut self, problem: String) {
        self.0.push(problem);
    }

    /// `Ok` when nothing was recorded, else one [`DenialReason::Invalid`] denial listing all.
    pub fn into_result(self) -> Result<(), Denial> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Denial {
                reason: DenialReason::Invalid,
                message: self.0.join("; "),
            })
        }
    }
}

/// The `reason` and HTTP `code` of a denial's status, which the API server returns to the
/// client as the request's own status (`Error from server (Invalid): ...` in kubectl).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialReason {
    /// A field holds a value that is never acceptable: 422.
    Invalid,
    /// Acceptable in itself, refused in the cluster's current state: 403.
    Forbidden,
    /// Names an object that does not exist: 404.
    NotFound,
    /// Gangplank cannot decide yet; retrying later will work: 503.
    Unavailable,
}

impl DenialReason {
    pub fn code(self) -> u16 {
        match self {
            DenialReason::Invalid => 422,
            DenialReason::Forbidden => 403,
            DenialReason::NotFound => 404,
            DenialReason::Unavailable => 503,
        }
    }

    /// The `metav1.StatusReason` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::Invalid => "Invalid",
            DenialReason::Forbidden => "Forbidden",
            DenialReason::NotFound => "NotFound",
            DenialReason::Unavailable => "ServiceUnavailable",
        }
    }
}

/// How a request ended, for `gangplank_webhook_requests_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted unchanged.
    Allowed,
    /// Refused by a rule.
    Denied,
    /// Admitted with a patch.
    Patched,
    /// Not decided: a body that is not an AdmissionReview (HTTP 400), or Gangplank could not
    /// decide (denied with 503 `ServiceUnavailable`).
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Allowed,
        Outcome::Denied,
        Outcome::Patched,
        Outcome::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Patched => "patched",
            Outcome::Error => "error",
        }
    }
}

/// The operation's spelling in the API (`CREATE`, ...), for logs and metric labels.
pub fn operation_str(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// The response AdmissionReview for `request`.
pub fn response<K: kube::Resource>(request: &AdmissionRequest<K>, verdict: &Verdict) -> ReviewOut {
    let uid = request.uid.clone();
    let response = match verdict {
        Verdict::Allow { patch, warnings } => {
            let encoded = (!patch.0.is_empty()).then(|| {
                let json = serde_json::to_vec(patch).expect("a JSON patch always serializes");
                base64::engine::general_purpose::STANDARD.encode(json)
            });
            ResponseOut {
                uid,
                allowed: true,
                status: None,
                patch_type: encoded.as_ref().map(|_| "JSONPatch"),
                patch: encoded,
                warnings: warnings.clone(),
            }
        }
        Verdict::Deny(denial) => ResponseOut {
            uid,
            allowed: false,
            status: Some(StatusOut {
                status: "Failure",
                code: denial.reason.code(),
                reason: denial.reason.as_str(),
                message: denial.message.clone(),
            }),
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        },
    };
    ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    }
}

/// An AdmissionReview carrying a response, as the API server reads it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: ResponseOut,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseOut {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Base64 of the JSON patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A `metav1.Status` with what a denial needs.
#[derive(Debug, Serialize)]
pub struct StatusOut {
    pub status: &'static str,
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::admission::AdmissionReview;
    use serde_json::json;

    fn request() -> AdmissionRequest<Pod> {
        let review: AdmissionReview<Pod> = serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "request": {
                "uid": "u-1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE", "userInfo": {}, "name": "p", "namespace": "ns",
                "object": {"metadata": {"name": "p"}}
            }
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    #[test]
    fn an_unchanged_admission_has_no_patch_and_no_status() {
        let out = serde_json::to_value(response(&request(), &Verdict::allow())).unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "u-1", "allowed": true}})
        );
    }

    #[test]
    fn a_patch_is_sent_as_base64_of_the_json_patch() {
        let patch: Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels", "value": {}}]))
                .unwrap();
        let out = serde_json::to_value(response(&request(), &Verdict::patch(patch))).unwrap();
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(out["response"]["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&decoded).unwrap(),
            json!([{"op": "add", "path": "/metadata/labels", "value": {}}])
        );
    }

    #[test]
    fn a_denial_carries_code_reason_and_message() {
        let verdict = Verdict::Deny(Denial::invalid("spec.weight", "must be at least 1, got 0"));
        let out = serde_json::to_value(response(&request(), &verdict)).unwrap();
        assert_eq!(
            out["response"],
            json!({"uid": "u-1", "allowed": false, "status": {
                "status": "Failure", "code": 422, "reason": "Invalid",
                "message": "spec.weight: must be at least 1, got 0"}})
        );
    }

    #[test]
    fn field_errors_are_all_reported_in_one_message() {
        let mut errors = FieldErrors::new();
        assert_eq!(FieldErrors::new().into_result(), Ok(()));
        errors.add("spec.minMember", "must be at least 1, got 0");
        errors.add(
            "spec.maxMember",
            "must be at least spec.minMember (0), got -1",
        );
        let denial = errors.into_result().unwrap_err();
        assert_eq!(denial.reason, DenialReason::Invalid);
        assert_eq!(
            denial.message,
            "spec.minMember: must be at least 1, got 0; spec.maxMember: must be at least spec.minMember (0), got -1"
        );
    }

    #[test]
    fn outcomes_follow_the_verdict() {
        assert_eq!(Verdict::allow().outcome(), Outcome::Allowed);
        let patch: Patch = serde_json::from_value(json!([{"op": "remove", "path": "/a"}])).unwrap();
        assert_eq!(Verdict::patch(patch).outcome(), Outcome::Patched);
        assert_eq!(
            Verdict::Deny(Denial::forbidden("closed")).outcome(),
            Outcome::Denied
        );
        assert_eq!(
            Verdict::Deny(Denial::unavailable("starting")).outcome(),
            Outcome::Error
        );
    }

    #[test]
    fn warnings_are_sent_with_an_admission_only() {
        let verdict = Verdict::allow().warn("no gate: spec.nodeName is set");
        let out = serde_json::to_value(response(&request(), &verdict)).unwrap();
        assert_eq!(
            out["response"]["warnings"],
            json!(["no gate: spec.nodeName is set"])
        );
        let denied = Verdict::Deny(Denial::forbidden("no")).warn("ignored");
        assert_eq!(
            denied,
            Verdict::Deny(Denial::forbidden("no")),
            "a denial has no warnings"
        );
    }
}
