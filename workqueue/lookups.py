"""``field__any_of=<list>``: ``field = ANY(%s)``, one array parameter whatever the list's length,
so a statement compiled once serves every list (``kind__in`` would compile one placeholder per
element)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Lookup

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler


class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", (*lhs_params, self.rhs)
