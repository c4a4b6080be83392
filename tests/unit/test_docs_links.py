"""The documentation reads where it is stored (a forge, an sdist), not only in the built site:
every relative link of a page under docs/ names a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A Markdown link or image: its target, up to an anchor or a title.
LINK = re.compile(r"\]\(([^)#\s]*)(?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\)")
# Screenshots the browser test writes (git-ignored); the site shows a placeholder without them.
WRITTEN_BY_TESTS = DOCS / "assets" / "screenshots"


def dead_links(docs: Path = DOCS) -> list[str]:
    dead = []
    for page in sorted(docs.rglob("*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code is not links
        for target in LINK.findall(text):
            if not target or re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            found = (page.parent / target).resolve()
            if found.is_relative_to(WRITTEN_BY_TESTS):
                continue
            if not found.exists():
                dead.append(f"{page.relative_to(docs.parent)}: {target}")
    return dead


def test_every_relative_link_in_docs_resolves_in_the_repository() -> None:
    assert dead_links() == []


def test_the_check_finds_a_page_only_the_built_site_has(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "howto").mkdir(parents=True)
    (docs / "howto" / "here.md").write_text("x")
    (docs / "howto" / "page.md").write_text(
        "[ok](here.md#a) [web](https://example.com) [dead](../reference/api.md)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    assert dead_links(docs) == ["docs/howto/page.md: ../reference/api.md"]
