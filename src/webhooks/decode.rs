//! Reading a review: the AdmissionRequest of a v1 AdmissionReview body ([`Review`], axum's
//! extractor), HTTP 400 for a body that is not one, and a denial naming the field for an
//! object whose field has the wrong type.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::core::admission::{AdmissionRequest, AdmissionReview, Operation};
use serde::de::DeserializeOwned;

use super::{Denial, Error, Hook, Observed, Verdict, Webhooks, review};

/// The AdmissionRequest of a v1 AdmissionReview body with an object of type `K`. A body that
/// is not that (not JSON, another version, no request, no object where the operation needs
/// one) is rejected with HTTP 400 and the reason: the API server then applies the
/// registration's failure policy and shows the reason in its error. A review whose object has
/// a field of the wrong type (mutating webhooks run before the API server checks the CRD's
/// schema) is answered with a denial naming the field instead.
pub struct Review<K: kube::Resource>(pub AdmissionRequest<K>);

impl<K> FromRequest<Arc<Webhooks>> for Review<K>
where
    K: kube::Resource + DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<Webhooks>) -> Result<Self, Response> {
        let hook = request
            .extensions()
            .get::<Hook>()
            .copied()
            .unwrap_or(Hook::MutatePods);
        let body = Bytes::from_request(request, state).await.map_err(|e| {
            let status = e.status();
            let why = e.body_text();
            (status, format!("{}\n", Error::Read { hook, why })).into_response()
        })?;
        tracing::trace!(%hook, body = %String::from_utf8_lossy(&body), "AdmissionReview");
        match decode(&body) {
            Ok(request) => Ok(Review(request)),
            Err(Undecodable::Review(why)) => Err(bad_request(Error::Decode { hook, why })),
            Err(Undecodable::Object {
                request,
                field,
                why,
            }) => {
                let request = *request;
                let kind = &request.kind.kind;
                let denial =
                    Denial::invalid(field, format!("{why} (not what a {kind} holds there)"));
                let verdict = Verdict::Deny(denial);
                let mut response = Json(review::response(&request, &verdict)).into_response();
                response.extensions_mut().insert(Observed {
                    operation: review::operation_str(&request.operation),
                    outcome: verdict.outcome(),
                });
                Err(response)
            }
        }
    }
}

/// Why a body gives no `AdmissionRequest<K>`.
enum Undecodable {
    /// Not a v1 AdmissionReview with a request: HTTP 400.
    Review(String),
    /// A review whose object does not decode as `K` (`minMember: "3"`): a denial naming
    /// `field`, the path inside the object, so the user reads what to change.
    Object {
        request: Box<AdmissionRequest<kube::core::DynamicObject>>,
        field: String,
        why: String,
    },
}

impl From<String> for Undecodable {
    fn from(why: String) -> Self {
        Undecodable::Review(why)
    }
}

fn decode<K: kube::Resource + DeserializeOwned>(
    body: &[u8],
) -> Result<AdmissionRequest<K>, Undecodable> {
    // Decoding with paths costs every review a path stack; only a body that fails needs one.
    let review: AdmissionReview<K> = serde_json::from_slice(body).or_else(|_| {
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
            .map_err(|e| undecodable(body, e))
    })?;
    if review.types.api_version != review::API_VERSION || review.types.kind != review::KIND {
        return Err(format!(
            "expected apiVersion {} and kind {}, got {:?} and {:?}",
            review::API_VERSION,
            review::KIND,
            review.types.api_version,
            review.types.kind
        )
        .into());
    }
    let request: AdmissionRequest<K> = review
        .try_into()
        .map_err(|_| "the review has no request".to_owned())?;
    let needs_object = matches!(request.operation, Operation::Create | Operation::Update);
    if needs_object && request.object.is_none() {
        return Err(format!(
            "request.object is missing for {}",
            review::operation_str(&request.operation)
        )
        .into());
    }
    let needs_old = matches!(request.operation, Operation::Update | Operation::Delete);
    if needs_old && request.old_object.is_none() {
        return Err(format!(
            "request.oldObject is missing for {}",
            review::operation_str(&request.operation)
        )
        .into());
    }
    Ok(request)
}

/// Tells a body that is no AdmissionReview from one whose object does not fit its type.
fn undecodable(body: &[u8], error: serde_path_to_error::Error<serde_json::Error>) -> Undecodable {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let field = ["request.object.", "request.oldObject."]
        .into_iter()
        .find_map(|prefix| path.strip_prefix(prefix));
    let request = serde_json::from_slice::<AdmissionReview<kube::core::DynamicObject>>(body)
        .ok()
        .and_then(|review| {
            let request: Result<AdmissionRequest<kube::core::DynamicObject>, _> = review.try_into();
            request.ok()
        });
    match (field, request) {
        (Some(field), Some(request)) => {
            let why = inner.to_string();
            // serde_json places the error in the review's text, which the user never saw.
            let why = match why.rfind(" at line ") {
                Some(at) => why[..at].to_owned(),
                None => why,
            };
            Undecodable::Object {
                request: Box::new(request),
                field: field.to_owned(),
                why,
            }
        }
        _ => Undecodable::Review(inner.to_string()),
    }
}

/// HTTP 400 with the error as plain text.
fn bad_request(error: Error) -> Response {
    tracing::debug!(error = %error, "bad AdmissionReview");
    (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response()
}
