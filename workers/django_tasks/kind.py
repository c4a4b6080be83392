"""The DJANGO_TASK kind: run one Django ``@task`` function, named by its import path."""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import AwareDatetime

from workqueue.runtime import Kind, Payload, RetryPolicy, register

# A dotted path of identifiers (module.function): what Task.module_path gives for a
# module-level function, and nothing a worker could mistake for anything else.
PATH_PATTERN = r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$"
# A TASKS alias the payload can carry.
ALIAS_PATTERN = r"[\w.-]{1,100}"


class RetrySpec(Payload):
    """A retry policy carried by the item (``workqueue.api.RetryPolicy``'s fields)."""

    # The bounds policy.py holds the backend's OPTIONS and @retries to.
    base_s: float = pydantic.Field(gt=0, le=86_400)
    factor: float = pydantic.Field(ge=1, le=100)
    cap_s: float = pydantic.Field(gt=0, le=86_400)
    jitter: float = pydantic.Field(ge=0, lt=1)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.base_s, self.factor, self.cap_s, self.jitter)

    @classmethod
    def of(cls, policy: RetryPolicy) -> RetrySpec:
        return cls(
            base_s=policy.base_s, factor=policy.factor, cap_s=policy.cap_s, jitter=policy.jitter
        )


class DjangoTaskPayload(Payload):
    """One call of a ``@task`` function: its path, its JSON arguments, the backend it went
    through, (when the backend's OPTIONS or the task set one) its retry policy, and (when its
    caller set one) its run_after. Its queue, priority, run_after and max_attempts are the
    item's lane, priority, available_at and max_attempts."""

    path: str = pydantic.Field(max_length=300, pattern=PATH_PATTERN)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    # The TASKS alias it was enqueued through: the worker reports through that backend.
    backend: str = pydantic.Field(default="default", pattern=f"^{ALIAS_PATTERN}$")
    # None: the kind's retry policy.
    retry: RetrySpec | None = None
    # Seconds one try may run (OPTIONS["TIMEOUT_S"] or @time_limit). None: the kind's limit;
    # 0: no limit.
    timeout_s: float | None = pydantic.Field(default=None, ge=0, le=7 * 86_400)
    # The task's run_after, when its caller set one (the item's available_at is the moment it
    # may run, which a retry moves): the result reads it back as Django's backends do.
    run_after: AwareDatetime | None = None


DJANGO_TASK = register(
    Kind(
        "DJANGO_TASK",
        DjangoTaskPayload,
        max_attempts=5,
        description="a Django @task function, by its import path",
    )
)
