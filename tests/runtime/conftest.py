"""Runtime tests register scripted test kinds (tests/runtime/support.py) and start clean."""

from __future__ import annotations

import pytest

from tests.runtime.support import EVENTS


@pytest.fixture(autouse=True)
def _clear_events() -> None:
    EVENTS.clear()
