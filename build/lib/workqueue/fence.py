"""The fence a holder presents: which item, in which tenant, under which claim token."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from workqueue.models import WorkItem


class Fence(NamedTuple):
    """What the holder of a claim presents to write to the item. The token is minted afresh by
    every claim, so a fence of an earlier claim (a stale holder) matches no row."""

    org_id: uuid.UUID
    item_id: uuid.UUID
    claim_token: uuid.UUID

    @classmethod
    def of(cls, item: WorkItem) -> Fence:
        if item.claim_token is None:
            raise ValueError(f"work item {item.id} is not claimed: it has no claim token")
        return cls(item.org_id, item.id, item.claim_token)


class Fences(NamedTuple):
    """Many fences as the three arrays a batch statement unnests."""

    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]

    @classmethod
    def of(cls, fences: list[Fence]) -> Fences:
        return cls(
            [f.org_id for f in fences], [f.item_id for f in fences], [f.claim_token for f in fences]
        )
