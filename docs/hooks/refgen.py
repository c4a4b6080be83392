"""The reference pages, made from the code that holds each fact, and stored under docs/ so the
docs read where they are stored (``bin/docs generate`` writes them; ``bin/docs check``, in CI,
fails when one is stale; the docs hook builds the site from fresh ones;
tests/unit/test_docs_reference.py checks they miss nothing):

- ``reference/settings.md``: every ``WORKQUEUE`` setting, its type, default, bounds and
  description, as ``wqcore/conf.py`` declares them, grouped by that module's section comments;
- ``reference/commands.md``: each management command of the apps, its ``--help`` (and each
  subcommand's) with the defaults in effect;
- ``reference/metrics.md``: every Prometheus metric the apps declare, its type, labels and
  help, and the endpoint that exports it (read from the sources, so the gauges computed at
  scrape time are there too);
- ``reference/api.md``: the names of ``workqueue.api``, ``workers.testing`` (and its
  ``faults``) and ``outbox.api``,
  each with its signature and docstring.
"""

from __future__ import annotations

import ast
import enum
import inspect
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parents[2]

# The screenshots the pages show, as the browser tests (tests/e2e/) name them.
SCREENSHOTS = (
    "gauges-charts-light.png",
    "01-admin.png",
    "02-dead-letters.png",
    "03-dead-letter.png",
    "04-confirm-requeue.png",
    "07-gauges.png",
    "10-grouped.png",
    "11-confirm-by-filter.png",
    "console-items-search-light.png",
    "console-items-scan-warning-dark.png",
    "console-workers-dark.png",
    "console-charts-light.png",
)

# The distribution's apps, as a site installs them (the orgs tenancy's app too: its commands).
APPS = ["tenancy", "audit", "workqueue", "outbox", "workers", "workers.django_tasks"]
# The packages whose sources declare metrics, and what exports each module's.
METRIC_SOURCES = {
    "workers/metrics.py": "each worker's `/metrics`",
    "workqueue/metrics.py": "the process that made the transition: a worker's `/metrics`, or "
    "the web's for the admin's and the API's",
    "workers/gauges.py": "the web's `/metrics/queue` (read from the database when scraped)",
    "project/ops.py": "the web's `/metrics` (the reference site's middleware, `project/ops.py`)",
}
PUBLIC_MODULES = ("workqueue.api", "workers.testing", "workers.testing.faults", "outbox.api")
GENERATED_NOTE = (
    "<!-- Generated from the code (docs/hooks/refgen.py, bin/docs generate): edit the code, "
    "not this page. -->\n\n"
)


# The repository's own Markdown shown in the site as it is (each app's README, the benchmarks'
# method and diary): the file stays the one home of its text.
# A Markdown link: its label, its target, its anchor.
LINK = re.compile(r"\[([^\]]+)\]\(([^)#\s]*)(#[^)\s]*)?\)")
REPO_PAGES = {
    "wqcore/README.md": "internals/wqcore.md",
    "tenancy/README.md": "internals/tenancy.md",
    "audit/README.md": "internals/audit.md",
    "workqueue/README.md": "internals/workqueue.md",
    "outbox/README.md": "internals/outbox.md",
    "workers/README.md": "internals/workers.md",
    "workers/django_tasks/README.md": "internals/django-tasks.md",
    "bench/systems/README.md": "internals/bench-workloads.md",
    "bench/RESULTS.md": "explanation/bench-results.md",
}


def reference_pages() -> dict[str, str]:
    """The pages made from the code (stored under docs/, kept fresh by ``bin/docs check``)."""
    setup_django()
    return {
        "reference/settings.md": settings_page(),
        "reference/commands.md": commands_page(),
        "reference/metrics.md": metrics_page(),
        "reference/api.md": api_page(),
    }


def pages() -> dict[str, str]:
    """Each generated page's path under docs/ and its Markdown: the reference pages, and the
    repository's own Markdown (only in the site: docs/ links to those files where they are)."""
    made = reference_pages()
    for source, uri in REPO_PAGES.items():
        made[uri] = repo_page(source, uri)
    return made


def site_links(markdown: str, uri: str) -> str:
    """A docs page's Markdown for the site: a link to a repository file shown in the site (an
    app's README) points at its page there."""
    here = ROOT / "docs" / os.path.dirname(uri)

    def relink(match: re.Match[str]) -> str:
        label, target, anchor = match[1], match[2], match[3] or ""
        if not target or re.match(r"[a-z]+:", target):
            return match[0]
        page = REPO_PAGES.get(os.path.relpath((here / target).resolve(), ROOT))
        if page is None:
            return match[0]
        return f"[{label}]({os.path.relpath(page, os.path.dirname(uri))}{anchor})"

    return LINK.sub(relink, markdown)


