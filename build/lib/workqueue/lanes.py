"""The lanes a site declares: the only lane names the API accepts and metrics name.

A lane is declared by the site's setting (``WORKQUEUE["LANES"]``, default ``["default"]``), by a
kind (``Kind.lane``), or by an app that routes work to lanes of its own (the ``django.tasks``
backend declares its ``QUEUES``). Code may still enqueue in any valid lane name; the API, whose
body is outside input, refuses an undeclared one, and the gauges count every undeclared lane
under one label (``UNDECLARED``), so no caller can grow the series ``/metrics`` carries or the
rows the gauges read returns.
"""

from __future__ import annotations

from workqueue.inputs import check_lane
from wqcore.conf import wq_settings

# The label of every lane no one declared: not a lane name (parentheses are not allowed in one),
# so it never stands for a declared lane.
UNDECLARED = "(undeclared)"

_DECLARED_BY_APPS: set[str] = set()


def declare_lanes(*lanes: str) -> None:
    """Declare lanes an app routes work to (each must be a valid lane name)."""
    for lane in lanes:
        _DECLARED_BY_APPS.add(check_lane(lane, "declared lane"))


def declared_lanes() -> list[str]:
    """Every declared lane, sorted: the setting's, the kinds', the apps'."""
    from workqueue.kinds import all_kinds

    lanes = set(wq_settings.LANES)
    lanes.update(kind.lane for kind in all_kinds())
    lanes.update(_DECLARED_BY_APPS)
    return sorted(lanes)


def is_declared(lane: str) -> bool:
    return lane in declared_lanes()
