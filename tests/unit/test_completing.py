"""A batch of completions counts each item completed once, by its newest claim (workers/
completing.py): the older claim of an item this worker claimed again is refused."""

from __future__ import annotations

import uuid

from workers.completing import Finished, _completed
from workqueue.runtime import Fence


def _finished(item_id: uuid.UUID | None = None) -> Finished:
    return (Fence(uuid.uuid4(), item_id or uuid.uuid4(), uuid.uuid4()), "NOOP", None, None)


def test_every_item_completed() -> None:
    batch = [_finished() for _ in range(3)]
    assert _completed(batch, {f[0].item_id for f in batch}) == [True, True, True]


def test_an_item_refused_is_not_counted() -> None:
    batch = [_finished() for _ in range(3)]
    assert _completed(batch, {batch[0][0].item_id, batch[2][0].item_id}) == [True, False, True]


def test_an_item_twice_in_a_batch_is_completed_once_by_its_newer_claim() -> None:
    again = uuid.uuid4()
    batch = [_finished(again), _finished(), _finished(again)]
    done = {again, batch[1][0].item_id}
    assert _completed(batch, done) == [False, True, True]
    assert _completed(batch, {batch[1][0].item_id}) == [False, True, False]
