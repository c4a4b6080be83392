"""What other apps use of the audit trail: append an entry from Python (``append``) or inside
their own statement (``APPEND_ENTRIES`` and its parameters), redact a tenant's entries
(``REDACT_ENTRIES``, ``COUNT_UNREDACTED``: the erase's, on the system login), read entries
(``AuditEntry``) and name their actors (``actor_names``). A test pins these names; nothing
outside ``audit`` imports its other modules."""

from audit.models import AuditEntry
from audit.names import actor_names
from audit.services import (
    APPEND_ENTRIES,
    COUNT_UNREDACTED,
    REDACT_ENTRIES,
    REDACTED,
    AppendEntriesParams,
    RedactParams,
    UnredactedParams,
    append,
)

__all__ = [
    "APPEND_ENTRIES",
    "COUNT_UNREDACTED",
    "REDACTED",
    "REDACT_ENTRIES",
    "AppendEntriesParams",
    "AuditEntry",
    "RedactParams",
    "UnredactedParams",
    "actor_names",
    "append",
]
