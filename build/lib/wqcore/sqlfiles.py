"""Migrations that run a named ``.sql`` file of an app, with its ``_reverse`` twin."""

from __future__ import annotations

from pathlib import Path

from django.db import migrations


def run_sql_file(sql_dir: Path, name: str, **params: str) -> migrations.RunSQL:
    """``sql_dir/<name>.sql`` forward and ``sql_dir/<name>_reverse.sql`` backward, with
    ``{placeholder}`` values filled from ``params``."""
    forward = (sql_dir / f"{name}.sql").read_text()
    reverse = (sql_dir / f"{name}_reverse.sql").read_text()
    if params:
        forward, reverse = forward.format(**params), reverse.format(**params)
    return migrations.RunSQL(forward, reverse_sql=reverse)
