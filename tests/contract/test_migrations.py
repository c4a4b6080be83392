"""Migrations never change under a database that ran them (issue 9)."""

from __future__ import annotations

from tests.migration_lock import fingerprints, recorded


def test_the_sql_of_every_migration_is_what_was_recorded() -> None:
    lock, now = recorded(), fingerprints()
    changed = sorted(name for name in lock.keys() & now.keys() if lock[name] != now[name])
    assert changed == [], (
        "the SQL these applied migrations run changed: revert it and write a new migration"
    )
    assert sorted(lock.keys() - now.keys()) == [], "a recorded migration was removed"
    new = sorted(now.keys() - lock.keys())
    assert new == [], "record new migrations: .venv/bin/python -m tests.migration_lock --record"


def test_the_lock_catches_an_edit_of_a_shared_sql_file(tmp_path, monkeypatch) -> None:
    """The tenant policy is a file several migrations run: editing it is caught too."""
    from tenancy import rls

    edited = tmp_path / "sql"
    edited.mkdir()
    for path in rls.SQL_DIR.glob("*.sql"):
        (edited / path.name).write_text(path.read_text())
    policy = edited / "tenant_policy.sql"
    policy.write_text(policy.read_text().replace("ENABLE", "DISABLE", 1))
    monkeypatch.setattr(rls, "SQL_DIR", edited)
    import importlib

    module = importlib.import_module("audit.migrations.0002_row_level_security")
    importlib.reload(module)
    try:
        lock, now = recorded(), fingerprints()
        key = "workqueue_audit.0002_row_level_security"
        assert lock[key] != now[key]
    finally:
        monkeypatch.undo()
        importlib.reload(module)
