"""The documentation's generated reference (docs/hooks/refgen.py) misses nothing: every metric
the product declares is on the metrics page with its labels, every setting and management
command of the apps on theirs, every public name on the API page."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from prometheus_client.metrics import MetricWrapperBase

import project.ops
import workers.metrics
import workqueue.metrics
from wqcore.conf import Settings

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("wqcore", "tenancy", "audit", "workqueue", "outbox", "workers", "project")


def _refgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("refgen", ROOT / "docs/hooks/refgen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("refgen", module)
    spec.loader.exec_module(module)
    return module


refgen = _refgen()


def test_every_module_that_declares_metrics_is_read_for_the_metrics_page() -> None:
    declaring = {
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        and re.search(r"\b(Counter|Gauge|Histogram|Summary|\w+MetricFamily)\(", path.read_text())
        and "prometheus_client" in path.read_text()
    }
    assert declaring == set(refgen.METRIC_SOURCES)


def test_the_metrics_page_names_each_declared_metric_with_its_type_and_labels() -> None:
    # The metric objects themselves (the gauges of /metrics/queue are made at scrape time).
    declared = {m["name"]: m for m in refgen.declared_metrics()}
    objects = [
        value
        for module in (workers.metrics, workqueue.metrics, project.ops)
        for value in vars(module).values()
        if isinstance(value, MetricWrapperBase)
    ]
    assert len(objects) >= 10
    for metric in objects:
        exposed = metric._name + "_total" if metric._type == "counter" else metric._name
        assert exposed in declared, f"{exposed} is not on the metrics page"
        assert declared[exposed]["labels"] == list(metric._labelnames), exposed
        assert declared[exposed]["type"] == metric._type, exposed
    page = refgen.metrics_page()
    for name in declared:
        assert f"| `{name}` |" in page


def test_the_reference_pages_name_every_setting_command_and_public_name() -> None:
    pages = refgen.pages()
    for name in Settings.model_fields:
        assert f"| `{name}` |" in pages["reference/settings.md"], name
    for name, _app in refgen._app_commands():
        assert f"\n## {name}\n" in pages["reference/commands.md"], name
    for module_name in refgen.PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert f"\n### {name}\n" in pages["reference/api.md"], f"{module_name}.{name}"
