"""The NOOP kind: nothing to do (benchmarks and smoke tests)."""

from __future__ import annotations

import pydantic

from workqueue.api import Kind, Payload, register


class NoopPayload(Payload):
    """Nothing to do."""

    n: int | None = None
    # Wall-clock time of the enqueue's commit, for latency benchmarks.
    sent_at: float | None = None
    # Seconds to spend "working" (async sleep), for shutdown and lease tests.
    sleep_s: float | None = pydantic.Field(default=None, ge=0, le=3600)


NOOP = register(Kind("NOOP", NoopPayload, max_attempts=3, description="does nothing"))
