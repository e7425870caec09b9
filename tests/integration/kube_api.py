"""The Kubernetes API over HTTP, for tests: a small emulator the official `kubernetes` client
talks to through a generated kubeconfig, answering real API JSON (no kube-apiserver can be
installed here, and a Python-level mock of the client would not test the client).

Resource-generic, like the real server: any `/api/v1[/namespaces/NS]/PLURAL[/NAME]` or
`/apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]` path supports
- GET one (404 NotFound), list (`labelSelector` with `k=v`, `k!=v`, `k`; `fieldSelector`
  `path=value` on any dotted field: `metadata.name=`, an Event's `involvedObject.name=`,
  `reason=`), and watch (`?watch=true`: chunked JSON lines of
  ADDED/MODIFIED/DELETED from `resourceVersion`, ending after `timeoutSeconds`; a
  resourceVersion older than the last `compact` gets the ERROR event of 410 Expired, as from
  a real API server whose etcd history was compacted);
- POST create (409 AlreadyExists), PUT replace (409 Conflict when `metadata.resourceVersion`
  is stale, 404 when absent), PATCH (JSON merge patch), DELETE.
Objects get a uid, creationTimestamp and a cluster-wide increasing resourceVersion, so
ScaledObjects (keda.sh/v1alpha1), Deployments, ConfigMaps and Events all behave alike.

Tests seed objects with `add`, read what the code wrote with `objects`/`get`, count requests
with `requests`, inject failures with `fail_next` (e.g. a 409 that a concurrent writer would
cause, or a 500; `clear_failures` drops those left), forget the event history with `compact`
and cut open watches with `end_watches` (an API server restart: clients resume, or relist on
410).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)
KINDS = {
    "configmaps": "ConfigMap",
    "events": "Event",
    "deployments": "Deployment",
    "scaledobjects": "ScaledObject",
    "pods": "Pod",
    "secrets": "Secret",
    "statefulsets": "StatefulSet",
}

Resource = tuple[str, str]
"""(apiVersion, plural), e.g. ("keda.sh/v1alpha1", "scaledobjects")."""


def scaled_object(
    namespace: str,
    name: str,
    *,
    address: str = "scaler:9090",
    threshold: str = "5",
    query: str = "sum(x)",
    before: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """A ScaledObject whose one external trigger points at `address`, after `before`'s."""
    meta = {"scalerAddress": address, "query": query, "threshold": threshold}
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "scaleTargetRef": {"name": name},
            "triggers": [*before, {"type": "external", "metadata": meta}],
        },
    }


@dataclass
class _Failure:
    method: str
    path: str
    code: int
    count: int


