"""What the tests that follow a page word by word share (the README's install section,
``test_readme_install.py``; the documentation's tutorial, ``test_tutorial.py``): the page's
fenced code blocks, and the Python files those blocks name.

A Python block is cut where a comment names a file (``# settings.py``, ``# shop/work.py``,
``# mysite/settings.py (add at the end)``): each part is that file's code.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def code_blocks(page: Path, section: str | None = None) -> list[tuple[str, str]]:
    """The fenced code blocks of ``page`` (of its ``section`` only: from that heading to the
    next of level 2 or 3), in order: (language, text)."""
    text = page.read_text()
    if section is not None:
        start = text.index(f"\n{section}\n")
        end = re.compile(r"\n#{2,3} ").search(text, start + len(section) + 2)
        text = text[start : end.start() if end else None]
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.M | re.S)]


def file_parts(block: str) -> list[tuple[str, str]]:
    """A Python block cut where a comment names a file: (that comment's file, its code)."""
    parts: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        named = re.match(r"# ([\w/]+\.py)\b", line)
        if named:
            parts.append((named[1], ""))
        elif parts:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
        elif line.strip():
            raise AssertionError(f"a page's code block comes before any file name: {line!r}")
    return parts


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str, server: subprocess.Popen[str]) -> tuple[int, bytes]:
    """``url``'s status and body, once the server answers (a minute at most)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read()
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"the server did not answer {url}: {server.communicate()}"
                ) from None
            time.sleep(0.2)
