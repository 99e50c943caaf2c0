#!/usr/bin/env python3
"""Checks packaging/deploy's YAML where the real tools (kubectl, docker compose, envoy)
do not install from Debian 12 or npm: each file parses, and the keys the deployment
depends on are there with the right values. Prints what is wrong, exits 1 if anything."""
import sys
import yaml

root = sys.argv[1] if len(sys.argv) > 1 else "."
errors = []


def need(cond, what):
    if not cond:
        errors.append(what)


def load_all(rel):
    try:
        with open(f"{root}/{rel}") as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        errors.append(f"{rel}: {e}")
        return []


def dig(d, *keys):
    for k in keys:
        if isinstance(d, list) and isinstance(k, int) and k < len(d):
            d = d[k]
        elif isinstance(d, dict) and k in d:
            d = d[k]
        else:
            return None
    return d


k8s = {d.get("kind"): d for d in load_all("packaging/deploy/kubernetes/splash.yaml")}
need(set(k8s) >= {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"},
     f"kubernetes/splash.yaml: kinds {sorted(k for k in k8s if k)}")
for kind, api in [("Deployment", "apps/v1"), ("Service", "v1"), ("PodDisruptionBudget", "policy/v1"),
                  ("HorizontalPodAutoscaler", "autoscaling/v2")]:
    need(dig(k8s.get(kind), "apiVersion") == api, f"kubernetes/splash.yaml: {kind} apiVersion is not {api}")
c = dig(k8s.get("Deployment"), "spec", "template", "spec", "containers", 0) or {}
need(dig(c, "readinessProbe", "httpGet", "path") == "/ready", "Deployment: readinessProbe is not GET /ready")
need(dig(c, "livenessProbe", "httpGet", "path") == "/health", "Deployment: livenessProbe is not GET /health")
mounts = {m.get("name"): m.get("mountPath") for m in c.get("volumeMounts", [])}
need(mounts.get("cache") == "/var/lib/splash", "Deployment: the cache volume is not at /var/lib/splash")
vols = {v.get("name"): v for v in dig(k8s.get("Deployment"), "spec", "template", "spec", "volumes") or []}
need(dig(vols.get("cache"), "ephemeral", "volumeClaimTemplate", "spec", "resources", "requests", "storage"),
     "Deployment: the cache is not a per-pod volume claim")
sel = dig(k8s.get("Deployment"), "spec", "selector", "matchLabels")
need(sel and dig(k8s.get("Deployment"), "spec", "template", "metadata", "labels") == sel,
     "Deployment: selector does not match the pod labels")
need(dig(k8s.get("Service"), "spec", "selector") == sel, "Service: selector is not the Deployment's")
need(dig(k8s.get("PodDisruptionBudget"), "spec", "selector", "matchLabels") == sel,
     "PodDisruptionBudget: selector is not the Deployment's")
hpa = k8s.get("HorizontalPodAutoscaler")
need(dig(hpa, "spec", "scaleTargetRef", "name") == dig(k8s.get("Deployment"), "metadata", "name"),
     "HPA: scaleTargetRef is not the Deployment")
need(dig(hpa, "spec", "metrics", 0, "pods", "metric", "name") == "splash_requests_active",
     "HPA: does not scale on splash_requests_active")
adapter = (load_all("packaging/deploy/kubernetes/prometheus-adapter.yaml") or [{}])[0]
need(dig(adapter, "rules", "custom", 0, "name", "as") == "splash_requests_active",
     "prometheus-adapter.yaml: no rule serving splash_requests_active")

compose = (load_all("packaging/deploy/compose/compose.yaml") or [{}])[0]
services = compose.get("services") or {}
replicas = [n for n in services if n.startswith("splash-")]
need(len(replicas) >= 2 and "router" in services, f"compose.yaml: services {sorted(services)}")
cache_vols = set()
for n in replicas:
    s = services[n]
    need(s.get("image") and s.get("command"), f"compose.yaml: {n} has no image or command (anchor merge)")
    need(dig(s, "healthcheck", "test"), f"compose.yaml: {n} has no healthcheck")
    v = [x.split(":")[0] for x in s.get("volumes", []) if x.endswith(":/var/lib/splash")]
    need(len(v) == 1 and v[0] in (compose.get("volumes") or {}), f"compose.yaml: {n} has no cache volume of its own")
    cache_vols.update(v)
need(len(cache_vols) == len(replicas), "compose.yaml: replicas share a cache volume")
try:
    nginx = open(f"{root}/packaging/deploy/compose/nginx.conf").read()
    for n in replicas:
        need(f"server {n}:8000" in nginx, f"compose/nginx.conf: no server line for {n}")
except OSError as e:
    errors.append(str(e))

envoy = (load_all("packaging/deploy/envoy/envoy.yaml") or [{}])[0]
cl = dig(envoy, "static_resources", "clusters", 0)
need(dig(cl, "lb_policy") == "RING_HASH", "envoy.yaml: the cluster is not RING_HASH")
need(dig(cl, "health_checks", 0, "http_health_check", "path") == "/ready", "envoy.yaml: health check is not /ready")
hm = dig(envoy, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config",
         "route_config", "virtual_hosts", 0, "routes", 0, "route")
need(dig(hm, "cluster") == dig(cl, "name"), "envoy.yaml: the route does not reach the cluster")
need(dig(hm, "hash_policy", 0, "header", "header_name") == "x-session-affinity",
     "envoy.yaml: the first hash policy is not X-Session-Affinity")

for e in errors:
    print(e)
sys.exit(1 if errors else 0)
