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


# What a statement may be for PREPARE to take it; the rest (DDL, SET, a DO block) runs as is.
_PREPARABLE = re.compile(r"^\s*(WITH|SELECT|INSERT|UPDATE|DELETE|MERGE|VALUES)\b", re.IGNORECASE)


def _body(sql: str) -> str:
    """The statement without its leading comment lines (its name and intent)."""
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def test_every_statement_prepares_on_the_server() -> None:
    """Each statement as sent (``native_sql``) is valid on the real server: PostgreSQL parses,
    analyses and types it, every table, column and function it names exists after the
    migrations, and every parameter's type is known. A fragment filled in wrong, a column
    renamed, or a parameter only the driver could type fails here, not in a worker."""
    from django.db import DatabaseError, connections, transaction

    from workers.management.commands.statements import _import_all
    from wqcore.statements import statements

    _import_all()
    # A statement another embeds (``includes``) reads that one's CTEs: it is checked inside it.
    parts = {id(part) for statement in statements().values() for part in statement.includes}
    checked, failed = [], []
    with transaction.atomic(using="system"), connections["system"].cursor() as cursor:
        for name, statement in statements().items():
            if name.split(".")[0] not in APPS or id(statement) in parts:
                continue
            text = statement.native_sql
            if not _PREPARABLE.match(_body(text)):
                continue
            cursor.execute("SAVEPOINT probe")
            try:
                cursor.execute(f"PREPARE probe AS {text}")
                cursor.execute("DEALLOCATE probe")
                checked.append(name)
            except DatabaseError as error:  # every failure is listed below
                failed.append(f"{name}: {str(error).splitlines()[0]}")
            finally:
                cursor.execute("ROLLBACK TO SAVEPOINT probe")
    assert not failed, "\n".join(failed)
    assert {"workqueue.claim", "workqueue.enqueue", "outbox.emit"} <= set(checked)
