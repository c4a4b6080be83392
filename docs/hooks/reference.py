"""MkDocs hook: the reference pages made from the code at build time, never written by hand
(so they cannot go stale): every WORKQUEUE setting (wqcore/conf.py), every management command's
--help, every metric with its labels, the public API's docstrings (the copies stored under
docs/reference/ are replaced by fresh ones; ``bin/docs check`` says when a copy is stale); each
app's README as a page, docs' links to those files pointing at the pages. And the screenshots the
browser test writes (docs/assets/screenshots/, git-ignored): one it has not written yet is a
placeholder image, so the site builds without a browser.

mkdocs.yml names this file under ``hooks:``; bin/docs and .ci/run build with ``--strict``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (ROOT, HERE):  # the apps, and refgen beside this file
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import refgen  # noqa: E402

log = logging.getLogger("mkdocs.hooks.reference")
SHOTS = "assets/screenshots/"
PLACEHOLDER = ROOT / "docs" / "assets" / "screenshot-missing.png"


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    for src_uri, content in refgen.pages().items():
        stored = files.get_file_from_path(src_uri)
        if stored is not None:
            files.remove(stored)
        files.append(File.generated(config, src_uri, content=content))
    missing = [
        name for name in refgen.SCREENSHOTS if files.get_file_from_path(SHOTS + name) is None
    ]
    for name in missing:
        files.append(File.generated(config, SHOTS + name, abs_src_path=str(PLACEHOLDER)))
    if missing:
        # INFO, not a warning: the strict build passes; bin/docs repeats it in one line.
        log.info(
            "%d screenshot(s) not taken yet, shown as a placeholder (the browser test takes "
            "them: bin/test tests/e2e): %s",
            len(missing),
            ", ".join(missing),
        )
    return files


def on_page_markdown(markdown: str, page: Page, **kwargs: Any) -> str:
    return refgen.site_links(markdown, page.file.src_uri)
