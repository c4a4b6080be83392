"""The distribution says where its documentation is: the source distribution carries docs/ as
the repository stores it (every page, the reference pages among them; no screenshot the
browser test wrote), and its long description (the README, also the wheel's) points there."""

from __future__ import annotations

import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from tests.install.conftest import ROOT, run

pytestmark = pytest.mark.slow


def _build_sdist(work: Path) -> Path:
    """The sdist, built from a copy of the tree as pip's build isolation would (setuptools
    installed apart, the build backend called on the copy)."""
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", ".pgdata*", "bench", "tests", "build", "*.egg-info", "__pycache__"
        ),
    )
    backend = work / "backend"
    run(sys.executable, "-m", "pip", "install", "-q", "--target", backend, "setuptools>=69")
    run(
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(backend)!r});"
        "from setuptools import build_meta; build_meta.build_sdist('dist')",
        cwd=source,
    )
    [sdist] = (source / "dist").glob("*.tar.gz")
    return sdist


def test_the_sdist_carries_the_docs_and_its_description_points_at_them(tmp_path: Path) -> None:
    sdist = _build_sdist(tmp_path)
    with tarfile.open(sdist) as tar:
        names = {"/".join(Path(n).parts[1:]) for n in tar.getnames()}
        [pkg_info] = [
            m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        ]
        metadata = tar.extractfile(pkg_info).read().decode()  # type: ignore[union-attr]
    stored = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")}
    assert stored and stored <= names, sorted(stored - names)
    assert "docs/howto/testing.md" in names and "docs/reference/api.md" in names
    assert not any(n.startswith("docs/assets/screenshots/") for n in names)
    assert "in the source distribution (its `docs/` folder" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
