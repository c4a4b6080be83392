"""The SQL every applied migration runs, fingerprinted, so it can never change under a database
that already ran it (``tests/contract/test_migrations.py`` holds the tree to the lock file).

    .venv/bin/python -m tests.migration_lock --record   # after adding a migration

Recording only adds migrations that are new; a changed fingerprint of an existing one stays a
failure: write a new migration instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

LOCK = Path(__file__).with_name("migrations.lock.json")


def _sql_of(operations: list[Any]) -> list[str]:
    from django.db import migrations

    texts: list[str] = []
    for op in operations:
        if isinstance(op, migrations.RunSQL):
            texts += [str(op.sql), str(op.reverse_sql)]
        elif isinstance(op, migrations.SeparateDatabaseAndState):
            texts += _sql_of(op.database_operations)
    return texts


def fingerprints() -> dict[str, str]:
    """``app.migration`` -> sha256 of the SQL its RunSQL operations run (forward and back), for
    every migration that runs any."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = {}
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        texts = _sql_of(migration.operations)
        if texts:
            found[f"{app}.{name}"] = hashlib.sha256("\n--\n".join(texts).encode()).hexdigest()
    return found


def recorded() -> dict[str, str]:
    return json.loads(LOCK.read_text()) if LOCK.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="add new migrations to the lock")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    lock, now = recorded(), fingerprints()
    changed = sorted(k for k in lock.keys() & now.keys() if lock[k] != now[k])
    if changed:
        raise SystemExit(f"applied migrations changed (write new ones instead): {changed}")
    if args.record:
        LOCK.write_text(json.dumps({**lock, **now}, indent=2, sort_keys=True) + "\n")
        print(f"recorded {len(now.keys() - lock.keys())} new migration(s) in {LOCK}")


if __name__ == "__main__":
    main()
