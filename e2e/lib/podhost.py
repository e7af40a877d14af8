#!/usr/bin/env python3
"""A node of the local control plane whose pods really run: what a kubelet does, for the pods of
e2e/up's Deployment layout (docs/local-control-plane.md, "The Deployment layout").

  podhost.py run --node NAME --server URL --ca FILE --cert FILE --key FILE --dir DIR
             --gateway IP --pod-ips PREFIX [--storage-driver vfs]
      registers Node NAME (tainted, so only pods that tolerate it land here), renews its Lease,
      and for each pod bound to it: a network namespace holding the pod's IP (a veth pair, the
      host side routed, the gateway IP answered by the host), the pod's volumes written under
      DIR as the kubelet's atomic writer does and written again when their sources change
      (Secrets, ConfigMaps, projected service-account tokens from the TokenRequest API,
      downward API files), its first container run by `buildah run` from a working container of
      its image (the image's entrypoint unless the container names a command, the container's
      args, env with fieldRefs and the Service variables filled in, the user of its
      securityContext, capabilities dropped and no_new_privs set as it asks), its readiness
      and liveness probes (httpGet) run from the host, and the pod's status written back (IP,
      phase, conditions, container state, restarts). A container that exits is started again
      after a back-off of 10 s, doubled at each exit up to 5 minutes (the kubelet's, but for
      the first exit, which the kubelet starts again at once). A pod being deleted has its
      container's preStop sleep run (the only preStop action it knows), then its container
      stopped (TERM, KILL after what is left of its grace period), and is then deleted for good. TERM
      stops every container and takes the network namespaces down.
  podhost.py stop NAMESPACE NAME --dir DIR
      stops the pod's container as `crictl stop` would (TERM, then KILL after 30 s); the
      running `podhost.py run` sees it exit and starts it again after its back-off.

Everything a pod writes on this host is under DIR/pods/; network namespaces are named
gp-pod-<uid prefix> and host-side veths gpv<uid prefix>, so e2e/down can remove what a killed
podhost left.
"""
import argparse
import base64
import datetime
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

# The kubelet's back-off for a container that exits: 10 s, doubled up to 5 minutes.
BACKOFF_FIRST, BACKOFF_MAX = 10.0, 300.0
LEASE_SECONDS = 40
# How often a pod's Secret, ConfigMap and projected volumes are compared with their sources and
# written again when they changed: every 10 s (the kubelet: its sync period and its cache's TTL,
# about a minute).
RESYNC_SECONDS = 10
# Probes go straight to the pod, whatever proxy the environment names.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TAINT = {"key": "gangplank.dev/e2e-pod-host", "value": "true", "effect": "NoSchedule"}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log(*parts):
    print(time.strftime("%H:%M:%S"), "[podhost] INFO", *parts, file=sys.stderr, flush=True)


def warn(*parts):
    """What went wrong, marked WARN so that the e2e suite's failure report shows it."""
    print(time.strftime("%H:%M:%S"), "[podhost] WARN", *parts, file=sys.stderr, flush=True)


def sh(*cmd, check=True, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip()}")
    return result


class Api:
    def __init__(self, server, ca, cert, key):
        self.server = server.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        # Straight to the API server, whatever proxy the environment names.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                  urllib.request.HTTPSHandler(context=self.ctx))

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self.opener.open(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:300]!r}") from None

    def get(self, path):
        return self.call("GET", path)

    def merge(self, path, body):
        return self.call("PATCH", path, body, "application/merge-patch+json")


def ns_path(ns, name):
    return f"/api/v1/namespaces/{ns}/pods/{name}"


class Container:
    """One run of a pod's container: `ip netns exec NETNS buildah run ...`."""

    def __init__(self, proc, working, started):
        self.proc, self.working, self.started = proc, working, started


