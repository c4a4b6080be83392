"""The fault kit's examples on the testing page (docs/howto/testing.md) run as written: the
page's handler module is written to a package of its own (the held worker's process imports
it from there too), and each of the page's test functions runs against this test database,
with a tenant's context for its ``ctx``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenancy.contexts import OpContext
from tests.install.pages import code_blocks, file_parts

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "testing.md"
SECTION = "## Faults: what the queue guarantees, checked on your handlers"


def _blocks(path: str) -> str:
    """Every part of the section's blocks that the page names ``path``, in order, as one file."""
    blocks = [text for language, text in code_blocks(PAGE, SECTION) if language == "python"]
    return "\n\n".join(
        code for block in blocks for named, code in file_parts(block) if named == path
    )


WORK = _blocks("myapp/work.py")
TESTS: dict[str, Any] = {}
exec(compile(_blocks("myapp/tests/test_faults.py"), str(PAGE), "exec"), TESTS)
EXAMPLES = sorted(name for name in TESTS if name.startswith("test_"))


@pytest.fixture(scope="module")
def documented_handlers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("docs-site")
    (root / "myapp").mkdir()
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "work.py").write_text(WORK)
    sys.path.insert(0, str(root))
    try:
        importlib.import_module("myapp.work")
        yield
    finally:
        sys.path.remove(str(root))


def test_the_page_shows_a_passing_and_a_caught_example_of_each_fault() -> None:
    faulted = ("kill_mid_handler", "expire_lease", "stale_holder", "cut_mid_settle")
    for fault in (*faulted, "raise_after_side_effect"):
        uses = [n for n in EXAMPLES if f"faults.{fault}(" in _source(n)]
        assert any("TWICE" in _source(n) for n in uses), fault
        assert any("TWICE" not in _source(n) for n in uses), fault
    assert len(EXAMPLES) == 10


def _source(name: str) -> str:
    code = _blocks("myapp/tests/test_faults.py")
    start = code.index(f"def {name}(")
    end = code.find("\ndef ", start + 1)
    return code[start : end if end > 0 else None]


@pytest.mark.usefixtures("documented_handlers")
@pytest.mark.parametrize("name", EXAMPLES)
def test_the_pages_example_runs(name: str, ctx: OpContext) -> None:
    TESTS[name](ctx)
