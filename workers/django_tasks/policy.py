"""How often a task is tried, how long it waits between tries, and how long one try may run:
the backend's ``OPTIONS``, overridable per task with ``@retries`` and ``@time_limit``.

    from django.tasks import task
    from workers.django_tasks.policy import retries, time_limit

    @task
    @retries(max_attempts=10, base_s=30)   # below @task: they mark the function
    @time_limit(120)                       # cancelled past 2 minutes: fails as TimeoutError
    def charge_card(order_id: int) -> None: ...

The options (each with its unit; the project's settings fill them from ``TASKS_<OPTION>``):
``MAX_ATTEMPTS`` (5: how many times a task is claimed before it is dead-lettered),
``RETRY_BASE_S`` (2: the delay after the first failure), ``RETRY_FACTOR`` (2: the growth per
failure), ``RETRY_CAP_S`` (3600: the longest delay), ``RETRY_JITTER`` (0.25: up to this share
is taken off each delay, so a burst of failures does not retry in step), ``TIMEOUT_S`` (unset:
the DJANGO_TASK kind's limit, ``WORKQUEUE["KIND_TIMEOUT_S"]``; 0: no limit; past it a try is
cancelled and fails as ``TimeoutError``, retried like any failure).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from workers.django_tasks.compat import Task
from workqueue.runtime import MAX_TIMEOUT_S as MAX_KIND_TIMEOUT_S
from workqueue.runtime import RetryPolicy, check_max_attempts

# The attribute @retries sets on a task function.
RETRIES_ATTRIBUTE = "workqueue_retries"
# The attribute @time_limit sets on a task function.
TIME_LIMIT_ATTRIBUTE = "workqueue_time_limit"
# The longest time limit a task may name (the kinds' own bound).
MAX_TIMEOUT_S = float(MAX_KIND_TIMEOUT_S)


@dataclass(frozen=True)
class TaskPolicy:
    max_attempts: int = 5
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Seconds one try may run. None: the DJANGO_TASK kind's limit; 0: no limit.
    timeout_s: float | None = None


DEFAULT_POLICY = TaskPolicy()

# OPTIONS key -> (field, type, default); a default is the backend's when the key is absent.
OPTIONS: dict[str, tuple[str, type[int] | type[float], float]] = {
    "MAX_ATTEMPTS": ("max_attempts", int, DEFAULT_POLICY.max_attempts),
    "RETRY_BASE_S": ("base_s", float, DEFAULT_POLICY.retry.base_s),
    "RETRY_FACTOR": ("factor", float, DEFAULT_POLICY.retry.factor),
    "RETRY_CAP_S": ("cap_s", float, DEFAULT_POLICY.retry.cap_s),
    "RETRY_JITTER": ("jitter", float, DEFAULT_POLICY.retry.jitter),
    "TIMEOUT_S": ("timeout_s", float, 0.0),
}


def _number(value: Any, kind: type[int] | type[float]) -> float | int:
    """An int or float option, from a number or the text of one (settings read from the
    environment give text); ValueError when it is neither."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        value = kind(value.strip())
    if kind is int and (not isinstance(value, int) and not float(value).is_integer()):
        raise ValueError
    number = kind(value)
    if not math.isfinite(number):
        raise ValueError
    return number


# The longest delay and the steepest growth a policy may name (a longer wait is a schedule,
# not a retry); the item's payload schema holds the same bounds (kind.RetrySpec).
MAX_DELAY_S = 86_400.0
MAX_FACTOR = 100.0


def _policy(max_attempts: int, retry: dict[str, float]) -> tuple[TaskPolicy, str | None]:
    """The policy these values make, or the default one and what is wrong."""
    try:
        check_max_attempts(max_attempts, "MAX_ATTEMPTS")
    except ValueError as exc:
        return DEFAULT_POLICY, str(exc)
    if retry["base_s"] > MAX_DELAY_S or retry["cap_s"] > MAX_DELAY_S:
        return DEFAULT_POLICY, f"a retry delay may be at most {MAX_DELAY_S:g} s (base_s, cap_s)"
    if retry["factor"] > MAX_FACTOR:
        return DEFAULT_POLICY, f"a retry policy's factor may be at most {MAX_FACTOR:g}"
    try:
        return TaskPolicy(max_attempts, RetryPolicy(**retry)), None
    except ValueError as exc:
        return DEFAULT_POLICY, str(exc)


