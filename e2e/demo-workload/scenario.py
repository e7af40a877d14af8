#!/usr/bin/env python3
"""The demo's workload, one wave at a time, as YAML for `kubectl apply -f -`:

  setup   three queues (research weight 3; production weight 2 with a guarantee of 32 GPUs;
          analytics weight 1), their namespaces, a PriorityClass for urgent jobs, and a plain
          web Deployment Gangplank never sees
  start   research fills the idle cluster (two 32-GPU pretraining gangs, a 16-GPU fine-tune,
          an elastic search of 8 to 12 GPUs), production runs an ETL gang of 64 CPU pods and
          an 8-GPU job (within its guarantee, whose unused part research may not take): 4 GPUs
          stay free for research
  line    research's second 16-GPU fine-tune does not fit: it heads the line and holds a
          reservation of the 4 free GPUs, lacking 12 that run jobs expected to end in a minute
  sweeps  two short research sweeps of 4 GPUs: the 20-second one finishes before the fine-tune
          could start, so it backfills the reservation; the other then waits behind it
  big     production's 48-GPU training job: within its share but more than is free, so
          research's borrowed room is reclaimed while the big job holds a reservation (nothing
          backfills a reservation whose room reclaim is freeing)
  late    analytics arrives late and reclaims its share; production submits a batch Job
          (batch.gangplank.dev: a PyTorch master and three workers, the pytorch plugin) and an
          inference service of sub-groups (4 prefill instances of 2 GPUs, 2 decode instances of
          4), which starts at its minimum (2 prefill, 1 decode) and grows a whole instance at a
          time as training jobs finish
  urgent  a research job of higher priority preempts research's own lower-priority gangs

Each job is an Indexed batch/v1 Job whose pods finish after `runs` (kwok's completion stage), in a
PodGroup written out with that runtime as `expectedRuntimeSeconds` (so Gangplank can tell when
a reservation's room frees, and which short jobs finish before it does). Nodes: 16 of 8 GPUs
and 32 CPUs (e2e/demo starts them).
"""
import json
import sys

GPU = "nvidia.com/gpu"


def doc(obj):
    return json.dumps(obj)


def job(ns, name, queue, pods, runs, gpu=1, cpu=2, min_member=None, priority=None):
    """A Job of `pods` pods of `gpu` GPUs (none: a CPU job) that run `runs` seconds, in a
    PodGroup of its own: elastic when `min_member` is below `pods`."""
    spec = {"minMember": min_member or pods, "queue": queue, "expectedRuntimeSeconds": runs}
    if min_member is not None:
        spec["maxMember"] = pods
    out = [{"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}]
    # The queue and group on the pods only: a Job labelled with a queue would get a PodGroup
    # made from it, and this one is written out.
    template_labels = {"scheduling.gangplank.dev/queue": queue,
                       "scheduling.gangplank.dev/pod-group": name}
    resources = {"requests": {"cpu": str(cpu), "memory": "8Gi" if gpu else "2Gi"}}
    if gpu:
        resources["requests"][GPU] = str(gpu)
        resources["limits"] = {GPU: str(gpu)}
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": f"{name}:demo", "resources": resources}],
    }
    if priority:
        pod_spec["priorityClassName"] = priority
    out.append({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            # Indexed, with a backoff per index: the Job controller makes an evicted pod
            # (reclaim, preemption) again within seconds. With one backoff for the whole Job,
            # each failed pod doubles the delay (up to 10 minutes), and a gang evicted whole
            # would be back only after the demo.
            "parallelism": pods, "completions": pods, "completionMode": "Indexed",
            "backoffLimitPerIndex": 3,
            # An evicted pod does not count as a failure.
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                                            "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {
                "metadata": {"labels": template_labels,
                             "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{runs}s"}},
                "spec": pod_spec,
            },
        },
    })
    return out


def batch_job(ns, name, queue, workers, runs, gpu=1, cpu=2):
    """A batch.gangplank.dev Job of a PyTorch master and `workers` workers of `gpu` GPUs that
    run `runs` seconds; its pytorch plugin gives each pod its RANK, WORLD_SIZE and the
    master's address."""
    def task(name, replicas):
        return {"name": name, "replicas": replicas, "template": {
            "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{runs}s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "trainer:demo", "resources": {
                    "requests": {"cpu": str(cpu), "memory": "8Gi", GPU: str(gpu)},
                    "limits": {GPU: str(gpu)}}}]}}}
    return [{"apiVersion": "batch.gangplank.dev/v1alpha1", "kind": "Job",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"queue": queue, "runningEstimate": f"{runs}s",
                      "plugins": {"pytorch": ["--port=29500"]},
                      "policies": [{"event": "PodFailed", "action": "RestartJob"}],
                      "tasks": [task("master", 1), task("worker", workers)]}}]


