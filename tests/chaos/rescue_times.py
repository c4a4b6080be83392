"""How long a killed worker's items waited to be handed back, for the chaos suite's summary line.

Just before each kill the test reads the items the victim holds (and the database's clock);
afterwards each one's held attempt ended when the rescue (``holder_gone``) or its lease
(``lease_expired``) handed it back. An item the victim completed in the moment before the kill
is not counted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

Query = Callable[..., list[tuple[Any, ...]]]


class Held(NamedTuple):
    killed_at: datetime
    # (item, attempt) pairs the killed worker held.
    attempts: list[tuple[uuid.UUID, int]]


def held_by(query: Query, pid: int) -> Held | None:
    """What the worker of ``pid`` holds now (worker ids read host:pid:suffix)."""
    rows = query(
        "SELECT now(), id, attempts FROM workqueue_workitem"
        " WHERE status = 'claimed' AND claimed_by LIKE %s",
        [f"%:{pid}:%"],
    )
    return Held(rows[0][0], [(item, n) for _, item, n in rows]) if rows else None


def rescue_times(query: Query, kills: list[Held]) -> str:
    """The p50 and max of the waits, and how many the rescue and the lease handed back."""
    waits: list[float] = []
    by: Counter[str] = Counter()
    for killed_at, held in kills:
        for ended_at, outcome in query(
            "SELECT a.ended_at, a.outcome FROM workqueue_attempt a"
            " JOIN unnest(%s::uuid[], %s::int[]) AS h(item_id, attempt)"
            " ON a.item_id = h.item_id AND a.attempt = h.attempt"
            " WHERE a.outcome IN ('holder_gone', 'lease_expired')",
            [[item for item, _ in held], [n for _, n in held]],
        ):
            waits.append((ended_at - killed_at).total_seconds())
            by[outcome] += 1
    if not waits:
        return "rescue time: none measured"
    waits.sort()
    return (
        f"rescue time p50 {waits[len(waits) // 2]:.1f} s, max {waits[-1]:.1f} s"
        f" ({len(waits)} items of killed workers: {by['holder_gone']} by the rescue,"
        f" {by['lease_expired']} by the lease)"
    )
