"""A Kubernetes API endpoint on 127.0.0.1 for tests: kmock plus a tiny emulation of what kmock lacks.

No real kube-apiserver can be installed here. `kmock.KubernetesEmulator` (PyPI `kmock`) serves
namespaced create/read/list/delete for the official client (Services, NetworkPolicies,
Deployments, Jobs, Secrets, Pods), but it cannot parse the Namespace endpoints and serves no pod
logs. This module routes exactly those paths to a small in-memory emulation and everything else
to kmock:

    POST/GET     /api/v1/namespaces                 create, list (equality label selectors)
    GET/DELETE   /api/v1/namespaces/NAME            read; delete = "Terminating" for one more
                                                    read, then gone with every object inside
    GET          /api/v1/namespaces/NS/pods/POD/log ?container=&tailLines=&follow=
    GET (ws)     /api/v1/namespaces/NS/pods/POD/exec websocket, v4.channel.k8s.io: stdout on
                                                    channel 1, stderr 2, the exit status on 3

Nothing here runs a container: tests add the pods a controller would create with `add_pod`
(or let `symphony.kube.testing_kube_controllers.Controllers` make them from the Deployments and Jobs),
the lines a container prints with `write_log` / `end_log`, and what a command run by exec does
with `exec_handler(namespace, pod, container, argv) -> (out, err, code)`.

It lives beside `symphony.testing`, not in `symphony.backends`: backends never import it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

import kmock
from aiohttp import web

_NS = re.compile(r"^/api/v1/namespaces/([^/]+)$")
_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")
_EXEC = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec$")
_COLLECTION = re.compile(r"^/apis?/(.+?)/namespaces/([^/]+)/([^/]+)$")
_RESOURCES = {
    "v1/pods": "Pod",
    "v1/services": "Service",
    "v1/secrets": "Secret",
    "apps/v1/deployments": "Deployment",
    "batch/v1/jobs": "Job",
    "networking.k8s.io/v1/networkpolicies": "NetworkPolicy",
    "v1/configmaps": "ConfigMap",
}


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "metadata": {},
    }
    return web.json_response(body, status=code)


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _selected(labels: dict[str, str], selector: str | None) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class KubeEndpoint:
    """The endpoint, served from a background thread; use as a context manager.

    Attributes:
        url: `http://127.0.0.1:PORT`, for `KubeApi.connect(host=url)` / the `host` option.
        kmock: the kmock emulator (its `.objects` hold every namespaced object).
        namespaces: name -> Namespace object of the emulation.
    """

    def __init__(self) -> None:
        self.kmock = kmock.KubernetesEmulator()
        for resource, kind in _RESOURCES.items():
            self.kmock.resources[resource] = {"kind": kind, "namespaced": True}
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.url = ""
        self._logs: dict[tuple[str, str, str], list[str]] = {}
        self._ended: set[tuple[str, str, str]] = set()
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Condition | None = None
        self._thread = threading.Thread(target=self._serve, name="kube-endpoint", daemon=True)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.exec_handler: Callable[[str, str, str, list[str]], tuple[str, str, int]] | None = None
        self.requests: list[tuple[str, str]] = []  # (method, path) of every API call, in order

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> KubeEndpoint:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test Kubernetes endpoint did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._route)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        self._ready.set()
        await self._stop.wait()
        async with self._changed:
            self._changed.notify_all()
        await runner.cleanup()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # --- what an admin, controllers and kubelets would do --------------------------------------
    def add_namespace(self, name: str) -> None:
        """A namespace that exists before any launch (an admin's, for team mode)."""
        self.namespaces[name] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z", "uid": name},
            "status": {"phase": "Active"},
        }

    def add_pod(self, pod: dict[str, Any]) -> None:
        """Store a pod, as a controller (spec) and a kubelet (status) would have made it."""
        meta = pod["metadata"]
        meta.setdefault(
            "creationTimestamp", datetime.datetime.now(datetime.timezone.utc).isoformat()
        )

        async def put() -> None:
            self.kmock.objects["v1/pods", meta["namespace"], meta["name"]] = pod

        self._call(put())

    def write_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Append output to a container's log (followers see it at once)."""

        async def put() -> None:
            self._logs.setdefault((namespace, pod, container), []).extend(text.splitlines(True))
            async with self._changed:
                self._changed.notify_all()

        self._call(put())

    def end_log(self, namespace: str, pod: str, container: str) -> None:
        """The container ended: followers' streams close."""

        async def put() -> None:
            self._ended.add((namespace, pod, container))
            async with self._changed:
                self._changed.notify_all()

        self._call(put())

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A stored pod (its dict, live: change it and `add_pod` it back), or None."""
        key = self._key("Pod", namespace, name)
        return None if key is None else self.kmock.objects[key].raw

    def _key(self, kind: str, namespace: str, name: str) -> Any:
        for key, obj in list(self.kmock.objects.items()):
            if key[1:] == (namespace, name) and not obj.deleted and obj.raw.get("kind") == kind:
                return key
        return None

    def stored(self, kind: str) -> list[dict[str, Any]]:
        """Every live object of `kind` ("Deployment", "Job", "Pod", ...), in any namespace."""
        return [
            obj.raw
            for obj in list(self.kmock.objects.values())
            if not obj.deleted and obj.raw.get("kind") == kind
        ]

    def delete_pod(self, namespace: str, name: str) -> None:
        """Remove a pod (as a node failure or an eviction would)."""
        self.delete("Pod", namespace, name)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Remove an object (as a controller of the cluster would; a no-op when it is gone)."""

        async def drop() -> None:
            key = self._key(kind, namespace, name)
            if key is not None:
                del self.kmock.objects[key]

        self._call(drop())

    # --- routing -----------------------------------------------------------------------------
    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.requests.append((request.method, path))
        if path == "/api/v1/namespaces":
            return await (
                self._create_ns(request) if request.method == "POST" else self._list_ns(request)
            )
        if match := _NS.match(path):
            return await self._one_ns(request, match.group(1))
        if (match := _LOG.match(path)) and request.method == "GET":
            return await self._log(request, *match.groups())
        if (match := _EXEC.match(path)) and self.exec_handler is not None:
            return await self._exec(request, *match.groups())
        try:
            response = await self.kmock(request)
            if request.method == "POST" and response.status < 300 and _COLLECTION.match(path):
                return self._identified(response, _COLLECTION.match(path).groups())
            return response
        except Exception as err:
            if type(err).__name__ == "KubernetesObjectNotFoundError":  # kmock: a 500 otherwise
                return _status(404, "NotFound", f"{path} not found")
            raise

    def _identified(self, response: web.Response, where: tuple[str, str, str]) -> web.Response:
        """A created object gets what the API server gives every object, a `uid` and a
        `creationTimestamp` (owner references name their owner by uid); kmock sets neither."""
        obj = json.loads(response.body)
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _stamp())
        group, ns, plural = where
        self.kmock.objects[f"{group}/{plural}", ns, meta["name"]] = obj
        return web.json_response(obj, status=201)

    async def _create_ns(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = body["metadata"]["name"]
        if name in self.namespaces:
            return _status(409, "AlreadyExists", f'namespaces "{name}" already exists')
        body["metadata"]["creationTimestamp"] = _stamp()
        body["metadata"]["uid"] = str(uuid.uuid4())
        body["status"] = {"phase": "Active"}
        self.namespaces[name] = body
        return web.json_response(body, status=201)

    async def _list_ns(self, request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector")
        items = [
            ns
            for ns in self.namespaces.values()
            if _selected(ns["metadata"].get("labels") or {}, selector)
        ]
        return web.json_response(
            {"apiVersion": "v1", "kind": "NamespaceList", "metadata": {}, "items": items}
        )

    async def _one_ns(self, request: web.Request, name: str) -> web.Response:
        ns = self.namespaces.get(name)
        if ns is None:
            return _status(404, "NotFound", f'namespaces "{name}" not found')
        if request.method == "DELETE":
            ns["status"] = {"phase": "Terminating"}
            for key in [k for k in self.kmock.objects.keys() if k[1] == name]:
                del self.kmock.objects[key]
            return web.json_response(ns)
        if ns["status"]["phase"] == "Terminating":
            del self.namespaces[name]  # seen terminating once; gone on the next read
        return web.json_response(ns)

    async def _log(self, request: web.Request, namespace: str, pod: str) -> web.StreamResponse:
        key = (namespace, pod, request.query.get("container", ""))
        if key not in self._logs and key not in self._ended:
            return _status(400, "BadRequest", f"container {key[2]!r} of pod {pod!r} has no log")
        lines = self._logs.get(key, [])
        tail = request.query.get("tailLines")
        sent = max(0, len(lines) - int(tail)) if tail is not None else 0
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        follow = request.query.get("follow") in ("true", "True", "1")
        while True:
            lines = self._logs.get(key, [])
            for line in lines[sent:]:
                await response.write(line.encode())
            sent = len(lines)
            if not follow or key in self._ended or self._stop.is_set():
                break
            async with self._changed:
                await self._changed.wait()
        await response.write_eof()
        return response

    async def _exec(self, request: web.Request, namespace: str, pod: str) -> web.StreamResponse:
        argv = request.query.getall("command", [])
        out, err, code = self.exec_handler(namespace, pod, request.query.get("container", ""), argv)
        ws = web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(request)
        for channel, text in ((1, out), (2, err)):
            if text:
                await ws.send_bytes(bytes([channel]) + text.encode())
        status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        if code:
            status = {
                "metadata": {},
                "status": "Failure",
                "reason": "NonZeroExitCode",
                "message": f"command terminated with non-zero exit code: {code}",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
        return ws
