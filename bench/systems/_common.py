"""Shared plumbing for bench/systems adapters.

Stdlib only on purpose: the product's adapter runs under the product's venv, which
does not have the bench requirements. See README.md for the adapter contract.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WORKLOADS = ("drain", "wake", "enqueue", "depth", "bloat", "raw", "fairness")

# Defaults are the full-size figures of bench/RESULTS.md; the harness passes explicit
# (possibly --quick scaled) values, these only matter for manual runs.
DEFAULTS: dict[str, dict[str, int | float]] = {
    "drain": {"n": 20_000, "procs": 1},
    "wake": {"n": 200, "interval_ms": 20},
    "enqueue": {"n": 2_000, "bulk_n": 20_000, "batch": 1_000},
    "depth": {"n": 500, "depth": 10_000},
    "bloat": {"n": 20_000, "churn": 1_000_000},
    "raw": {"n": 20_000, "seconds": 10},
    "fairness": {"depth": 1_000_000, "interval_ms": 50, "seconds": 60},
}

READY = "BENCH:READY"
DONE = "BENCH:DONE"


def log(msg: str) -> None:
    """Progress goes to stderr: stdout's last line is reserved for the result JSON."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args(
    system: str,
    workloads: Sequence[str],
    configs: Sequence[str] = ("default",),
    notes: dict[str, str] | None = None,
    config_workloads: dict[str, list[str]] | None = None,
    argv: Sequence[str] | None = None,
) -> argparse.Namespace:
    """Parse the adapter command line; `describe` prints capabilities and exits.

    `config_workloads` limits a config to some workloads (default: all of them).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["describe"]:
        emit(
            {
                "system": system,
                "workloads": list(workloads),
                "configs": list(configs),
                "config_workloads": config_workloads or {},
                "notes": notes or {},
            }
        )
        raise SystemExit(0)
    p = argparse.ArgumentParser(prog=f"{system}.py", description=f"bench adapter for {system}")
    p.add_argument("workload", choices=list(workloads))
    p.add_argument("--dsn", required=True, help="database URL (a fresh, empty database)")
    p.add_argument("--config", default=configs[0], choices=list(configs))
    p.add_argument("--n", type=int, help="items (drain/wake/enqueue single/bloat), claims (depth)")
    p.add_argument("--procs", type=int, help="worker processes (drain)")
    p.add_argument("--bulk-n", type=int, help="items for bulk enqueue")
    p.add_argument("--batch", type=int, help="bulk enqueue batch size")
    p.add_argument("--depth", type=int, help="waiting items for the depth workload")
    p.add_argument("--churn", type=int, help="completions before the second bloat drain")
    p.add_argument("--seconds", type=float, help="pgbench -T (raw); how long B enqueues (fairness)")
    p.add_argument("--interval-ms", type=float, help="sleep between wake enqueues")
    ns = p.parse_args(argv)
    for key, value in DEFAULTS.get(ns.workload, {}).items():
        if getattr(ns, key) is None:
            setattr(ns, key, value)
    return ns


def figure(name: str, unit: str, value: float, **extra: Any) -> dict[str, Any]:
    return {"figure": name, "unit": unit, "value": value, "extra": extra}


def emit(result: dict[str, Any] | list[dict[str, Any]]) -> None:
    """The harness reads the last stdout line: exactly one JSON document."""
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (no numpy in the product's venv)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# --- worker processes -------------------------------------------------------------
# Drain timing must exclude interpreter start-up and imports (Django alone is ~0.3 s),
# so workers set themselves up, print READY, block on stdin, and start working when
# the adapter writes a line to every worker at once.


def worker_wait_for_go() -> None:
    print(READY, flush=True)
    if not sys.stdin.readline():
        # EOF: the adapter died before "go"; don't start working on our own.
        raise SystemExit("bench worker: adapter went away before go")


def worker_done() -> None:
    """Called right after the worker saw its queue empty, before teardown."""
    print(f"{DONE} {time.time():.6f}", flush=True)


class Workers:
    """N copies of this adapter script in `_worker` mode, driven over stdin/stdout."""

    def __init__(
        self,
        script: str,
        args: Sequence[str],
        count: int,
        env: dict[str, str] | None = None,
    ) -> None:
        full_env = {**os.environ, **(env or {})}
        self.procs = [
            subprocess.Popen(
                [sys.executable, script, "_worker", *args, "--index", str(i)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=full_env,
            )
            for i in range(count)
        ]

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        # Also on errors: no worker may outlive the run (it would hold the database).
        self.stop()

    def _read_until(self, proc: subprocess.Popen[str], prefix: str, deadline: float) -> str:
        assert proc.stdout is not None
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"worker exited (rc={proc.wait()}) before {prefix}")
            if line.startswith(prefix):
                return line.strip()
        raise TimeoutError(f"worker did not say {prefix} in time")

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        for proc in self.procs:
            self._read_until(proc, READY, deadline)

    def go(self) -> float:
        t0 = time.time()
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return t0

    def wait_done(self, timeout: float) -> list[float]:
        """Return each worker's DONE timestamp, then reap the processes."""
        deadline = time.time() + timeout
        stamps = [float(self._read_until(p, DONE, deadline).split()[1]) for p in self.procs]
        for proc in self.procs:
            if proc.wait(timeout=max(1.0, deadline - time.time())) != 0:
                raise RuntimeError(f"worker exited with {proc.returncode}")
        return stamps

    def stop(self, grace: float = 10) -> None:
        """SIGTERM (the peers' graceful shutdown), then SIGKILL after `grace` seconds."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        end = time.time() + grace
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def worker_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Arguments of the `_worker` mode (adapter-internal)."""
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["_worker"])
    p.add_argument("kind", choices=["drain", "serve"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--config", default="default")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--batch", type=int, default=1)
    return p.parse_args(list(sys.argv[1:] if argv is None else argv))


# --- wake ---------------------------------------------------------------------------
# One clock for both ends: the enqueuer takes ``stamp()`` right after each enqueue's commit
# returned, the handler takes ``stamp()`` as its first statement and appends "<seq> <stamp>"
# to the file named by BENCH_WAKE_FILE. ``stamp()`` is time.monotonic(), which on Linux is
# the kernel's CLOCK_MONOTONIC: one clock shared by every process on the host (never stepped
# by NTP, unlike the wall clock), so the difference is the commit -> handler-start latency
# whichever process took each end.

WAKE_ENV = "BENCH_WAKE_FILE"
_wake_fh: Any = None


def stamp() -> float:
    """The wake workload's clock (see above)."""
    return time.monotonic()


def record_wake(seq: int, steps: dict[str, float] | None = None) -> None:
    """Call first thing in the handler. ``steps``: the moments (``stamp()``) the item passed
    on its way to the handler, written beside its start (``read_steps``)."""
    now = stamp()
    global _wake_fh
    if _wake_fh is None:
        path = os.environ.get(WAKE_ENV)
        if not path:
            return
        # Line-buffered and kept open for the life of the worker process.
        _wake_fh = open(path, "a", buffering=1)
    more = "".join(f" {name}={at:.6f}" for name, at in (steps or {}).items())
    _wake_fh.write(f"{seq} {now:.6f}{more}\n")


def _wake_lines(path: Path) -> dict[int, list[str]]:
    lines: dict[int, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                lines[int(parts[0])] = parts[1:]
    return lines


def read_wake(path: Path, want: set[int], timeout: float) -> dict[int, float]:
    """Wait until the handler recorded every seq in `want`; return seq -> start time."""
    deadline = time.monotonic() + timeout
    seen: dict[int, float] = {}
    while time.monotonic() < deadline:
        seen = {seq: float(parts[0]) for seq, parts in _wake_lines(path).items()}
        if want <= seen.keys():
            return seen
        time.sleep(0.05)
    missing = sorted(want - seen.keys())
    raise TimeoutError(f"wake: {len(missing)} items never started, e.g. {missing[:5]}")


def read_steps(path: Path) -> dict[int, dict[str, float]]:
    """seq -> the steps the handler recorded with its start (``record_wake(seq, steps)``)."""
    steps: dict[int, dict[str, float]] = {}
    for seq, parts in _wake_lines(path).items():
        steps[seq] = dict((k, float(v)) for k, _, v in (p.partition("=") for p in parts[1:]))
    return steps


def step_shares(
    sent: dict[int, float],
    started: dict[int, float],
    steps: dict[int, dict[str, float]],
    order: Sequence[str],
) -> dict[str, Any]:
    """Each step's median length (ms) and share of the median wake, from commit (``sent``)
    through the recorded ``order`` of steps to the handler's start. An item missing a step
    (woken by the poll, say) is left out."""
    segments: dict[str, list[float]] = {}
    names = ["commit", *order, "handler"]
    for seq, t0 in sent.items():
        at = {"commit": t0, **steps.get(seq, {}), "handler": started[seq]}
        if not all(n in at for n in names):
            continue
        for a, b in itertools.pairwise(names):
            segments.setdefault(f"{a}->{b}", []).append((at[b] - at[a]) * 1000)
    medians = {k: median(v) for k, v in segments.items()}
    total = sum(medians.values()) or 1.0
    return {
        "steps_ms": {k: round(v, 4) for k, v in medians.items()},
        "steps_share": {k: round(v / total, 3) for k, v in medians.items()},
        "steps_samples": min((len(v) for v in segments.values()), default=0),
        "tail_steps_ms": tail_steps(sent, started, steps, names),
    }


def tail_steps(
    sent: dict[int, float],
    started: dict[int, float],
    steps: dict[int, dict[str, float]],
    names: Sequence[str],
    share: float = 0.02,
) -> list[dict[str, float]]:
    """The slowest ``share`` of the wakes (what the p99 is made of), slowest first: each one's
    whole length and its steps' (ms), so a tail says which step it was spent in."""
    slowest = sorted(sent, key=lambda seq: started[seq] - sent[seq], reverse=True)
    tail = []
    for seq in slowest[: max(1, round(len(sent) * share))]:
        at = {"commit": sent[seq], **steps.get(seq, {}), "handler": started[seq]}
        row = {"total": round((started[seq] - sent[seq]) * 1000, 3)}
        for a, b in itertools.pairwise(n for n in names if n in at):
            row[f"{a}->{b}"] = round((at[b] - at[a]) * 1000, 3)
        tail.append(row)
    return tail


def wake_figures(sent: dict[int, float], started: dict[int, float], **extra: Any) -> list[dict]:
    lat = [(started[s] - sent[s]) * 1000 for s in sent]
    common = {
        "samples": len(lat),
        "min_ms": round(min(lat), 3),
        "max_ms": round(max(lat), 3),
        **extra,
    }
    return [
        figure("wake_p50", "ms", percentile(lat, 50), **common),
        figure("wake_p99", "ms", percentile(lat, 99), **common),
    ]


def wake_seqs(n: int, warmup: int = 5) -> tuple[list[int], list[int]]:
    """Negative seqs are warm-up items (first LISTEN, plan caches) and are not reported."""
    return list(range(-warmup, 0)), list(range(n))
