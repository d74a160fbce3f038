"""Kubernetes cluster source: list+watch pods, events and nodes with the official client."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from collector.base import Emit, Observations
from collector.health import SourceHealth
from collector.kubernetes import convert
from collector.kubernetes.state import ClusterState

log = logging.getLogger(__name__)

KINDS = ("nodes", "pods", "events")  # nodes first: pod events are placed on nodes
_LIST_CALLS = {
    "pods": "list_pod_for_all_namespaces",
    "events": "list_event_for_all_namespaces",
    "nodes": "list_node",
}
_PARSE_ERRORS = (convert.MalformedObject, KeyError, TypeError, ValueError, AttributeError)


class _Garbled(Exception):
    """A list response that is not a Kubernetes list (already counted as a parse failure)."""


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 / ERROR Status code 410): relist."""


def make_api_client(
    host: str, token: str | None = None, *, ca_file: str | None = None, verify_ssl: bool = True
) -> k8s.ApiClient:
    """An ApiClient for one API server URL with a bearer token (no kubeconfig needed)."""
    conf = k8s.Configuration(host=host)
    if token:
        conf.api_key = {"BearerToken": token}
        conf.api_key_prefix = {"BearerToken": "Bearer"}
    conf.verify_ssl = verify_ssl
    if ca_file:
        conf.ssl_ca_cert = ca_file
    conf.retries = 0  # our own loop backs off; urllib3's silent retries would hide an outage
    return k8s.ApiClient(conf)