class PodWorker(threading.Thread):
    def __init__(self, host, pod, ip):
        super().__init__(daemon=True)
        self.host, self.api = host, host.api
        meta = pod["metadata"]
        self.ns, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.pod, self.ip = pod, ip
        short = self.uid.replace("-", "")[:8]
        self.netns, self.veth = f"gp-pod-{short}", f"gpv{short}"
        self.dir = os.path.join(host.dir, "pods", f"{self.ns}_{self.name}")
        self.spec = pod["spec"]["containers"][0]
        self.container = None
        self.restarts, self.backoff, self.restart_at = 0, 0.0, 0.0
        self.last_state = None
        self.transitions = {}  # condition type -> (status, lastTransitionTime)
        self.ready = False
        self.ready_failures = self.live_failures = 0
        self.next_probe = self.next_live = 0.0
        self.tokens = {}  # (volume, path) -> (token, refresh at)
        self.volumes = {}  # volume name -> the files last written
        self.volumes_at = 0.0
        self.waiting = None
        self.deleting = False
        self.gone = threading.Event()
        self.started_at = now()

    # --- the pod's sandbox
    def network_up(self):
        gw = self.host.gateway
        sh("ip", "netns", "add", self.netns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        in_ns = ("ip", "-n", self.netns)
        sh(*in_ns, "link", "set", "lo", "up")
        sh(*in_ns, "addr", "add", f"{self.ip}/32", "dev", "eth0")
        sh(*in_ns, "link", "set", "eth0", "up")
        sh(*in_ns, "route", "add", gw, "dev", "eth0", "scope", "link")
        sh(*in_ns, "route", "add", "default", "via", gw, "dev", "eth0")
        sh("ip", "link", "set", self.veth, "up")
        sh("ip", "route", "add", f"{self.ip}/32", "dev", self.veth, "src", gw)

    def network_down(self):
        sh("ip", "link", "del", self.veth, check=False)
        sh("ip", "netns", "del", self.netns, check=False)

    def write_volume(self, vol):
        """Writes a volume's files as the kubelet's atomic writer does: a timestamped directory
        behind the link `..data`, swapped at once, and a link per file through it; written
        again only when its content changed."""
        target = os.path.join(self.dir, "volumes", vol["name"])
        os.makedirs(target, exist_ok=True)
        if "emptyDir" in vol:
            os.chmod(target, 0o777)
            return
        files = self.volume_files(vol)
        if files == self.volumes.get(vol["name"]):
            return
        stamp = "..%s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y_%m_%d_%H_%M_%S.%f")
        for path, data in files.items():
            full = os.path.join(target, stamp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
            os.chmod(full, 0o644)
        old = os.readlink(os.path.join(target, "..data")) if os.path.islink(os.path.join(target, "..data")) else None
        os.symlink(stamp, os.path.join(target, "..data_tmp"))
        os.replace(os.path.join(target, "..data_tmp"), os.path.join(target, "..data"))
        for top in {path.split("/")[0] for path in files}:
            link = os.path.join(target, top)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", top), link)
        for gone in set(self.volumes.get(vol["name"], {})) - set(files):
            top = gone.split("/")[0]
            if all(p.split("/")[0] != top for p in files) and os.path.islink(os.path.join(target, top)):
                os.remove(os.path.join(target, top))
        if old:
            shutil.rmtree(os.path.join(target, old), ignore_errors=True)
        self.volumes[vol["name"]] = files

    def volume_files(self, vol):
        """The files of a Secret, ConfigMap or projected volume, as {path: bytes}."""
        if "secret" in vol:
            s = self.api.get(f"/api/v1/namespaces/{self.ns}/secrets/{vol['secret']['secretName']}")
            if s is None:
                raise RuntimeError(f"secret {vol['secret']['secretName']} not found")
            return {key: base64.b64decode(value) for key, value in (s.get("data") or {}).items()}
        if "configMap" in vol:
            return self.config_map_files(vol["configMap"])
        if "projected" in vol:
            files = {}
            for source in vol["projected"]["sources"]:
                if "serviceAccountToken" in source:
                    files[source["serviceAccountToken"]["path"]] = self.token(vol["name"], source["serviceAccountToken"])
                elif "configMap" in source:
                    files.update(self.config_map_files(source["configMap"]))
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"]["items"]:
                        files[item["path"]] = self.field(item["fieldRef"]["fieldPath"]).encode()
                else:
                    raise RuntimeError(f"projected source {list(source)} is not supported")
            return files
        raise RuntimeError(f"volume {vol['name']}: {list(vol)} is not supported")

    def config_map_files(self, ref):
        cm = self.api.get(f"/api/v1/namespaces/{self.ns}/configmaps/{ref['name']}")
        if cm is None:
            raise RuntimeError(f"configmap {ref['name']} not found")
        items = ref.get("items") or [{"key": k, "path": k} for k in cm.get("data") or {}]
        return {item["path"]: cm["data"][item["key"]].encode() for item in items}

    def token(self, volume, source):
        """The service account's token for a projected volume: a new one from the TokenRequest
        API, bound to the pod, once 80% of the last one's lifetime has passed (as the kubelet)."""
        key = (volume, source["path"])
        token, refresh_at = self.tokens.get(key, (None, 0.0))
        if token is not None and time.time() < refresh_at:
            return token
        seconds = source.get("expirationSeconds", 3600)
        body = {"spec": {"expirationSeconds": seconds,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": self.name, "uid": self.uid}}}
        if source.get("audience"):
            body["spec"]["audiences"] = [source["audience"]]
        account = self.pod["spec"].get("serviceAccountName", "default")
        answer = self.api.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{account}/token", body)
        token = answer["status"]["token"].encode()
        self.tokens[key] = (token, time.time() + 0.8 * seconds)
        return token

    def field(self, path):
        values = {"metadata.name": self.name, "metadata.namespace": self.ns, "metadata.uid": self.uid,
                  "spec.nodeName": self.host.node, "spec.serviceAccountName": self.pod["spec"].get("serviceAccountName", "default"),
                  "status.podIP": self.ip, "status.hostIP": self.host.gateway}
        if path not in values:
            raise RuntimeError(f"fieldRef {path} is not supported")
        return values[path]

    def environment(self):
        env = {}
        # Service links, as the kubelet writes them (enableServiceLinks defaults to true): the
        # host and ports of each Service of the pod's namespace and of `kubernetes`.
        services = self.api.get(f"/api/v1/namespaces/{self.ns}/services")["items"]
        if self.pod["spec"].get("enableServiceLinks", True) is False:
            services = []
        services.append(self.api.get("/api/v1/namespaces/default/services/kubernetes"))
        for svc in services:
            ip = svc["spec"].get("clusterIP")
            if not ip or ip == "None":
                continue
            prefix = svc["metadata"]["name"].upper().replace("-", "_")
            ports = svc["spec"]["ports"]
            env[f"{prefix}_SERVICE_HOST"] = ip
            env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
            for p in ports:
                if p.get("name"):
                    env[f"{prefix}_SERVICE_PORT_{p['name'].upper().replace('-', '_')}"] = str(p["port"])
        for e in self.spec.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = self.field(e["valueFrom"]["fieldRef"]["fieldPath"])
            else:
                raise RuntimeError(f"env {e['name']}: only value and fieldRef are supported")
        return env

    # --- the container
    def start_container(self):
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            p = self.spec.get(probe)
            if p and (probe == "startupProbe" or "httpGet" not in p):
                raise RuntimeError(f"{probe}: only httpGet readiness and liveness probes are supported")
        if len(self.pod["spec"]["containers"]) > 1 or self.pod["spec"].get("initContainers"):
            raise RuntimeError("only pods of one container (and no init containers) are supported")
        image = self.spec["image"]
        working = sh("buildah", *self.host.storage, "from", "--pull=never", "--quiet", image).stdout.strip()
        try:
            # As the kubelet: the container's command replaces the image's entrypoint, its args
            # the image's cmd (and a command alone drops the cmd).
            config = self.image_config()
            command = self.spec.get("command") or config.get("Entrypoint") or []
            args = self.spec.get("args")
            if args is None:
                args = [] if self.spec.get("command") else config.get("Cmd") or []
            pod_sc = self.pod["spec"].get("securityContext") or {}
            sc = self.spec.get("securityContext") or {}
            run = ["ip", "netns", "exec", self.netns]
            # allowPrivilegeEscalation: false is the no_new_privs bit, which buildah and the
            # container's process inherit.
            if sc.get("allowPrivilegeEscalation") is False:
                run += ["setpriv", "--no-new-privs"]
            run += ["buildah", *self.host.storage, "run", "--isolation", "chroot"]
            user = sc.get("runAsUser", pod_sc.get("runAsUser"))
            group = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
            if user is not None:
                run += ["--user", f"{user}:{group}" if group is not None else str(user)]
            for cap in (sc.get("capabilities") or {}).get("drop", []):
                run += ["--cap-drop", cap.lower() if cap == "ALL" else cap]
            volumes = {v["name"]: v for v in self.pod["spec"].get("volumes", [])}
            for m in self.spec.get("volumeMounts", []):
                host_dir = os.path.join(self.dir, "volumes", m["name"])
                run += ["-v", f"{host_dir}:{m['mountPath']}:{'ro' if m.get('readOnly') else 'rw'}"]
                if m["name"] not in volumes:
                    raise RuntimeError(f"volumeMount {m['name']} names no volume")
            for k, v in self.environment().items():
                run += ["-e", f"{k}={v}"]
            run += [working, "--", *command, *args]
            log_file = open(os.path.join(self.dir, "container.log"), "ab")
            proc = subprocess.Popen(run, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            log_file.close()
        except Exception:
            sh("buildah", *self.host.storage, "rm", working, check=False)
            raise
        self.container = Container(proc, working, now())
        self.ready = False
        self.ready_failures = self.live_failures = 0
        self.next_probe = time.time() + self.probe_setting("readinessProbe", "initialDelaySeconds", 0)
        self.next_live = time.time() + self.probe_setting("livenessProbe", "initialDelaySeconds", 0)
        log(f"{self.ns}/{self.name}: container started ({' '.join(command + args)}) at {self.ip}")

    def image_config(self):
        out = sh("buildah", *self.host.storage, "inspect", "--type", "image", self.spec["image"]).stdout
        return json.loads(out)["OCIv1"]["config"]

    def process_name(self):
        """The container's process as /proc/PID/comm names it: its command's file name."""
        command = self.spec.get("command") or self.image_config().get("Entrypoint") or []
        return os.path.basename(command[0])[:15]

    def container_pid(self):
        """The container's process in the pod's network namespace (not buildah's)."""
        name = self.process_name()
        for pid in sh("ip", "netns", "pids", self.netns, check=False).stdout.split():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        return int(pid)
            except OSError:
                continue
        return None

    def pre_stop(self, grace):
        """The container's preStop sleep, as the kubelet runs it before TERM, within the grace
        period; its probes and status go on meanwhile, and a container that exits ends it (it is
        not started again). Returns the seconds it took."""
        lifecycle = self.pod["spec"]["containers"][0].get("lifecycle") or {}
        seconds = min(((lifecycle.get("preStop") or {}).get("sleep") or {}).get("seconds", 0), grace)
        if self.container is None or seconds <= 0:
            return 0
        log(f"{self.ns}/{self.name}: preStop sleep of {seconds} s before TERM")
        started = time.time()
        while time.time() < started + seconds and self.container.proc.poll() is None:
            self.run_probes()
            try:
                self.report()
            except (RuntimeError, OSError) as e:
                warn(f"{self.ns}/{self.name}: {e}; trying again")
            time.sleep(min(0.5, max(started + seconds - time.time(), 0)))
        return time.time() - started

    def stop_container(self, grace):
        c = self.container
        if c is None:
            return
        pid = self.container_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
        try:
            c.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pid = self.container_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)
            try:
                c.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait()
        self.container_exited()

    def container_exited(self):
        c = self.container
        self.container = None
        code = c.proc.returncode
        sh("buildah", *self.host.storage, "rm", c.working, check=False)
        self.last_state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                          "startedAt": c.started, "finishedAt": now()}}
        self.ready = False
        self.backoff = BACKOFF_FIRST if self.backoff == 0 else min(self.backoff * 2, BACKOFF_MAX)
        self.restart_at = time.time() + self.backoff
        if self.deleting or self.host.stopping.is_set():
            log(f"{self.ns}/{self.name}: container stopped, exit status {code}")
        else:
            warn(f"{self.ns}/{self.name}: container exited with {code}; starting it again in {self.backoff:.0f} s")

    # --- probes, from the host as the kubelet runs them
    def probe_setting(self, probe, key, default):
        return (self.spec.get(probe) or {}).get(key, default)

    def probe(self, probe):
        p = self.spec.get(probe)
        if not p:
            return True
        get = p["httpGet"]
        port = get["port"]
        if isinstance(port, str):
            port = next(cp["containerPort"] for cp in self.spec.get("ports", []) if cp.get("name") == port)
        url = f"{get.get('scheme', 'HTTP').lower()}://{self.ip}:{port}{get.get('path', '/')}"
        try:
            with DIRECT.open(url, timeout=p.get("timeoutSeconds", 1)) as resp:
                return 200 <= resp.status < 400
        except (urllib.error.URLError, OSError) as e:
            warn(f"{self.ns}/{self.name}: {probe} failed: GET {url}: {e}")
            return False

    def run_probes(self):
        if self.container is not None and time.time() >= self.next_probe:
            self.next_probe = time.time() + self.probe_setting("readinessProbe", "periodSeconds", 10)
            if self.probe("readinessProbe"):
                self.ready_failures = 0
                self.ready = True
            else:
                self.ready_failures += 1
                if self.ready_failures >= self.probe_setting("readinessProbe", "failureThreshold", 3):
                    self.ready = False
        if self.container is None or time.time() < self.next_live:
            return
        self.next_live = time.time() + self.probe_setting("livenessProbe", "periodSeconds", 10)
        if self.probe("livenessProbe"):
            self.live_failures = 0
        else:
            self.live_failures += 1
            if self.live_failures >= self.probe_setting("livenessProbe", "failureThreshold", 3):
                warn(f"{self.ns}/{self.name}: liveness probe failed {self.live_failures} times; restarting")
                self.stop_container(self.pod["spec"].get("terminationGracePeriodSeconds", 30))

    # --- status
    def status(self):
        ready = self.container is not None and self.ready
        cond = lambda t, ok: {"type": t, "status": "True" if ok else "False", "lastProbeTime": None}
        state = ({"running": {"startedAt": self.container.started}} if self.container
                 else {"waiting": self.waiting or {"reason": "CrashLoopBackOff",
                                                   "message": f"back-off {self.backoff:.0f}s restarting failed container"}})
        container = {"name": self.spec["name"], "image": self.spec["image"], "imageID": self.spec["image"],
                     "ready": ready, "started": self.container is not None, "restartCount": self.restarts,
                     "state": state}
        if self.last_state:
            container["lastState"] = self.last_state
        return {"status": {
            "phase": "Running" if self.container or self.restarts else "Pending",
            "hostIP": self.host.gateway, "hostIPs": [{"ip": self.host.gateway}],
            "podIP": self.ip, "podIPs": [{"ip": self.ip}], "startTime": self.started_at,
            "conditions": [cond("PodReadyToStartContainers", True), cond("Initialized", True),
                           cond("ContainersReady", ready), cond("Ready", ready), cond("PodScheduled", True)],
            "containerStatuses": [container]}}

    def report(self):
        body = self.status()
        key = json.dumps([body["status"][k] for k in ("phase", "conditions", "containerStatuses")], sort_keys=True)
        if key != getattr(self, "_reported", None):
            # A condition's transition time is when its status last changed.
            for c in body["status"]["conditions"]:
                status, at = self.transitions.get(c["type"], (None, None))
                if status != c["status"]:
                    status, at = c["status"], now()
                    self.transitions[c["type"]] = (status, at)
                c["lastTransitionTime"] = at
            if self.api.merge(ns_path(self.ns, self.name) + "/status", body) is not None:
                self._reported = key

    # --- the worker's loop
    def run(self):
        try:
            os.makedirs(self.dir, exist_ok=True)
            with open(os.path.join(self.dir, "netns"), "w") as f:
                f.write(self.netns)
            with open(os.path.join(self.dir, "process"), "w") as f:
                f.write(self.process_name())
            self.network_up()
            for vol in self.pod["spec"].get("volumes", []):
                self.write_volume(vol)
            self.volumes_at = time.time()
            self.report()
            while not self.deleting and not self.host.stopping.is_set():
                self.tick()
                time.sleep(0.5)
            grace = self.pod["metadata"].get("deletionGracePeriodSeconds", 30)
            if self.deleting:
                grace -= self.pre_stop(grace)
            self.stop_container(max(grace, 0) if self.deleting else 5)
            if self.deleting:
                self.api.call("DELETE", ns_path(self.ns, self.name),
                              {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}})
                log(f"{self.ns}/{self.name}: stopped and deleted")
        except Exception as e:  # noqa: BLE001 -- a pod that cannot run says why on the pod
            warn(f"{self.ns}/{self.name}: {e}")
            self.waiting = {"reason": "CreateContainerError", "message": str(e)[:500]}
            try:
                self.report()
            except Exception:  # noqa: BLE001
                pass
            while not self.deleting and not self.host.stopping.is_set():
                time.sleep(0.5)
            if self.container:
                self.stop_container(5)
            if self.deleting:
                self.api.call("DELETE", ns_path(self.ns, self.name),
                              {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}})
        finally:
            self.network_down()
            self.gone.set()

    def tick(self):
        if self.container is not None and self.container.proc.poll() is not None:
            self.container_exited()
        if self.container is None and time.time() >= self.restart_at:
            if self.last_state is not None:
                self.restarts += 1
            self.start_container()
        self.run_probes()
        # The API server may be slow or restarting: a failed token renewal
        # or status write is tried again at the next tick.
        try:
            # As the kubelet's sync: the volumes written again when their sources changed (or
            # a token is due), checked every RESYNC_SECONDS.
            if time.time() - self.volumes_at >= RESYNC_SECONDS:
                self.volumes_at = time.time()
                for vol in self.pod["spec"].get("volumes", []):
                    self.write_volume(vol)
            self.report()
        except (RuntimeError, OSError) as e:
            warn(f"{self.ns}/{self.name}: {e}; trying again")