def stale(write: bool) -> list[str]:
    """The stored reference pages that differ from what the code makes (written when
    ``write``)."""
    found = []
    for uri, text in reference_pages().items():
        path = ROOT / "docs" / uri
        if not path.exists() or path.read_text() != text:
            found.append(uri)
            if write:
                path.write_text(text)
    return found


def repo_page(source: str, uri: str) -> str:
    """A repository file as a page: a link to another file shown in the site points at its
    page; a link to any other file of the repository becomes its text (the site has no copy)."""
    text = (ROOT / source).read_text()
    here = (ROOT / source).parent

    def relink(match: re.Match[str]) -> str:
        label, target, anchor = match[1], match[2], match[3] or ""
        if re.match(r"[a-z]+:", target):
            return match[0]
        if not target:  # an anchor of this page
            return match[0]
        path = os.path.relpath((here / target).resolve(), ROOT)
        page = REPO_PAGES.get(path) or (path[5:] if path.startswith("docs/") else None)
        if page is None:
            return label
        return f"[{label}]({os.path.relpath(page, os.path.dirname(uri))}{anchor})"

    note = f"<!-- The repository's {source}, shown as it is: edit that file. -->\n\n"
    body = LINK.sub(relink, text)
    return note + body


def setup_django() -> None:
    """Django configured as a fresh site with every app and every default: what ``--help``
    prints is then the defaults, not this machine's environment. Nothing connects."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps --help to this width
    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            *APPS,
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "docs"}},
        WORKQUEUE={},
        TASKS={"default": {"BACKEND": "workers.django_tasks.backend.WorkQueueBackend"}},
        USE_TZ=True,
    )
    django.setup()


# -- settings -------------------------------------------------------------------------------------


def _sections() -> dict[str, str]:
    """Each setting's section, from the ``# -- name ---`` comments of ``Settings``."""
    source = (ROOT / "wqcore" / "conf.py").read_text()
    found: dict[str, str] = {}
    section = ""
    for line in source.splitlines():
        head = re.match(r"\s+# -- (.+?) -+$", line)
        if head:
            section = head[1]
            continue
        field = re.match(r"    ([A-Z][A-Z0-9_]+): ", line)
        if field and section:
            found[field[1]] = section
    return found


def _type_name(annotation: Any) -> str:
    """``int | None``, ``dict[str, int]``, ``Literal['none', 'transaction']``: as written."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation))


def _set_by_reference_site() -> set[str]:
    """The names ``project/settings.py`` passes to ``workqueue_settings(...)`` itself."""
    tree = ast.parse((ROOT / "project" / "settings.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "workqueue_settings":
            return {k.arg for k in node.keywords if k.arg}
    return set()


def _bounds(field: Any) -> str:
    parts = []
    for rule in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(rule, attr, None)
            if value is not None:
                parts.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
    return ", ".join(parts)


def settings_page() -> str:
    from project.environment import SITE_ONLY, env_name
    from wqcore.conf import Settings

    sections = _sections()
    out = [
        "# Settings\n\n",
        GENERATED_NOTE,
        (
            "Every setting is one name of the `WORKQUEUE` dict in your site's settings; a site "
            'writes only what it changes (`WORKQUEUE = {"LANES": ["default", "emails"]}`). '
            "A name that does not exist, or a value of the wrong type or out of its bounds, stops "
            "`manage.py` with one line naming it "
            "(`WORKQUEUE['SWEEP_BACTH']: no such setting (did you mean 'SWEEP_BATCH'?)`). "
            "Units are in the names: `_S` seconds, `_MS` milliseconds, `_BYTES` bytes. "
            "`manage.py runworker --help` and `manage.py sweep --help` print the values in effect. "
            "Tests change them with `override_settings(WORKQUEUE={...})`.\n\n"
            "The reference site (`project/settings.py`) fills the dict from its environment: the "
            "last column names the variable each setting is read from there (a site of your own "
            "writes the dict; none of these variables means anything to it).\n"
        ),
    ]
    current = None
    for name, field in Settings.model_fields.items():
        section = sections.get(name, "other")
        if section != current:
            current = section
            out.append(f"\n## {section[0].upper()}{section[1:]}\n\n")
            out.append(
                "| setting | type | default | what it is for | reference site |\n"
                "|---|---|---|---|---|\n"
            )
        fixed = name in SITE_ONLY or name in _set_by_reference_site()
        variable = "(its settings)" if fixed else f"`{env_name(name)}`"
        default = field.get_default(call_default_factory=True)
        bounds = _bounds(field)
        what = (field.description or "").replace("|", "\\|")
        if bounds:
            what += f" ({bounds})"
        out.append(
            f"| `{name}` | `{_type_name(field.annotation)}` | `{default!r}` | {what} "
            f"| {variable} |\n"
        )
    return "".join(out)


# -- management commands --------------------------------------------------------------------------


def _app_commands() -> Iterator[tuple[str, str]]:
    from django.core.management import get_commands

    for name, app in sorted(get_commands().items()):
        if app in APPS:
            yield name, app


def _subparsers(parser: Any) -> Iterator[tuple[str, Any]]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def commands_page() -> str:
    from django.core.management import load_command_class

    commands = list(_app_commands())
    out = [
        "# Management commands\n\n",
        GENERATED_NOTE,
        (
            "Each command's `--help`, as a fresh site with every default prints it (yours prints "
            "the values in effect).\n\n"
        ),
    ]
    out += [f"- [`{name}`](#{name}) ({app})\n" for name, app in commands]
    for name, app in commands:
        parser = load_command_class(app, name).create_parser("manage.py", name)
        out.append(f"\n## {name}\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        out += _subcommand_help(parser, name)
    return "".join(out)


def _subcommand_help(parser: Any, prefix: str) -> Iterator[str]:
    """Each subcommand's --help, and theirs in turn (``queue limit set``)."""
    for sub, subparser in _subparsers(parser):
        name = f"{prefix} {sub}"
        yield f"\n### {name}\n\n```text\n{subparser.format_help().rstrip()}\n```\n"
        yield from _subcommand_help(subparser, name)


