"""What other apps use of the audit trail: append an entry from Python (``append``) or inside
their own statement (``APPEND_ENTRIES`` and its parameters), read entries (``AuditEntry``) and
name their actors (``actor_names``). A test pins these names; nothing outside ``audit`` imports
its other modules."""

from audit.models import AuditEntry
from audit.names import actor_names
from audit.services import APPEND_ENTRIES, AppendEntriesParams, append

__all__ = ["APPEND_ENTRIES", "AppendEntriesParams", "AuditEntry", "actor_names", "append"]
