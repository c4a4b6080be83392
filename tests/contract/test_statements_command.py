"""manage.py statements: every named statement printed whole, as the database receives it."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.usefixtures("committed")

APPS = {"audit", "django_tasks", "outbox", "tenancy", "workers", "workqueue"}
UNFILLED = re.compile(r"(?<!')\{[a-z_]+\}(?!')")


def _run(capsys, *args: str) -> str:  # type: ignore[no-untyped-def]
    call_command("statements", *args)
    return capsys.readouterr().out


def test_every_statement_is_listed_and_prints_whole(capsys) -> None:  # type: ignore[no-untyped-def]
    # The apps' statements (another test may have made one of its own in this process).
    listed = [
        name
        for name in (line.split()[0] for line in _run(capsys).splitlines())
        if name.split(".")[0] in APPS
    ]
    assert {"workqueue.claim", "workqueue.complete", "outbox.emit", "audit.append_entries"} <= set(
        listed
    )
    for name in listed:
        text = _run(capsys, name)
        assert text.startswith(f"-- {name}: parameters "), text[:200]
        # Every fragment, locking subquery and part filled in: nothing left to fill (an array
        # literal such as '{finished}' is quoted).
        assert not re.findall(UNFILLED, text), (name, re.findall(UNFILLED, text))


def test_the_claim_is_printed_as_sent(capsys) -> None:  # type: ignore[no-untyped-def]
    text = _run(capsys, "claim")
    assert "FOR UPDATE SKIP LOCKED" in text and "workqueue_ready" in text
    native = _run(capsys, "workqueue.claim", "--native")
    assert "$1" in native and "%(lane)s" not in native


def test_an_unknown_name_says_where_to_look() -> None:
    with pytest.raises(CommandError, match=r"no statement named 'nope': manage\.py statements"):
        call_command("statements", "nope")
