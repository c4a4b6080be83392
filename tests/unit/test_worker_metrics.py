"""The worker's metrics helpers."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram

from workers.metrics import observe_many


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels.get("le", "")): sample.value
        for metric in registry.collect()
        if metric.name == name
        for sample in metric.samples
        if not sample.name.endswith("_created")
    }


def test_observing_many_values_at_once_counts_each_bucket_as_observing_them_one_by_one() -> None:
    """A claim observes a hundred waits at once (a bucket's and the sum's lock taken once, not
    per value): the histogram ends as observe() per value leaves it, bounds included."""
    registry = CollectorRegistry()
    one_by_one = Histogram("one_by_one", "x", registry=registry)
    at_once = Histogram("at_once", "x", registry=registry)
    rng = random.Random(22)
    bounds = [0.005, 0.01, 0.025, 0.1, 1.0, 10.0]
    values = [rng.choice([0.0, *bounds, rng.random() * 20, 1e9]) for _ in range(2000)]
    for value in values:
        one_by_one.observe(value)
    observe_many(at_once, values)
    a, b = _samples(registry, "one_by_one"), _samples(registry, "at_once")
    for (name, le), value in a.items():
        other = b[(name.replace("one_by_one", "at_once"), le)]
        if name.endswith("_sum"):
            assert abs(other - value) <= 1e-9 * abs(value)
        else:
            assert other == value, (name, le)
    observe_many(at_once, [])  # nothing observed, nothing changed
    assert _samples(registry, "at_once") == b
