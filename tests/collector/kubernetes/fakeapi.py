"""A faithful fake kube-apiserver for tests: list, watch streams, 410 Gone, drops, bearer auth.

It speaks the wire protocol of https://kubernetes.io/docs/reference/using-api/api-concepts/ :
list responses carry `metadata.resourceVersion`; `?watch=true&resourceVersion=N` streams one JSON
watch event per line (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) for every change after N; a
resourceVersion older than the compacted history gets HTTP 200 and one ERROR event holding a
Status with code 410 (reason Expired), as a real API server sends; a bad token gets HTTP 401
with a Status body. Objects served are the real-shaped JSON under tests/fixtures/k8s/.

For the healer it also takes writes the way the API server does: GET/PATCH (JSON merge patch,
RFC 7386) of a node, GET/DELETE of a pod and a list by labelSelector, GET/DELETE/POST of
batch/v1 Jobs and kubeflow.org/v1 PyTorchJobs (404 NotFound, 409 AlreadyExists). Every write is
kept in `writes` as (method, path, body) so tests assert the exact requests made.
"""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "k8s"
LIST_KIND = {"pods": "PodList", "events": "EventList", "nodes": "NodeList"}


def fixture(name: str) -> Any:
    """A fixture object (deep copy each time, so tests may change it)."""
    return json.loads((FIXTURES / name).read_text())


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class _Dropped(Exception):
    """Raised inside a watch stream to cut the TCP connection mid-response."""