@dataclass
class _State:
    objects: dict[tuple[Resource, str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[int, Resource, str, dict[str, Any]]] = field(default_factory=list)
    revision: int = 100
    requests: list[tuple[str, str]] = field(default_factory=list)
    failures: list[_Failure] = field(default_factory=list)
    compacted: int = 0
    """Watches from a resourceVersion below this get 410 Expired."""
    generation: int = 0
    """Bumped by end_watches: open watch streams end."""


class KubeAPI:
    """A running emulator on an ephemeral loopback port (use as a context manager)."""

    def __init__(self) -> None:
        self._state = _State()
        self._changed = threading.Condition()
        handler = type("Handler", (_Handler,), {"api": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> KubeAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        """A kubeconfig pointing at this server (JSON is valid YAML)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "tester", "namespace": namespace},
                }
            ],
            "current-context": "emulator",
        }
        path.write_text(json.dumps(config))
        return path

    # -- what tests use ----------------------------------------------------------------------

    def add(self, obj: dict[str, Any], *, plural: str | None = None) -> dict[str, Any]:
        """Create `obj` as a client would (plural guessed from its kind when not given)."""
        kind = str(obj["kind"])
        plural = plural or next(p for p, k in KINDS.items() if k == kind)
        namespace = str(obj.get("metadata", {}).get("namespace", ""))
        code, body = self._create((str(obj["apiVersion"]), plural), namespace, obj)
        assert code == 201, body
        return body

    def objects(self, api_version: str, plural: str, namespace: str = "") -> list[dict[str, Any]]:
        with self._changed:
            return [
                copy.deepcopy(o)
                for (res, ns, _), o in sorted(self._state.objects.items())
                if res == (api_version, plural) and (not namespace or ns == namespace)
            ]

    def get(self, api_version: str, plural: str, namespace: str, name: str) -> dict[str, Any]:
        with self._changed:
            return copy.deepcopy(self._state.objects[((api_version, plural), namespace, name)])

    def delete(self, api_version: str, plural: str, namespace: str, name: str) -> None:
        code, body = self._delete((api_version, plural), namespace, name)
        assert code == 200, body

    def tamper(self, obj: dict[str, Any], *, plural: str) -> None:
        """Overwrite a stored object as an outside hand would (immutable or not)."""
        meta = obj["metadata"]
        res = (str(obj["apiVersion"]), plural)
        code, body = self._replace(res, meta.get("namespace", ""), meta["name"], obj, force=True)
        assert code == 200, body

    def requests(self, method: str | None = None, contains: str = "") -> list[tuple[str, str]]:
        with self._changed:
            return [
                (m, p)
                for m, p in self._state.requests
                if (method is None or m == method) and contains in p
            ]

    def fail_next(self, method: str, path_contains: str, code: int, count: int = 1) -> None:
        """Answer the next `count` matching requests with `code` (409 Conflict, 500...)."""
        with self._changed:
            self._state.failures.append(_Failure(method, path_contains, code, count))

    def clear_failures(self) -> None:
        """Forget the failures `fail_next` still had to inject."""
        with self._changed:
            self._state.failures.clear()

    def compact(self) -> None:
        """Forget the event history so far, as etcd compaction does."""
        with self._changed:
            self._state.compacted = self._state.revision
            self._state.events.clear()
            self._changed.notify_all()

    def end_watches(self) -> None:
        """End every open watch stream now (their clients see the response end)."""
        with self._changed:
            self._state.generation += 1
            self._changed.notify_all()

    # -- the API -----------------------------------------------------------------------------

    def _record(self, method: str, path: str) -> tuple[int | None, int]:
        """(the injected failure code or None, the watch generation) at the moment the request
        counts in `requests()`: a watch the test has counted is one `end_watches()` ends."""
        with self._changed:
            self._state.requests.append((method, path))
            generation = self._state.generation
            for failure in self._state.failures:
                if failure.count > 0 and failure.method == method and failure.path in path:
                    failure.count -= 1
                    return failure.code, generation
        return None, generation

    def _bump(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        """Called with the lock held: a new resourceVersion and a watch event."""
        self._state.revision += 1
        obj["metadata"]["resourceVersion"] = str(self._state.revision)
        self._state.events.append((self._state.revision, res, kind, copy.deepcopy(obj)))
        self._changed.notify_all()

    def _create(self, res: Resource, ns: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if "name" not in meta and "generateName" in meta:
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        name = str(meta.get("name", ""))
        if not name:
            return 422, _status(422, "Invalid", "metadata.name: Required value")
        if ns:
            meta["namespace"] = ns
        obj.setdefault("apiVersion", res[0])
        obj.setdefault("kind", KINDS.get(res[1], res[1].title()))
        with self._changed:
            if (res, ns, name) in self._state.objects:
                return 409, _status(409, "AlreadyExists", f'{res[1]} "{name}" already exists')
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._state.objects[(res, ns, name)] = obj
            self._bump(res, "ADDED", obj)
            return 201, copy.deepcopy(obj)

    def _replace(
        self, res: Resource, ns: str, name: str, obj: dict[str, Any], *, force: bool = False
    ) -> tuple[int, dict[str, Any]]:
        with self._changed:
            old = self._state.objects.get((res, ns, name))
            if old is None:
                return 404, _status(404, "NotFound", f'{res[1]} "{name}" not found')
            if old.get("immutable") and not force:
                return 422, _status(422, "Invalid", f'{res[1]} "{name}": field is immutable')
            given = obj.get("metadata", {}).get("resourceVersion")
            if given and given != old["metadata"]["resourceVersion"]:
                return 409, _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {res[1]} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                )
            new = copy.deepcopy(obj)
            meta = new.setdefault("metadata", {})
            for kept in ("uid", "creationTimestamp", "namespace", "name"):
                meta[kept] = old["metadata"][kept] if kept in old["metadata"] else meta.get(kept)
            new.setdefault("apiVersion", old["apiVersion"])
            new.setdefault("kind", old["kind"])
            self._state.objects[(res, ns, name)] = new
            self._bump(res, "MODIFIED", new)
            return 200, copy.deepcopy(new)

    def _patch(
        self, res: Resource, ns: str, name: str, patch: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        with self._changed:
            old = self._state.objects.get((res, ns, name))
            if old is None:
                return 404, _status(404, "NotFound", f'{res[1]} "{name}" not found')
            merged = _merge(copy.deepcopy(old), patch)
            merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._replace(res, ns, name, merged)

    def _delete(self, res: Resource, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        with self._changed:
            old = self._state.objects.pop((res, ns, name), None)
            if old is None:
                return 404, _status(404, "NotFound", f'{res[1]} "{name}" not found')
            self._bump(res, "DELETED", old)
            return 200, _status(200, "", "deleted") | {"status": "Success"}

    def _list(self, res: Resource, ns: str, query: dict[str, str]) -> dict[str, Any]:
        with self._changed:
            items = [
                copy.deepcopy(o)
                for (r, n, _), o in sorted(self._state.objects.items())
                if r == res and (not ns or n == ns) and _selected(o, query)
            ]
            revision = str(self._state.revision)
        kind = KINDS.get(res[1], res[1].title())
        return {
            "apiVersion": res[0],
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": revision},
            "items": items,
        }

    def _watch(
        self, res: Resource, ns: str, query: dict[str, str], generation: int
    ) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + float(query.get("timeoutSeconds", "30"))
        since = int(query.get("resourceVersion") or 0)
        with self._changed:
            compacted = self._state.compacted
        if since and since < compacted:
            message = f"too old resource version: {since} ({compacted})"
            yield {"type": "ERROR", "object": _status(410, "Expired", message)}
            return
        if not since:  # the list and its revision are read together: nothing falls between
            listed = self._list(res, ns, query)
            since = int(listed["metadata"]["resourceVersion"])
            for obj in listed["items"]:
                yield {"type": "ADDED", "object": obj}
        while time.monotonic() < deadline:
            with self._changed:
                if self._state.generation != generation:
                    return
                fresh = [e for e in self._state.events if e[0] > since and e[1] == res]
                if not fresh:
                    self._changed.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                    continue
            for revision, _, kind, obj in fresh:
                since = revision
                if (not ns or obj["metadata"].get("namespace") == ns) and _selected(obj, query):
                    yield {"type": kind, "object": obj}


class _Handler(BaseHTTPRequestHandler):
    api: KubeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        injected, generation = self.api._record(method, self.path)
        if injected is not None:
            reason = {409: "Conflict", 404: "NotFound", 403: "Forbidden"}.get(injected, "Internal")
            self._send(injected, _status(injected, reason, f"injected {injected} for the test"))
            return
        match = _PATH.match(url.path)
        if match is None:
            self._send(404, _status(404, "NotFound", f"the server could not find {url.path}"))
            return
        api_version = match["core"] or f"{match['group']}/{match['version']}"
        res: Resource = (api_version, match["plural"])
        ns, name = match["ns"] or "", match["name"]
        body: dict[str, Any] = json.loads(raw) if raw else {}
        if method == "GET" and name is None and query.get("watch", "").lower() in ("true", "1"):
            self._stream(self.api._watch(res, ns, query, generation))
            return
        if method == "GET":
            if name is None:
                self._send(200, self.api._list(res, ns, query))
                return
            with self.api._changed:
                found = self.api._state.objects.get((res, ns, name))
                found = copy.deepcopy(found) if found is not None else None
            if found is None:
                self._send(404, _status(404, "NotFound", f'{res[1]} "{name}" not found'))
            else:
                self._send(200, found)
        elif method == "POST" and name is None:
            self._send(*self.api._create(res, ns, body))
        elif method == "PUT" and name is not None:
            self._send(*self.api._replace(res, ns, name, body))
        elif method == "PATCH" and name is not None:
            self._send(*self.api._patch(res, ns, name, body))
        elif method == "DELETE" and name is not None:
            self._send(*self.api._delete(res, ns, name))
        else:
            self._send(405, _status(405, "MethodNotAllowed", f"{method} {url.path}"))

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value
    return target


def _selected(obj: dict[str, Any], query: dict[str, str]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, query.get("labelSelector", "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        key, value = term.replace("==", "=").split("=", 1)
        found: Any = obj
        for part in key.split("."):  # metadata.name, involvedObject.name, reason...
            found = found.get(part) if isinstance(found, dict) else None
        if found != value:
            return False
    return True
