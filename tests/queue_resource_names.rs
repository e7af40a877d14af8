//! The Queue webhook once the resource-name table is full: a Queue naming many new resources
//! gets an answer, never a panic. In a process of its own, since filling the table is seen by
//! everything else in the process.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use gangplank::webhooks::{self, Settings, StaticLookup, Webhooks};
use gangplank_core::model::resources::MAX_NAMES;
use gangplank_core::model::{ResourceId, Resources};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

#[tokio::test]
async fn a_queue_guaranteeing_many_new_resources_after_the_table_is_full_is_answered() {
    for i in 0..MAX_NAMES {
        ResourceId::of(&format!("filler.example/r-{i}"));
    }
    assert_eq!(ResourceId::of("new.example/x"), ResourceId::OTHER);

    let lookup = StaticLookup {
        capacity: Resources::from([("cpu", 8_000)]),
        ..StaticLookup::default()
    };
    let settings = Settings {
        gate_pods: true,
        place_arrivals: false,
        lookup_grace: Duration::ZERO,
        schedulers: gangplank_core::model::Schedulers::only(["default-scheduler".to_owned()]),
        limits: Default::default(),
    };
    let router = webhooks::router(Arc::new(Webhooks::new(Arc::new(lookup), settings)));
    let guarantee: serde_json::Map<String, Value> = (0..50)
        .map(|i| (format!("new.example/r-{i}"), json!("1")))
        .collect();
    let review = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "scheduling.gangplank.dev", "version": "v1alpha1", "kind": "Queue"},
            "resource": {"group": "scheduling.gangplank.dev", "version": "v1alpha1", "resource": "queues"},
            "name": "many",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": {
                "kind": "Queue", "apiVersion": "scheduling.gangplank.dev/v1alpha1",
                "metadata": {"name": "many"}, "spec": {"guarantee": guarantee}
            },
            "oldObject": null
        }
    });
    let request = Request::post("/webhooks/validate/queues")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(review.to_string()))
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.guarantee[new.example/r-0]: must not exceed what the cluster's schedulable nodes hold (0), got 1"),
        "{message}"
    );
}
