"""``field__any_of=<list>``: ``field = ANY(%s)``, one array parameter whatever the list's length,
so a statement compiled once serves every list (``kind__in`` would compile one placeholder per
element)."""

from __future__ import annotations

from typing import Any

from django.db.models import Lookup


class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", [*lhs_params, self.rhs]
