"""The one module that calls the Kubernetes API (official `kubernetes` client); thin on purpose.

Everything here is a direct client call or a short loop around one. Deciding *what* to create is
`symphony.kube.manifests` (pure); turning API objects into symphony statuses is
`symphony.kube.status` (pure). docs/kubernetes.md lists which of these calls ran against
which endpoint in the tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from symphony.errors import BackendError

# kind -> (api attribute, create method, namespaced)
_CREATE = {
    "Namespace": ("core", "create_namespace", False),
    "Secret": ("core", "create_namespaced_secret", True),
    "Service": ("core", "create_namespaced_service", True),
    "NetworkPolicy": ("networking", "create_namespaced_network_policy", True),
    "Deployment": ("apps", "create_namespaced_deployment", True),
    "Job": ("batch", "create_namespaced_job", True),
    "ConfigMap": ("core", "create_namespaced_config_map", True),
}

# What team mode deletes of one experiment, by label, in this order (controllers before pods).
_DELETE = (
    ("batch", "list_namespaced_job", "delete_namespaced_job"),
    ("apps", "list_namespaced_deployment", "delete_namespaced_deployment"),
    ("core", "list_namespaced_pod", "delete_namespaced_pod"),
    ("core", "list_namespaced_service", "delete_namespaced_service"),
    ("networking", "list_namespaced_network_policy", "delete_namespaced_network_policy"),
    ("core", "list_namespaced_config_map", "delete_namespaced_config_map"),
    ("core", "list_namespaced_secret", "delete_namespaced_secret"),
)


def _select(items: list[Any], label_selector: str | None) -> list[Any]:
    """`items` whose labels match every `k=v` term of `label_selector` (the server filters too;
    checking again costs nothing and keeps a lax endpoint from widening a delete)."""
    if not label_selector:
        return list(items)
    wanted = dict(term.split("=", 1) for term in label_selector.split(",") if "=" in term)
    return [
        i for i in items if all((i.metadata.labels or {}).get(k) == v for k, v in wanted.items())
    ]


def is_not_found(err: ApiException) -> bool:
    """Whether an API error is a 404."""
    return getattr(err, "status", None) == 404


def short_error(err: Exception) -> str:
    """One line for an API error: `403 Forbidden: <the API server's message>`, else `str(err)`."""
    if isinstance(err, ApiException):
        try:
            message = json.loads(err.body or "{}").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{err.status} {err.reason}" + (f": {message}" if message else "")
    return str(err).splitlines()[0] if str(err) else type(err).__name__


class KubeApi:
    """The calls the kube backend makes, over one `kubernetes.client.ApiClient`."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)

    @classmethod
    def connect(
        cls, context: str | None = None, kubeconfig: str | None = None, host: str | None = None
    ) -> KubeApi:
        """Connect with a kubeconfig context (default: current), in-cluster config, or a bare host.

        Raises:
            BackendError: no usable configuration, with what to do about it.
        """
        if host:
            cfg = client.Configuration()
            cfg.host = host
            return cls(client.ApiClient(cfg))
        cfg = client.Configuration()
        try:
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=cfg
            )
        except (ConfigException, FileNotFoundError, TypeError) as err:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except ConfigException:
                raise BackendError(
                    f"no Kubernetes config ({err}); get credentials first (`gcloud container "
                    "clusters get-credentials NAME` or `aws eks update-kubeconfig --name NAME`), "
                    "or choose a context with -o context=NAME (config: backend_options.kube.context)"
                ) from None
        return cls(client.ApiClient(cfg))

    def create(self, obj: dict[str, Any]) -> str | None:
        """Create one object (a manifest dict) with the matching typed client call; returns the
        uid the API server gave it (what an owner reference names)."""
        kind = obj["kind"]
        if kind not in _CREATE:
            raise BackendError(
                f"symphony does not create {kind} objects; known: {', '.join(_CREATE)}"
            )
        api_name, method, namespaced = _CREATE[kind]
        call = getattr(getattr(self, api_name), method)
        made = call(obj["metadata"]["namespace"], obj) if namespaced else call(obj)
        return getattr(getattr(made, "metadata", None), "uid", None)

    def read_namespace(self, name: str) -> client.V1Namespace | None:
        """The namespace, or None if there is none."""
        try:
            return self.core.read_namespace(name)
        except ApiException as err:
            if is_not_found(err):
                return None
            raise

    def namespaces(self, label_selector: str) -> list[client.V1Namespace]:
        """Namespaces matching a label selector."""
        return self.core.list_namespace(label_selector=label_selector).items

    def read_config_map(self, namespace: str, name: str) -> client.V1ConfigMap | None:
        """A ConfigMap, or None if there is none."""
        try:
            return self.core.read_namespaced_config_map(name, namespace)
        except ApiException as err:
            if is_not_found(err):
                return None
            raise

    def config_maps(self, namespace: str, label_selector: str) -> list[client.V1ConfigMap]:
        """ConfigMaps of a namespace matching a label selector."""
        items = self.core.list_namespaced_config_map(namespace, label_selector=label_selector).items
        return _select(items, label_selector)

    def delete_labelled(self, namespace: str, label_selector: str, *, force: bool = False) -> None:
        """Delete every object symphony makes that matches `label_selector` (equality terms,
        `k=v,k2=v2`) in `namespace`: Jobs, Deployments, their pods, Services, NetworkPolicies,
        the marker ConfigMap, the Secrets it made from files."""
        body = client.V1DeleteOptions(
            propagation_policy="Background", grace_period_seconds=0 if force else None
        )
        for api_name, lister, deleter in _DELETE:
            api = getattr(self, api_name)
            # matched here too: deleting another experiment's object is no risk to take
            for obj in _select(
                getattr(api, lister)(namespace, label_selector=label_selector).items, label_selector
            ):
                try:
                    getattr(api, deleter)(obj.metadata.name, namespace, body=body)
                except ApiException as err:
                    if not is_not_found(err):
                        raise

    def workloads(self, namespace: str, label_selector: str) -> list[str]:
        """Names of the Jobs and Deployments of a namespace matching a label selector."""
        jobs = self.batch.list_namespaced_job(namespace, label_selector=label_selector).items
        deps = self.apps.list_namespaced_deployment(namespace, label_selector=label_selector).items
        return [o.metadata.name for o in _select(jobs + deps, label_selector)]

    def read_secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """The base64 `data` of a Secret (kept in memory only, to copy it)."""
        return dict(self.core.read_namespaced_secret(name, namespace).data or {})

    def pods(self, namespace: str, label_selector: str | None = None) -> list[client.V1Pod]:
        """Pods in a namespace (optionally matching a label selector)."""
        items = self.core.list_namespaced_pod(namespace, label_selector=label_selector).items
        return _select(items, label_selector)

    def all_pods(self, label_selector: str) -> list[client.V1Pod]:
        """Pods in every namespace matching a label selector (one call for `symphony list`)."""
        return self.core.list_pod_for_all_namespaces(label_selector=label_selector).items

    def logs(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """Yield a container's output lines, each ending in a newline; `follow` streams until it ends."""
        kwargs: dict[str, Any] = {
            "container": container,
            "follow": follow,
            "_preload_content": False,
        }
        if tail is not None:
            kwargs["tail_lines"] = tail
        resp = self.core.read_namespaced_pod_log(pod, namespace, **kwargs)
        pending = b""
        try:
            for chunk in resp.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace") + "\n"
            if pending:
                yield pending.decode(errors="replace") + "\n"
        finally:
            resp.release_conn()

    def delete_namespace(
        self, name: str, *, force: bool = False, wait_s: float | None = 300, poll_s: float = 1.0
    ) -> bool:
        """Delete a namespace (and so everything in it); wait until it is gone.

        Returns:
            True when the namespace is gone, False when `wait_s` passed first (or `wait_s` is None).
        """
        body = client.V1DeleteOptions(
            propagation_policy="Foreground", grace_period_seconds=0 if force else None
        )
        try:
            self.core.delete_namespace(name, body=body)
        except ApiException as err:
            if not is_not_found(err):
                raise
            return True
        if wait_s is None:
            return False
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.read_namespace(name) is None:
                return True
            time.sleep(poll_s)  # polling with a deadline: the API has no "deleted" callback
        return False

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: list[str],
        out: Any = None,
        err: Any = None,
    ) -> int:
        """Run `command` in a container (websocket exec); copy its output; return its exit code."""
        from kubernetes.stream import stream

        resp = stream(
            self.core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=container,
            command=command,
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        try:
            while resp.is_open():
                resp.update(timeout=1)
                _copy(resp, out, err)
            _copy(resp, out, err)  # what arrived with the closing frames
            code = resp.returncode
        finally:
            resp.close()
        return int(code or 0)


def _copy(resp: Any, out: Any, err: Any) -> None:
    if resp.peek_stdout():
        text = resp.read_stdout()
        if out is not None:
            out.write(text)
    if resp.peek_stderr():
        text = resp.read_stderr()
        if err is not None:
            err.write(text)