class KubernetesSource:
    """List then watch nodes, pods and events; resume by resourceVersion, relist on 410 Gone."""

    name = "kubernetes"

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        cluster: str = "default",
        gpu_resource: str = "nvidia.com/gpu",
        user_keys: Sequence[str] = ("fleetmedic.io/user", "user"),
        gpu_pods_only: bool = True,
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_client = api_client
        self._api = k8s.CoreV1Api(api_client)
        self.health = SourceHealth(self.name)
        self.state = ClusterState(
            cluster=cluster,
            gpu_resource=gpu_resource,
            user_keys=tuple(user_keys),
            gpu_pods_only=gpu_pods_only,
            clock=clock,
        )
        self.watch_timeout_s = watch_timeout_s
        self.request_timeout_s = request_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.resource_version: dict[str, str | None] = dict.fromkeys(KINDS)
        self.stats: Counter[str] = Counter()  # lists, relists_410, reconnects, watch_events
        self.backoffs: deque[float] = deque(maxlen=64)  # recent waits, for status and tests
        self._emit_lock = threading.Lock()
        self._open: set[Any] = set()  # watch responses being read, cut when stop is set
        self._open_lock = threading.Lock()

    # --- one-shot ---

    def collect(self) -> Observations:
        """List nodes, pods and events once (remembering resourceVersions); never raises."""
        obs = Observations()
        for kind in KINDS:
            try:
                obs.extend(self._list(kind))
            except Exception as exc:  # one failing resource must not lose the others
                self._count_failure(kind, exc)
        return obs

    # --- streaming ---

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """One watch thread per resource; returns when `stop` is set and the threads end."""

        def locked_emit(obs: Observations) -> None:
            with self._emit_lock:
                emit(obs)

        threads = [
            threading.Thread(
                target=self.watch_loop,
                args=(kind, locked_emit, stop),
                name=f"k8s-watch-{kind}",
                daemon=True,
            )
            for kind in KINDS
        ]
        for t in threads:
            t.start()
        stop.wait()
        self._cut_open_watches()
        for t in threads:
            t.join()

    def _cut_open_watches(self) -> None:
        # A watch blocks in a socket read until the server sends something; cut it so stop is quick.
        with self._open_lock:
            responses = list(self._open)
        for resp in responses:
            try:
                resp.shutdown()
            except Exception as exc:  # already closed: nothing to cut
                log.debug("kubernetes: shutting a watch down: %s", exc)

    def watch_loop(self, kind: str, emit: Emit, stop: threading.Event) -> None:
        """List (when no resourceVersion), then watch; reconnect, relist or back off until stop."""
        delay = self.backoff_initial_s
        while not stop.is_set():
            listed = False
            try:
                if self.resource_version[kind] is None:
                    listed = True
                    obs = self._list(kind)
                    if not obs.is_empty():
                        emit(obs)
                self._watch(kind, emit, stop)
                delay = self.backoff_initial_s
                continue
            except _Gone:
                self.stats["relists_410"] += 1
                self.health.error("watch_expired_410")
                self.resource_version[kind] = None
                if not listed:
                    continue  # relist at once; a 410 right after a list waits like an error
            except Exception as exc:
                if stop.is_set():
                    break  # our own cut of the connection at shutdown, not a failure
                self._count_failure(kind, exc)
            self.backoffs.append(delay)
            stop.wait(delay)
            delay = min(delay * 2, self.backoff_max_s)

    def _count_failure(self, kind: str, exc: BaseException) -> None:
        if isinstance(exc, _Garbled):
            return  # counted where it was read
        if isinstance(exc, ApiException):
            if exc.status == 410:
                self.resource_version[kind] = None
                self.health.error("watch_expired_410", exc)
            elif exc.status in (401, 403):
                self.health.error(f"unauthorized_{exc.status}", exc)
            else:
                self.health.error(f"http_{exc.status}", exc)
        elif isinstance(exc, urllib3.exceptions.ProtocolError):
            self.stats["reconnects"] += 1
            self.health.error("connection_dropped", exc)
        elif isinstance(exc, urllib3.exceptions.HTTPError | OSError):
            self.health.error("api_unreachable", exc)
        else:
            log.exception("kubernetes %s: unexpected failure", kind)
            self.health.error("unexpected", exc)

    # --- list ---

    def _call(self, kind: str, **kwargs: Any) -> Any:
        fn = getattr(self._api, _LIST_CALLS[kind])
        return fn(_preload_content=False, **kwargs)

    def _list(self, kind: str) -> Observations:
        resp = self._call(kind, _request_timeout=self.request_timeout_s)
        try:
            body = json.loads(resp.data)
            items = body.get("items") or []
            if not isinstance(items, list):
                raise ValueError("items is not a list")
        except (ValueError, AttributeError) as exc:
            self.health.parse_failure(f"{kind}_list", str(exc))
            raise _Garbled(str(exc)) from exc
        self.stats["lists"] += 1
        if kind == "pods":
            obs = self.state.pods_relisted(items, self._bad)
        else:
            obs = Observations()
            for item in items:
                obs.extend(self._apply(kind, "ADDED", item))
        meta = body.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        self.resource_version[kind] = str(rv) if rv else None
        return obs

    def _bad(self, kind: str, exc: BaseException) -> None:
        self.health.parse_failure(f"{kind}_object", str(exc))

    # --- watch ---

    def _watch(self, kind: str, emit: Emit, stop: threading.Event) -> None:
        resp = self._call(
            kind,
            watch=True,
            resource_version=self.resource_version[kind],
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout_s,
            _request_timeout=(self.request_timeout_s, self.watch_timeout_s + 30),
        )
        with self._open_lock:
            self._open.add(resp)
        try:
            if stop.is_set():
                return
            for event in self._events(kind, iter_resp_lines(resp)):
                obs = self._handle(kind, event)
                if not obs.is_empty():
                    emit(obs)
                if stop.is_set():
                    return
        finally:
            with self._open_lock:
                self._open.discard(resp)
            resp.close()
            resp.release_conn()

    def _events(self, kind: str, lines: Iterator[str]) -> Iterator[dict[str, Any]]:
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                self.health.parse_failure(f"{kind}_watch_line", line)
                continue
            if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                self.health.parse_failure(f"{kind}_watch_event", line)
                continue
            yield event

    def _handle(self, kind: str, event: dict[str, Any]) -> Observations:
        etype, obj = event.get("type"), event["object"]
        if etype == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone(obj.get("message"))
            self.health.error(f"watch_error_{code}", RuntimeError(str(obj.get("message"))))
            return Observations()
        self.stats["watch_events"] += 1
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        obs = Observations() if etype == "BOOKMARK" else self._apply(kind, str(etype), obj)
        # Advance only after handling, so a crash mid-object re-reads it on resume.
        if rv:
            self.resource_version[kind] = str(rv)
        return obs

    def _apply(self, kind: str, etype: str, obj: Any) -> Observations:
        deleted = etype == "DELETED"
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            self.health.parse_failure(f"{kind}_watch_type", str(etype))
            return Observations()
        try:
            if kind == "pods":
                return self.state.pod(obj, deleted=deleted)
            if kind == "nodes":
                return self.state.node(obj, deleted=deleted)
            return Observations() if deleted else self.state.event(obj)
        except _PARSE_ERRORS as exc:
            self._bad(kind.rstrip("s"), exc)
            return Observations()