# -- metrics --------------------------------------------------------------------------------------

_METRIC_TYPES = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "GaugeMetricFamily": "gauge",
    "CounterMetricFamily": "counter",
    "HistogramMetricFamily": "histogram",
}


def _literal(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def declared_metrics() -> list[dict[str, Any]]:
    """Every metric constructed with a literal ``workqueue_`` name in the metric sources:
    its name as exported, type, labels, help and source."""
    found = []
    for source in METRIC_SOURCES:
        tree = ast.parse((ROOT / source).read_text())
        # Labels named by a variable (labels = ["scope", "target"]) in the same file.
        lists = {
            target.id: _literal(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.List)
            and _literal(node.value) is not None
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.id if isinstance(node.func, ast.Name) else None
            if func not in _METRIC_TYPES or not node.args:
                continue
            name = _literal(node.args[0])
            if not isinstance(name, str) or not name.startswith("workqueue_"):
                continue
            kind = _METRIC_TYPES[func]
            words = {k.arg: k.value for k in node.keywords}
            given = words.get("labels") or words.get("labelnames")
            labels = lists.get(given.id) if isinstance(given, ast.Name) else _literal(given)
            if labels is None and func in ("Counter", "Gauge", "Histogram", "Summary"):
                labels = _literal(node.args[2]) if len(node.args) > 2 else None
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"  # the exposition's name (the family adds the suffix)
            found.append(
                {
                    "name": name,
                    "type": kind,
                    "labels": list(labels or []),
                    "help": _literal(node.args[1]) or _literal(words.get("documentation")),
                    "source": source,
                }
            )
    return sorted(found, key=lambda m: (list(METRIC_SOURCES).index(m["source"]), m["name"]))


def metrics_page() -> str:
    out = [
        "# Metrics\n\n",
        GENERATED_NOTE,
        (
            "Every metric the queue exports, read from the code that declares it. Each number is "
            "exported by exactly one endpoint, so a `sum()` across targets is right; which to "
            "scrape, and the alerts worth having: [Metrics and alerts](../howto/metrics.md).\n"
        ),
    ]
    current = None
    for metric in declared_metrics():
        if metric["source"] != current:
            current = metric["source"]
            out.append(f"\n## From {METRIC_SOURCES[current]}\n\n")
            out.append("| metric | type | labels | what it counts |\n|---|---|---|---|\n")
        labels = ", ".join(f"`{label}`" for label in metric["labels"]) or "none"
        what = (metric["help"] or "").replace("|", "\\|")
        out.append(f"| `{metric['name']}` | {metric['type']} | {labels} | {what} |\n")
    return "".join(out)


# -- the public API -------------------------------------------------------------------------------


def _markdown(doc: str) -> str:
    """A docstring as Markdown: ``code`` in single backticks, a ``::`` block as code."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1])
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            out += ["", "```python", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line)
        i += 1
    return re.sub(r"``(.+?)``", r"`\1`", "\n".join(out))


def _annotation(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return _type_name(annotation)


def _signature(obj: Any) -> str | None:
    """``(ctx: OpContext, *item: Any, **fields: Any) -> Plan[...]``: each parameter's type as
    written (a field's ``Annotated`` storage rule left out), its default as Python writes it."""
    target = inspect.unwrap(obj) if not inspect.isclass(obj) else obj
    try:
        try:
            signature = inspect.signature(target, eval_str=True)
        except NameError:  # a name imported for the type checker only
            signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = []
    for param in signature.parameters.values():
        text = str(
            param.replace(annotation=inspect.Parameter.empty, default=inspect.Parameter.empty)
        )
        if param.annotation is not inspect.Parameter.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not inspect.Parameter.empty:
            text += f" = {param.default!r}"
        params.append(text)
    text = f"({', '.join(params)})"
    if signature.return_annotation not in (inspect.Signature.empty, None, "None"):
        # A statement's plan (Plan[X]) is what the call returns when run: X (awaited, for
        # the async twin).
        returned = re.sub(r"^Plan\[(.*)\]$", r"\1", _annotation(signature.return_annotation))
        text += f" -> {returned}"
    return text


def _own_doc(obj: Any) -> str | None:
    """The object's own docstring: not one inherited (an Enum's), nor a dataclass's made-up
    ``Name(field: type, ...)``."""
    doc = obj.__doc__ if not inspect.isclass(obj) else obj.__dict__.get("__doc__")
    if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):
        return None
    return inspect.cleandoc(doc)


def _kind(obj: Any) -> str:
    from django.dispatch import Signal

    if isinstance(obj, Signal):
        return "signal"
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception"
        return "class"
    return "function"


def api_page() -> str:
    import importlib

    out = [
        "# Python API\n\n",
        GENERATED_NOTE,
        (
            "What a site's code imports: `workqueue.api` (enqueue, kinds and handlers, cancel, "
            "results, workflows, signals, errors), `workers.testing` for the site's own tests, and "
            "`outbox.api` for work that follows a domain write. A test pins these names; nothing "
            "else is public. Each call that touches the database comes in a pair: the sync one "
            "joins the caller's transaction, the async one (`a...`) runs on the queue's own "
            "connections.\n"
        ),
    ]
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        out.append(f"\n## `{module_name}`\n\n{_markdown(inspect.getdoc(module) or '')}\n")
        names = set(module.__all__)
        # Each async twin (aenqueue) right after its sync call (enqueue).
        for name in sorted(names, key=lambda n: (n[1:] if n[1:] in names else n, n)):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                anchor = obj.__name__.replace(".", "")  # the heading's id, as mkdocs makes it
                out.append(f"\n### {name}\n\n*module*: [`{obj.__name__}`](#{anchor})\n")
                continue
            signature = _signature(obj) if _kind(obj) in ("function", "class") else None
            out.append(f"\n### {name}\n\n")
            twin = name.startswith("a") and name[1:] in names
            head = f"{'async ' if twin else ''}{module_name}.{name}{signature or ''}"
            out.append(f"```python\n{head}\n```\n\n*{_kind(obj)}*")
            doc = None if _kind(obj) == "signal" else _own_doc(obj)
            if isinstance(obj, type) and issubclass(obj, enum.Enum):
                members = ", ".join(f"`{m.name}`" for m in obj)
                doc = f"{doc}\n\nMembers: {members}." if doc else f"Members: {members}."
            out.append(f"\n\n{_markdown(doc)}\n" if doc else "\n")
    return "".join(out)


if __name__ == "__main__":  # python docs/hooks/refgen.py [write | check]: see bin/docs --help
    action = sys.argv[1] if len(sys.argv) > 1 else "print"
    if action == "print":
        for path, text in pages().items():
            print(f"==> {path}\n{text}")
    elif action in ("write", "check"):
        changed = stale(write=action == "write")
        for uri in changed:
            print(f"docs/{uri}: {'written' if action == 'write' else 'stale'}")
        if changed and action == "check":
            print("the stored reference pages are stale: run bin/docs generate", file=sys.stderr)
            sys.exit(1)
    else:
        sys.exit(f"refgen.py takes print, write or check, not {action!r}")
