"""The claim's spending function, v2 against v1 (``sql/schema/rate_grant_v2.sql``): v2's short
path for a claim whose items all fall in one bucket grants and spends what v1 does, to the row.

Each case sets random limits and buckets, picks random items (often all of one kind, tenant
or key, so that v2's own path runs), then calls v1 and v2 each in a savepoint rolled back after
it, from the same state and at the same ``now()`` (one transaction): what each granted, when
it says the soonest trimmed bucket frees, and every bucket row after it must be equal."""

from __future__ import annotations

import random
import uuid
from typing import Any

from django.db import connections, transaction

CASES = 400
SCOPES = ("kind", "lane", "tenant", "key")
KINDS = ("MAIL", "SMS")
LANES = ("default", "bulk")
ORGS = (uuid.UUID(int=1), uuid.UUID(int=2))
RATE_KEYS = ("acct-1", "acct-2", None)

CALL = (
    "SELECT granted_ids, next_free_at FROM workqueue_rate_grant_{v}("
    "%s::uuid[], %s::text[], %s::uuid[], %s::text[], %s::text)"
)
BUCKETS = "SELECT limit_id, key, tat, free_at FROM workqueue_ratebucket ORDER BY limit_id, key"


def _targets(scope: str) -> list[str]:
    return {
        "kind": list(KINDS),
        "lane": list(LANES),
        "tenant": [str(o) for o in ORGS],
        "key": [k for k in RATE_KEYS if k is not None],
    }[scope]


def _case(rnd: random.Random, cursor: Any) -> tuple[list[Any], bool]:
    """Set up one case's limits and buckets; the call's arguments, and whether every picked
    item falls in one bucket of one limit (v2's own path)."""
    cursor.execute("DELETE FROM workqueue_ratebucket")
    cursor.execute("DELETE FROM workqueue_ratelimit")
    scopes = rnd.sample(SCOPES, 1 if rnd.random() < 0.7 else rnd.randint(2, 3))
    limits: list[tuple[int, str, str]] = []
    for scope in scopes:
        targets = rnd.sample([*_targets(scope), "*"], rnd.randint(1, 2))
        for target in targets:
            burst = rnd.randint(1, 6)
            cursor.execute(
                "INSERT INTO workqueue_ratelimit (scope, target, count, period_s, burst, set_by)"
                " VALUES (%s, %s, %s, %s, %s, 'test') RETURNING id",
                [scope, target, rnd.randint(1, 10), rnd.choice([1, 60, 3600]), burst],
            )
            limits.append((cursor.fetchone()[0], scope, target))
    for limit_id, scope, target in limits:
        for key in _targets(scope):
            if (target in ("*", key)) and rnd.random() < 0.6:
                # a bucket spent up to some seconds ahead, or refilled some seconds ago
                cursor.execute(
                    "INSERT INTO workqueue_ratebucket (limit_id, key, tat, free_at)"
                    " VALUES (%s, %s, now() + make_interval(secs => %s),"
                    " now() + make_interval(secs => %s))",
                    [limit_id, key, rnd.uniform(-30, 30), rnd.uniform(-30, 30)],
                )
    n = rnd.randint(1, 8)
    same = rnd.random() < 0.7

    def pick(pool: tuple[Any, ...]) -> list[Any]:
        if same:
            return [rnd.choice(pool)] * n
        return [rnd.choice(pool) for _ in range(n)]

    kinds, orgs, keys = pick(KINDS), pick(ORGS), pick(RATE_KEYS)
    lane = rnd.choice(LANES)
    args = [[uuid.uuid4() for _ in range(n)], kinds, orgs, keys, lane]
    one_bucket = False
    if len(scopes) == 1:
        scope = scopes[0]
        shared: dict[str, set[str | None]] = {
            "kind": set(kinds),
            "lane": {lane},
            "tenant": set(map(str, orgs)),
            "key": set(keys),
        }
        shared_key = next(iter(shared[scope])) if len(shared[scope]) == 1 else None
        counting = [t for _, _, t in limits if t in (shared_key, "*")]
        one_bucket = shared_key is not None and len(counting) == 1
    return args, one_bucket


def _run(cursor: Any, version: int, args: list[Any]) -> tuple[Any, ...]:
    """What ``version`` grants and leaves in the buckets, rolled back after."""
    with transaction.atomic(using="admin"):  # a savepoint
        cursor.execute(CALL.format(v=f"v{version}"), args)
        granted, next_free_at = cursor.fetchone()
        cursor.execute(BUCKETS)
        found = granted, next_free_at, cursor.fetchall()
        transaction.set_rollback(True, using="admin")
    return found


def test_v2_grants_and_spends_what_v1_does(committed: None) -> None:
    rnd = random.Random(20261205)
    own_path = 0
    with transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        for case in range(CASES):
            args, one_bucket = _case(rnd, cursor)
            own_path += one_bucket
            assert _run(cursor, 2, args) == _run(cursor, 1, args), (case, args)
        transaction.set_rollback(True, using="admin")
    # v2's own path ran in a good share of the cases (and v1's in the rest).
    assert CASES * 0.25 < own_path < CASES * 0.75, own_path


def test_v2_of_nothing_picked_grants_nothing(committed: None) -> None:
    with transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_ratelimit (scope, target, count, period_s, burst, set_by)"
            " VALUES ('lane', '*', 1, 1, 1, 'test')"
        )
        empty: list[Any] | None
        for empty in ([], None):
            args: list[Any] = [empty, empty, empty, empty, "default"]
            assert _run(cursor, 2, args) == _run(cursor, 1, args) == (None, None, [])
        transaction.set_rollback(True, using="admin")
