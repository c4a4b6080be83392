"""What other apps use of the outbox: emit a row in the caller's transaction (``emit``), relay
the pending rows (``relay_pending``, ``relay_all``), purge the relayed ones (``purge_relayed``)
and read how far behind the relay is (``read_lag``, or ``READ_LAG`` inside a plan of one's own).
A test pins these names; nothing outside ``outbox`` imports its other modules."""

from outbox.emit import emit
from outbox.models import OutboxRow, OutboxStatus
from outbox.relay import (
    READ_LAG,
    Lag,
    RelayResult,
    purge_relayed,
    read_lag,
    relay_all,
    relay_pending,
)

__all__ = [
    "READ_LAG",
    "Lag",
    "OutboxRow",
    "OutboxStatus",
    "RelayResult",
    "emit",
    "purge_relayed",
    "read_lag",
    "relay_all",
    "relay_pending",
]
