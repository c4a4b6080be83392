"""Each app's face: what other apps may import of it, and nothing past it.

The queue has two faces: what a site calls (``workqueue.api``), pinned name by name, and what
the runtime calls (``workqueue.runtime``), every name of it used outside ``workqueue``. The audit
trail and the outbox have one each (``audit.api``, ``outbox.api``), pinned name by name. The
tenancy app and the ground floor (``wqcore``) serve every app above them with several modules,
listed here; their other modules are private. The apps stand in one order, each importing only
those below it, and none imports ``project/`` (the reference site on top, which may import
anything).

Migrations are exempt (a migration imports what it needed when it was written), and so are the
tests and benchmarks (they pin internals on purpose); the install test holds its site to the
faces a site may use.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from audit import api as audit_api
from outbox import api as outbox_api
from workers import testing
from workqueue import api, runtime

ROOT = Path(__file__).resolve().parents[2]
# The product's apps and the reference site, bottom up: each imports only those below it.
BOTTOM_UP = ("wqcore", "tenancy", "audit", "workqueue", "outbox", "workers", "project")
OUTSIDE_THE_QUEUE = tuple(app for app in BOTTOM_UP if app != "workqueue")
# The modules of each app that another app (or a site) may import; the site on top offers none.
FACES: dict[str, tuple[str, ...]] = {
    "wqcore": (
        "actor",
        # Each process's connections named by its role (the worker's, the sweep's, the web's).
        "appname",
        "arrays",
        "conf",
        "confview",
        "generics",
        "logs",
        "scope",
        "sqlfiles",
        "statements",
        "store",
        # The operator's long commands' progress line on a terminal.
        "terminal",
        "tracing",
    ),
    "tenancy": (
        "admin_fence",
        "contexts",
        "current",
        "exceptions",
        # The site's step after each migrate (the logins' grants on the product's tables).
        "grants",
        "membership",
        "middleware",
        "models",
        "modes",
        # Naming a tenant outside a request (workqueue.api's tenant and context).
        "naming",
        # The migration step that puts a tenant table under row-level security.
        "rls",
        # The read-only viewer's group (the admin's roles) and the support view.
        "roles",
        "scope",
        "services",
        "sessions",
        "support",
    ),
    "audit": ("api",),
    "workqueue": ("api", "runtime"),
    "outbox": ("api",),
    # What a site's own code and tests use (the runtime itself is run by its commands).
    "workers": (
        "testing",
        "schedules",
        "django_tasks.policy",
        "django_tasks.progress",
        "django_tasks.schedules",
        "django_tasks.workflows",
    ),
    "project": (),
}

SITE_FACE = [
    "Conflict",
    "InvalidPayload",
    "ItemStatus",
    "Kind",
    "NOT_DONE",
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
    "aparent_results",
    "aread_parents",
    "aresult_of",
    "aresults_of",
    "astatus_of",
    "cancel",
    "cancel_matching",
    "cancel_workflow",
    "context",
    "count_parents",
    "enqueue",
    "enqueue_many",
    "enqueue_workflow",
    "erase",
    "handles",
    "parent_results",
    "read_parents",
    "register",
    "result_of",
    "results_of",
    "status_of",
    "tenant",
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


def _is_module(dotted: str) -> bool:
    place = ROOT.joinpath(*dotted.split("."))
    return place.with_suffix(".py").is_file() or (place / "__init__.py").is_file()


def _imports(source: str) -> Iterator[tuple[int, str]]:
    """Each module an import loads, with its line, at any depth (a function's own imports
    too): ``from a.b import c`` loads ``a.b.c`` when that is a module, else ``a.b``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                named = f"{node.module}.{alias.name}"
                yield node.lineno, named if _is_module(named) else node.module


def _imports_of_other_apps() -> Iterator[tuple[str, str, str, str]]:
    """(where, importing app, imported app, module) for each import of another app of ours."""
    for path, source in _sources(*BOTTOM_UP).items():
        importer = path.relative_to(ROOT).parts[0]
        for line, module in _imports(source):
            app = module.split(".")[0]
            if app in BOTTOM_UP and app != importer:
                yield f"{path.relative_to(ROOT)}:{line}", importer, app, module


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
    "faults",
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


AUDIT_FACE = [
    "APPEND_ENTRIES",
    "COUNT_UNREDACTED",
    "REDACTED",
    "REDACT_ENTRIES",
    "AppendEntriesParams",
    "AuditEntry",
    "RedactParams",
    "UnredactedParams",
    "actor_names",
    "append",
]


def test_the_audit_face_is_these_names_and_each_is_there() -> None:
    assert sorted(audit_api.__all__) == sorted(AUDIT_FACE)
    for name in AUDIT_FACE:
        assert getattr(audit_api, name) is not None


OUTBOX_FACE = [
    "Lag",
    "OutboxRow",
    "OutboxStatus",
    "READ_LAG",
    "RelayResult",
    "emit",
    "purge_relayed",
    "read_lag",
    "relay_all",
    "relay_pending",
]


def test_the_outbox_face_is_these_names_and_each_is_there() -> None:
    assert sorted(outbox_api.__all__) == sorted(OUTBOX_FACE)
    for name in OUTBOX_FACE:
        assert getattr(outbox_api, name) is not None


def test_each_face_module_is_there() -> None:
    missing = [
        f"{app}.{module}"
        for app, modules in FACES.items()
        for module in modules
        if not _is_module(f"{app}.{module}")
    ]
    assert missing == [], f"named a face but no module: {missing}"


def _on_face(module: str) -> bool:
    app, _, rest = module.partition(".")
    return rest in FACES[app]


def _use(app: str) -> str:
    if not FACES[app]:
        return f"nothing of {app} (the site on top: no app imports it)"
    if len(FACES[app]) == 1:
        return f"{app}.{FACES[app][0]}"
    return f"one of {app}.{{{', '.join(FACES[app])}}}"


def test_no_app_reaches_into_another_past_its_face() -> None:
    deep = [
        f"{where} imports {module}, use {_use(app)}"
        for where, importer, app, module in _imports_of_other_apps()
        if importer != "project" and not _on_face(module)
    ]
    assert deep == [], "an app reaches past another's face:\n" + "\n".join(deep)


def test_each_app_imports_only_the_apps_below_it() -> None:
    upward = [
        f"{where} imports {module}: {importer} stands below {app} ({' <- '.join(BOTTOM_UP)})"
        for where, importer, app, module in _imports_of_other_apps()
        if BOTTOM_UP.index(app) > BOTTOM_UP.index(importer)
    ]
    assert upward == [], "an app imports one above it:\n" + "\n".join(upward)