def parse_options(options: Any) -> tuple[TaskPolicy, list[str]]:
    """The backend's policy from its ``OPTIONS``, and one message per problem (an unknown key,
    with the nearest known one; a value that is not a number or out of range). With a problem
    the policy is the default one: the system check reports it and ``enqueue`` refuses."""
    if not isinstance(options, Mapping):
        return DEFAULT_POLICY, [f"OPTIONS must be a dict, not {type(options).__name__}"]
    problems = []
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key not in OPTIONS:
            near = difflib.get_close_matches(str(key), OPTIONS, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            problems.append(
                f"OPTIONS has an unknown key {key!r} ({hint}known: {', '.join(OPTIONS)})"
            )
            continue
        field, kind, _ = OPTIONS[key]
        try:
            values[field] = _number(value, kind)
        except (TypeError, ValueError):
            what = "a whole number" if kind is int else "a number"
            problems.append(
                f"OPTIONS[{key!r}] must be {what} (got {value!r}; environment: TASKS_{key})"
            )
    if problems:
        return DEFAULT_POLICY, problems
    max_attempts = values.pop("max_attempts", DEFAULT_POLICY.max_attempts)
    timeout_s = values.pop("timeout_s", None)
    if timeout_s is not None and not 0 <= timeout_s <= MAX_TIMEOUT_S:
        out_of_range = (
            f"OPTIONS['TIMEOUT_S'] must be 0 (no limit) to {MAX_TIMEOUT_S:g} seconds "
            f"(got {timeout_s!r}; environment: TASKS_TIMEOUT_S)"
        )
        return DEFAULT_POLICY, [out_of_range]
    retry = {f: getattr(DEFAULT_POLICY.retry, f) for f in ("base_s", "factor", "cap_s", "jitter")}
    retry.update(values)
    policy, problem = _policy(max_attempts, retry)
    if timeout_s is not None and not problem:
        policy = replace(policy, timeout_s=timeout_s)
    return policy, [f"OPTIONS: {problem}"] if problem else []


@dataclass(frozen=True)
class Retries:
    """A task's own policy: each field given replaces the backend's."""

    max_attempts: int | None = None
    base_s: float | None = None
    factor: float | None = None
    cap_s: float | None = None
    jitter: float | None = None

    def applied_to(self, policy: TaskPolicy) -> TaskPolicy:
        """``policy`` with this task's values; ValueError when they make no policy."""
        retry = {
            f: getattr(self, f) if getattr(self, f) is not None else getattr(policy.retry, f)
            for f in ("base_s", "factor", "cap_s", "jitter")
        }
        max_attempts = self.max_attempts if self.max_attempts is not None else policy.max_attempts
        made, problem = _policy(max_attempts, retry)
        if problem:
            raise ValueError(problem.replace("MAX_ATTEMPTS", "max_attempts"))
        return made


def retries(
    *,
    max_attempts: int | None = None,
    base_s: float | None = None,
    factor: float | None = None,
    cap_s: float | None = None,
    jitter: float | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give one task its own retry policy (put it below ``@task``); what is not given comes
    from the backend's ``OPTIONS``. A value that makes no policy is refused here, at import."""
    spec = Retries(max_attempts, base_s, factor, cap_s, jitter)
    for name in ("base_s", "factor", "cap_s", "jitter"):
        value = getattr(spec, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"@retries: {name} must be a number, not {type(value).__name__}")
    try:
        if max_attempts is not None:
            check_max_attempts(max_attempts)
        spec.applied_to(DEFAULT_POLICY)
    except ValueError as exc:
        raise ValueError(f"@retries: {exc}") from None

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(func, Task):
            raise TypeError(
                "@retries(...) goes below @task: it marks the function, and a Task cannot change"
            )
        if not callable(func):
            raise TypeError(f"@retries(...) marks a function, not a {type(func).__name__}")
        setattr(func, RETRIES_ATTRIBUTE, spec)
        return func

    return mark


def time_limit(seconds: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give one task its own time limit (put it below ``@task``): a try that runs longer is
    cancelled and fails as ``TimeoutError`` (retried like any failure; an async task is
    cancelled for real, a sync one's thread is abandoned: ``workers/README.md``). 0: no limit.
    A value out of range is refused here, at import."""
    given: object = seconds  # checked as it comes: an untyped caller may pass anything
    if (
        isinstance(given, bool)
        or not isinstance(given, int | float)
        or not 0 <= given <= MAX_TIMEOUT_S
    ):
        raise ValueError(
            f"@time_limit: seconds must be 0 (no limit) to {MAX_TIMEOUT_S:g} (got {seconds!r})"
        )
    limit = float(seconds)

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(func, Task):
            raise TypeError(
                "@time_limit(...) goes below @task: it marks the function, and a Task cannot change"
            )
        if not callable(func):
            raise TypeError(f"@time_limit(...) marks a function, not a {type(func).__name__}")
        setattr(func, TIME_LIMIT_ATTRIBUTE, limit)
        return func

    return mark


def task_policy(task: Task[..., Any], policy: TaskPolicy) -> TaskPolicy:
    """The policy ``task`` runs under: the backend's, with the task's ``@retries`` and
    ``@time_limit`` applied (ValueError when they make no policy together)."""
    spec = getattr(task.func, RETRIES_ATTRIBUTE, None)
    if spec is not None:
        if not isinstance(spec, Retries):
            raise ValueError(f"{RETRIES_ATTRIBUTE} must be set by @retries, not by hand")
        policy = replace(spec.applied_to(policy), timeout_s=policy.timeout_s)
    limit = getattr(task.func, TIME_LIMIT_ATTRIBUTE, None)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, float):
            raise ValueError(f"{TIME_LIMIT_ATTRIBUTE} must be set by @time_limit, not by hand")
        policy = replace(policy, timeout_s=limit)
    return policy
