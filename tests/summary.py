"""One summary line per proof suite (chaos, attacks, bad input), printed when pytest ends.

A suite counts what it proved as it goes (``count``) or states its line outright (``state``);
``tests/conftest.py`` prints the lines in pytest's terminal summary, so ``bin/test`` and each
suite run alone (``bin/test tests/security -q``) show them, and ``.ci/run`` repeats them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

COUNTS: dict[str, Counter[str]] = {}
LINES: dict[str, str] = {}
# suite -> how its counts read as one line
FORMATS: dict[str, Callable[[Counter[str]], str]] = {}


def count(suite: str, key: str, n: int = 1) -> None:
    COUNTS.setdefault(suite, Counter())[key] += n


def state(suite: str, line: str) -> None:
    LINES[suite] = line


def lines() -> list[str]:
    out = dict(LINES)
    for suite, counts in COUNTS.items():
        if suite in FORMATS:
            out.setdefault(suite, FORMATS[suite](counts))
    return [out[suite] for suite in sorted(out)]