class FakeKubeAPI:
    """The fake server's state and controls; `start()` serves it on 127.0.0.1 on a free port."""

    def __init__(self, token: str = "test-token") -> None:
        self.token = token
        self._lock = threading.Lock()
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {k: {} for k in LIST_KIND}
        self.history: dict[str, list[tuple[int, str]]] = {k: [] for k in LIST_KIND}
        self.compacted: dict[str, int] = dict.fromkeys(LIST_KIND, 0)
        self.drop_generation = 0
        self.held = False  # while True, open watches deliver nothing (a stalled stream)
        self.garbage_lists = False  # while True, lists answer 200 with an HTML error page
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.unauthorized = 0
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.workloads: dict[str, dict[str, Any]] = {}  # "jobs/ns/name" -> object
        self.writes: list[tuple[str, str, Any]] = []
        self.app = Starlette(
            routes=[
                Route("/api/v1/nodes/{name}", self._node, methods=["GET", "PATCH"]),
                Route("/api/v1/namespaces/{ns}/pods", self._pods, methods=["GET"]),
                Route("/api/v1/namespaces/{ns}/pods/{name}", self._pod, methods=["GET", "DELETE"]),
                Route(
                    "/apis/{group:path}/namespaces/{ns}/{plural}", self._workloads, methods=["POST"]
                ),
                Route(
                    "/apis/{group:path}/namespaces/{ns}/{plural}/{name}",
                    self._workload,
                    methods=["GET", "DELETE"],
                ),
                Route("/api/v1/{kind}", self._endpoint),
            ]
        )

    @property
    def url(self) -> str:
        """Base URL for the kubernetes client's Configuration(host=...)."""
        return f"http://127.0.0.1:{self.port}"

    # --- changing the cluster ---

    # --- writes (the healer's calls) ---

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.token}"

    @staticmethod
    def _status(code: int, reason: str, message: str) -> JSONResponse:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        return JSONResponse(body, status_code=code)

    async def _write_log(self, request: Request) -> Any:
        body = json.loads(await request.body() or b"null")
        if request.method != "GET":
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            self.writes.append((request.method, path, copy.deepcopy(body)))
        return body

    async def _node(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse(fixture("status_401.json"), status_code=401)
        name = request.path_params["name"]
        body = await self._write_log(request)
        node = self.objects["nodes"].get(f"/{name}")
        if node is None:
            return self._status(404, "NotFound", f'nodes "{name}" not found')
        if request.method == "PATCH":
            node = merge_patch(copy.deepcopy(node), body)
            self.apply("nodes", node)
        return JSONResponse(self.objects["nodes"][f"/{name}"])

    async def _pods(self, request: Request) -> Response:
        ns = request.path_params["ns"]
        key, _, value = request.query_params.get("labelSelector", "").partition("=")
        items = [
            p
            for k, p in self.objects["pods"].items()
            if k.startswith(f"{ns}/")
            and (not key or p["metadata"].get("labels", {}).get(key) == value)
        ]
        return JSONResponse(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "items": items,
                "metadata": {"resourceVersion": str(self.rv)},
            }
        )

    async def _pod(self, request: Request) -> Response:
        ns, name = request.path_params["ns"], request.path_params["name"]
        await self._write_log(request)
        pod = self.objects["pods"].get(f"{ns}/{name}")
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        if request.method == "DELETE":
            self.delete("pods", pod)
        return JSONResponse(pod)

    async def _workloads(self, request: Request) -> Response:
        ns, plural = request.path_params["ns"], request.path_params["plural"]
        body = await self._write_log(request)
        key = f"{plural}/{ns}/{body['metadata']['name']}"
        if key in self.workloads:
            return self._status(409, "AlreadyExists", f"{key} already exists")
        body["metadata"].update(namespace=ns, uid=f"uid-{len(self.workloads) + 1}")
        self.workloads[key] = body
        return JSONResponse(body, status_code=201)

    async def _workload(self, request: Request) -> Response:
        ns, plural, name = (request.path_params[k] for k in ("ns", "plural", "name"))
        await self._write_log(request)
        obj = self.workloads.get(f"{plural}/{ns}/{name}")
        if obj is None:
            return self._status(404, "NotFound", f'{plural} "{name}" not found')
        if request.method == "DELETE":
            del self.workloads[f"{plural}/{ns}/{name}"]
        return JSONResponse(obj)

    def _record(self, kind: str, etype: str, obj: Any, key: str | None) -> int:
        with self._lock:
            self.rv += 1
            if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
                obj["metadata"]["resourceVersion"] = str(self.rv)
            if key is not None:
                if etype == "DELETED":
                    self.objects[kind].pop(key, None)
                else:
                    self.objects[kind][key] = obj
            line = json.dumps({"type": etype, "object": obj})
            self.history[kind].append((self.rv, line))
            return self.rv

    def apply(self, kind: str, obj: Any, etype: str | None = None) -> int:
        """Create or update an object (ADDED or MODIFIED); returns its new resourceVersion."""
        obj = copy.deepcopy(obj)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        key = f"{(meta or {}).get('namespace', '')}/{name or id(obj)}"
        etype = etype or ("MODIFIED" if key in self.objects[kind] else "ADDED")
        return self._record(kind, etype, obj, key)

    def delete(self, kind: str, obj: Any) -> int:
        """Delete an object (a DELETED watch event with its final state)."""
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        return self._record(kind, "DELETED", obj, f"{meta.get('namespace', '')}/{meta['name']}")

    def raw_line(self, kind: str, line: str) -> None:
        """Put an arbitrary line into the watch stream (for garbage-input tests)."""
        with self._lock:
            self.rv += 1
            self.history[kind].append((self.rv, line))

    def bookmark(self, kind: str) -> None:
        """A BOOKMARK event: only metadata.resourceVersion, as the API server sends."""
        obj = {"kind": LIST_KIND[kind][:-4], "apiVersion": "v1", "metadata": {}}
        self._record(kind, "BOOKMARK", obj, None)

    def compact(self) -> None:
        """Forget history (etcd compaction): watches from older versions get 410 Expired."""
        with self._lock:
            for kind in LIST_KIND:
                self.compacted[kind] = self.rv
                self.history[kind].clear()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream (no terminating chunk)."""
        with self._lock:
            self.drop_generation += 1

    # --- serving ---

    async def _endpoint(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        query = dict(request.query_params)
        self.requests.append((kind, query))
        if request.headers.get("authorization") != f"Bearer {self.token}":
            self.unauthorized += 1
            return JSONResponse(fixture("status_401.json"), status_code=401)
        if kind not in LIST_KIND:
            return JSONResponse({"kind": "Status", "code": 404}, status_code=404)
        if query.get("watch") in ("true", "1"):
            return StreamingResponse(self._watch(kind, query), media_type="application/json")
        if self.garbage_lists:
            return Response("<html><body>502 Bad Gateway</body></html>", media_type="text/html")
        with self._lock:
            body = {
                "kind": LIST_KIND[kind],
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": list(self.objects[kind].values()),
            }
        return JSONResponse(body)

    async def _watch(self, kind: str, query: dict[str, str]) -> AsyncIterator[bytes]:
        since = int(query.get("resourceVersion") or self.rv)
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 300)
        generation = self.drop_generation
        if since < self.compacted[kind]:
            status = fixture("status_410.json")
            status["object"]["message"] = f"too old resource version: {since} ({self.rv})"
            yield (json.dumps(status) + "\n").encode()
            return
        while time.monotonic() < deadline:
            if self.drop_generation != generation:
                raise _Dropped("connection dropped by the fake API server")
            if self.held:
                await asyncio.sleep(0.01)
                continue
            with self._lock:
                lines = [(rv, line) for rv, line in self.history[kind] if rv > since]
            for rv, line in lines:
                since = rv
                yield (line + "\n").encode()
            await asyncio.sleep(0.01)

    def start(self) -> FakeKubeAPI:
        """Serve in a thread (uvicorn); the same port again after stop() (API back up)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="critical", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                break
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Take the API down: cut watches, stop listening (connections are refused)."""
        self.drop_watches()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None