class Host:
    def __init__(self, args):
        self.api = Api(args.server, args.ca, args.cert, args.key)
        self.node, self.dir, self.gateway = args.node, args.dir, args.gateway
        self.prefix = args.pod_ips
        self.storage = ["--storage-driver", args.storage_driver]
        self.workers = {}
        self.next_ip = 2
        self.stopping = threading.Event()

    def register(self):
        resources = {"cpu": "4", "memory": "8Gi", "pods": "20"}
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node, "labels": {
                    "kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                    "gangplank.dev/e2e-pod-host": "true"}},
                "spec": {"taints": [TAINT]}}
        if self.api.get(f"/api/v1/nodes/{self.node}") is None:
            self.api.call("POST", "/api/v1/nodes", node)
        self.api.merge(f"/api/v1/nodes/{self.node}/status", {"status": {
            "capacity": resources, "allocatable": resources,
            "addresses": [{"type": "InternalIP", "address": self.gateway}, {"type": "Hostname", "address": self.node}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "podhost",
                         "kubeProxyVersion": "", "containerRuntimeVersion": "buildah"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "PodhostReady",
                            "message": "the e2e pod host runs pods with buildah",
                            "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}})

    def renew(self):
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node}"
        spec = {"holderIdentity": self.node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_now()}
        if self.api.get(path) is None:
            self.api.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                          {"metadata": {"name": self.node}, "spec": spec})
        else:
            self.api.merge(path, {"spec": spec})

    def run(self):
        self.register()
        renewed = status_at = 0.0
        while not self.stopping.is_set():
            try:
                if time.time() - renewed >= 10:
                    self.renew()
                    renewed = time.time()
                if time.time() - status_at >= 60:
                    self.register()
                    status_at = time.time()
                pods = self.api.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.node}")["items"]
                seen = set()
                for pod in pods:
                    uid = pod["metadata"]["uid"]
                    seen.add(uid)
                    worker = self.workers.get(uid)
                    if worker is None and pod["metadata"].get("deletionTimestamp"):
                        # Deleted before anything ran for it here: nothing to stop.
                        self.api.call("DELETE", ns_path(pod["metadata"]["namespace"], pod["metadata"]["name"]),
                                      {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
                    elif worker is None:
                        worker = PodWorker(self, pod, f"{self.prefix}.{self.next_ip}")
                        self.next_ip += 1
                        self.workers[uid] = worker
                        worker.start()
                    elif worker is not None and pod["metadata"].get("deletionTimestamp"):
                        worker.pod = pod
                        worker.deleting = True
                for uid, worker in list(self.workers.items()):
                    if uid not in seen:  # deleted at once (grace 0): stop what still runs
                        worker.deleting = True
                    if worker.gone.is_set():
                        del self.workers[uid]
            except Exception as e:  # noqa: BLE001 -- the API server may be restarting
                warn(f"sync: {e}")
            self.stopping.wait(0.5)
        for worker in list(self.workers.values()):
            worker.gone.wait(60)


def stop(args):
    directory = os.path.join(args.dir, "pods", f"{args.namespace}_{args.name}")
    try:
        with open(os.path.join(directory, "netns")) as f:
            netns = f.read().strip()
        with open(os.path.join(directory, "process")) as f:
            process = f.read().strip()
    except OSError:
        sys.exit(f"podhost: no pod {args.namespace}/{args.name} runs on this host")
    # The container's process (by its command's name), not buildah's, in the pod's network namespace.
    targets = []
    for pid in sh("ip", "netns", "pids", netns).stdout.split():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == process:
                    targets.append(int(pid))
        except OSError:
            continue
    if not targets:
        sys.exit(f"podhost: no container process runs for {args.namespace}/{args.name}")
    for pid in targets:
        os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in targets):
        time.sleep(0.1)
    for pid in targets:
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGKILL)
    print(f"stopped {args.namespace}/{args.name} (pid {' '.join(map(str, targets))})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    for flag in ("--node", "--server", "--ca", "--cert", "--key", "--dir", "--gateway", "--pod-ips"):
        run.add_argument(flag, required=True)
    run.add_argument("--storage-driver", default="vfs")
    s = sub.add_parser("stop")
    s.add_argument("namespace")
    s.add_argument("name")
    s.add_argument("--dir", required=True)
    args = parser.parse_args()
    if args.command == "stop":
        stop(args)
        return
    host = Host(args)
    signal.signal(signal.SIGTERM, lambda *_: host.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: host.stopping.set())
    host.run()


if __name__ == "__main__":
    main()
