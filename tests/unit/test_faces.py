"""The queue's two faces: what a site calls (``workqueue.api``), pinned name by name, and what
the runtime calls (``workqueue.runtime``), every name of it used outside ``workqueue``; no
other app reaches past them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from workers import testing
from workqueue import api, runtime

ROOT = Path(__file__).resolve().parents[2]
# The product's apps and the reference site, each a package at the top of the repository.
OUTSIDE_THE_QUEUE = ("wqcore", "tenancy", "audit", "outbox", "workers", "project")

SITE_FACE = [
    "Conflict",
    "InvalidPayload",
    "Kind",
    "NewItem",
    "NotFound",
    "Outcome",
    "Payload",
    "PermanentError",
    "RetryPolicy",
    "RetryableError",
    "Run",
    "Status",
    "WorkItem",
    "WorkQueueError",
    "Workflow",
    "acancel",
    "acancel_matching",
    "acancel_workflow",
    "acount_parents",
    "aenqueue",
    "aenqueue_many",
    "aenqueue_workflow",
    "aread_parents",
    "cancel",
    "cancel_matching",
    "cancel_workflow",
    "count_parents",
    "enqueue",
    "enqueue_many",
    "enqueue_workflow",
    "handles",
    "read_parents",
    "register",
    "work_dead_lettered",
    "work_done",
    "work_failed",
    "work_retried",
]


def _sources(*packages: str) -> dict[Path, str]:
    return {
        path: path.read_text()
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _imported_modules(source: str) -> list[str]:
    """Every module an import names, at any depth (a function's own imports too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_the_site_face_is_these_names_and_each_is_there() -> None:
    assert sorted(api.__all__) == sorted(SITE_FACE)
    for name in SITE_FACE:
        assert getattr(api, name) is not None


TESTING_FACE = [
    "DrainFailed",
    "Drained",
    "Ran",
    "assert_enqueued",
    "context",
    "drain",
    "enqueued",
    "inline",
    "perform",
    "refute_enqueued",
    "tenant",
]


def test_the_testing_module_beside_it_is_these_names() -> None:
    assert sorted(testing.__all__) == sorted(TESTING_FACE)
    for name in TESTING_FACE:
        assert getattr(testing, name) is not None


def test_the_runtime_face_holds_the_site_face_and_only_what_the_runtime_uses() -> None:
    assert set(api.__all__) <= set(runtime.__all__)
    own = sorted(set(runtime.__all__) - set(api.__all__))
    text = "\n".join(_sources(*OUTSIDE_THE_QUEUE).values())
    unused = [name for name in own if not re.search(rf"\b{name}\b", text)]
    assert unused == [], f"on the runtime face but used by nothing outside workqueue: {unused}"


def test_no_app_reaches_into_the_queue_past_its_faces() -> None:
    deep = []
    for path, source in _sources(*OUTSIDE_THE_QUEUE).items():
        for module in _imported_modules(source):
            parts = module.split(".")
            if parts[0] == "workqueue" and len(parts) > 1 and parts[1] not in ("api", "runtime"):
                deep.append(f"{path.relative_to(ROOT)}: {module}")
    assert deep == []
