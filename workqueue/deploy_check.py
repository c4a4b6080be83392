"""The deploy check: what is queued that the code about to run cannot run.

A deploy that removes or renames a kind, or changes its payload schema, leaves the items queued
under the old code (waiting, pending, claimed, dead letters a triage may requeue) to fail after
it: an unknown kind is never claimed, a payload that no longer validates fails in its handler.
``queued_problems()`` compares what the queue holds with the kinds this process registered: the
kinds it does not know, by status (from the gauges' counts), and, for each kind it knows, a
sample of the queued payloads validated against its schema. It backs a Django check (database
tag: ``manage.py check --database default``, and ``migrate`` before it migrates) and
``manage.py queue check-deploy`` (a non-zero exit for CI pipelines).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload
from workqueue.kinds import get_kind, known_kinds, validate_payload
from workqueue.maintenance import read_gauges_plan
from workqueue.models import Status
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, transition

# The statuses of items a deploy can break: still to run, or dead letters a triage may requeue.
QUEUED = (Status.WAITING, Status.PENDING, Status.CLAIMED, Status.FAILED)
# Payloads validated per kind by default (``--sample``): enough to find a schema change that
# breaks them all, bounded so the check costs a few statements on any queue.
SAMPLE_PER_KIND = 200


class SampleParams(NamedTuple):
    kinds: list[str]
    per_kind: int


SAMPLE_QUEUED_PAYLOADS = Statement("sample_queued_payloads", SampleParams, SQL_DIR)


@dataclass(frozen=True)
class UnknownKind:
    """A kind the queue holds items of and no code of this process registers."""

    kind: str
    # status -> items
    items: dict[str, int]

    def __str__(self) -> str:
        counts = ", ".join(f"{status} {n}" for status, n in sorted(self.items.items()))
        return (
            f"kind {self.kind!r}: {sum(self.items.values())} queued items ({counts}) and no code "
            f"registers it: keep the old name registered beside the new (its Kind and "
            f"@handles({self.kind!r}) on the same handler) until they are gone, or set them "
            f"aside: manage.py queue cancel --kind {self.kind} (waiting and pending), "
            f"manage.py queue discard --kind {self.kind} (dead letters)"
        )


@dataclass(frozen=True)
class InvalidPayloads:
    """A registered kind some of whose queued items' payloads its schema now refuses."""

    kind: str
    sampled: int
    invalid: int
    # The first refused: its id and what the schema says.
    first_id: uuid.UUID
    first_error: str

    def __str__(self) -> str:
        return (
            f"kind {self.kind!r}: {self.invalid} of {self.sampled} queued payloads sampled no "
            f"longer validate (item {self.first_id}: {self.first_error}): accept the old shape "
            f"too (a default or an alias on the new field) until they are gone, or set them "
            f"aside: manage.py queue cancel --kind {self.kind}, manage.py queue discard --kind "
            f"{self.kind}"
        )


@dataclass(frozen=True)
class QueuedProblems:
    unknown: list[UnknownKind] = field(default_factory=list)
    invalid: list[InvalidPayloads] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.unknown or self.invalid)

    def lines(self) -> list[str]:
        return [str(problem) for problem in [*self.unknown, *self.invalid]]


def _queued_by_kind(counts: dict[tuple[str, str, str], int]) -> dict[str, Counter[str]]:
    by_kind: dict[str, Counter[str]] = {}
    for (_lane, kind, status), n in counts.items():
        if status in QUEUED:
            by_kind.setdefault(kind, Counter())[status] += n
    return by_kind


def _invalid(kind: str, rows: list[tuple[Any, ...]]) -> InvalidPayloads | None:
    definition = get_kind(kind)
    refused: list[tuple[uuid.UUID, str]] = []
    for _kind, item_id, _status, payload in rows:
        try:
            validate_payload(definition, payload)
        except InvalidPayload as exc:
            refused.append((item_id, str(exc)))
    if not refused:
        return None
    return InvalidPayloads(kind, len(rows), len(refused), refused[0][0], refused[0][1])


@transition
def queued_problems(sample: int = SAMPLE_PER_KIND) -> Plan[QueuedProblems]:
    """What the queue holds that this process's kinds cannot run: unknown kinds (every queued
    item counted) and, per registered kind, how many of up to ``sample`` queued payloads its
    schema refuses (0: the sample skipped). Across tenants, on the system login."""
    gauges = yield from read_gauges_plan()
    by_kind = _queued_by_kind(gauges.counts)
    known = set(known_kinds())
    unknown = [UnknownKind(k, dict(by_kind[k])) for k in sorted(set(by_kind) - known)]
    invalid: list[InvalidPayloads] = []
    checked = sorted(set(by_kind) & known)
    if sample > 0 and checked:
        rows: Rows = yield System(SAMPLE_QUEUED_PAYLOADS, SampleParams(checked, int(sample)))
        per_kind: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows.rows:
            per_kind.setdefault(row[0], []).append(tuple(row))
        for kind in checked:
            found = _invalid(kind, per_kind.get(kind, []))
            if found:
                invalid.append(found)
    return QueuedProblems(unknown, invalid)