def service(ns, name, queue, roles):
    """An inference service: one PodGroup of sub-groups, one per role of `roles` (name, instances,
    pods an instance, whole instances it needs), each instance an Indexed Job of 1-GPU pods
    labelled with its role; a pod's Job name tells its instance. It serves (runs) for ten
    minutes."""
    policy = [{"name": role, "subGroupSize": pods, "minSubGroups": need,
               "labelSelector": {"matchLabels": {"demo/role": role}},
               "matchLabelKeys": ["batch.kubernetes.io/job-name"]}
              for role, _, pods, need in roles]
    out = [{"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": sum(pods * need for _, _, pods, need in roles),
                     "queue": queue, "subGroupPolicy": policy}}]
    for role, instances, pods, _ in roles:
        for i in range(instances):
            out.append({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": f"{name}-{role}-{i}", "namespace": ns},
                "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                         "backoffLimitPerIndex": 3,
                         "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions":
                                                         [{"type": "DisruptionTarget"}]}]},
                         "template": {
                             "metadata": {"labels": {"scheduling.gangplank.dev/queue": queue,
                                                     "scheduling.gangplank.dev/pod-group": name,
                                                     "demo/role": role},
                                          "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}},
                             "spec": {"restartPolicy": "Never", "containers": [{
                                 "name": "main", "image": f"{name}-{role}:demo", "resources": {
                                     "requests": {"cpu": "2", "memory": "8Gi", GPU: "1"},
                                     "limits": {GPU: "1"}}}]}}}})
    return out


def queue(name, weight, guarantee=None):
    spec = {"weight": weight}
    if guarantee:
        spec["guarantee"] = {GPU: str(guarantee)}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": name, "labels": {"scheduling.gangplank.dev/queue": name}}},
        {"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
         "metadata": {"name": name}, "spec": spec},
    ]


WAVES = {
    "setup": lambda: [
        *queue("research", 3),
        *queue("production", 2, guarantee=32),
        *queue("analytics", 1),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "demo-urgent"}, "value": 1000,
         "description": "Urgent jobs of the demo: they preempt their own queue's other jobs."},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": "web"},
         "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "web", "image": "nginx",
                                        "resources": {"requests": {"cpu": "1"}}}]}}}},
    ],
    "start": lambda: [
        *job("research", "pretrain-a", "research", 32, 200),
        *job("research", "pretrain-b", "research", 32, 170),
        *job("research", "finetune-1", "research", 16, 60),
        *job("research", "hpo", "research", 12, 150, min_member=8),
        *job("production", "etl", "production", 64, 70, gpu=0, cpu=1),
        *job("production", "serve-batch", "production", 8, 130),
    ],
    "line": lambda: [
        *job("research", "finetune-2", "research", 16, 110),
    ],
    "sweeps": lambda: [
        *job("research", "sweep-1", "research", 4, 20),
        *job("research", "sweep-2", "research", 4, 50),
    ],
    "big": lambda: [
        *job("production", "train-xl", "production", 48, 90),
        *job("research", "sweep-3", "research", 4, 20),
        *job("research", "sweep-4", "research", 4, 20),
    ],
    "late": lambda: [
        *job("analytics", "report-1", "analytics", 8, 60),
        *job("analytics", "report-2", "analytics", 8, 80),
        *job("analytics", "report-3", "analytics", 4, 40),
        *batch_job("production", "llm-tune", "production", 3, 60),
        # 4 prefill instances of 2 pods and 2 decode instances of 4; it starts at 2 and 1.
        *service("production", "chat", "production", [("prefill", 4, 2, 2), ("decode", 2, 4, 1)]),
    ],
    "urgent": lambda: [
        *job("research", "hotfix", "research", 16, 40, priority="demo-urgent"),
    ],
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in WAVES:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(WAVES)}")
    print("\n---\n".join(doc(d) for d in WAVES[sys.argv[1]]()))
