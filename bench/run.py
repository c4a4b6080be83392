"""Benchmark harness: the product ("ours") against peer queues and a raw-SQL limit.

Each system is an adapter script bench/systems/<name>.py (contract: systems/README.md),
run in its own subprocess against its own freshly created database, once per
workload variant and repetition. Prints a min/median/max table and ratios of medians,
and writes results JSON + a PNG chart to bench/out/.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SYSTEMS_DIR = BENCH / "systems"
OUT = BENCH / "out"

ALL_SYSTEMS = ["ours", "raw", "pgqueuer", "procrastinate", "django-tasks-db"]
ALL_WORKLOADS = ["drain", "wake", "wake_loaded", "enqueue", "depth", "bloat", "raw", "fairness"]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"

# Workload variants at full size: each entry is one adapter run (one fresh database).
PLANS: dict[str, list[dict[str, int | float]]] = {
    "drain": [{"n": 20_000, "procs": 1}, {"n": 20_000, "procs": 2}],
    "wake": [{"n": 200, "interval-ms": 20}],
    # the wake with CPU hogs beside it (--hogs busy loops, as a noisy neighbour or a busy web
    # process would be): the adapter runs its wake workload; its figures are named wake_loaded_*
    "wake_loaded": [{"n": 200, "interval-ms": 20}],
    "enqueue": [{"n": 2_000, "bulk-n": 20_000, "batch": 1_000}],
    "depth": [{"n": 500, "depth": 10_000}, {"n": 500, "depth": 1_000_000}],
    "bloat": [{"n": 20_000, "churn": 1_000_000}],
    "raw": [{"n": 20_000, "seconds": 10}],
    # tenant A's backlog (--depth), tenant B enqueueing one item every --interval-ms for
    # --seconds (ours only: no peer has tenants)
    "fairness": [{"depth": 1_000_000, "interval-ms": 50, "seconds": 60}],
}
# Workloads the harness runs as another adapter workload under load: (the adapter's workload,
# the prefix its figures get instead of the workload's name).
LOADED = {"wake_loaded": ("wake", "wake_loaded")}

# --quick divides these by 10 (pgbench seconds by 5); the rest (procs, batch, the
# 20 ms wake interval) stay as they are.
QUICK_SCALED = {"n": 10, "bulk-n": 10, "depth": 10, "churn": 10, "seconds": 5}

# "ours/raw-limit" compares an ours figure with these raw figures (besides the raw
# system's figure of the same name).
RAW_LIMITS = {
    "drain_p1": ["raw_k1_p1", "raw_k100_p1", "pgbench_k1_c1", "pgbench_k100_c1"],
    "drain_p2": ["raw_k1_p2", "raw_k100_p2", "pgbench_k1_c2", "pgbench_k100_c2"],
}


def interpreter(system: str) -> Path:
    """The product runs under the repo's venv; peers under bench/.venv."""
    if system == "ours":
        return REPO / ".venv" / "bin" / "python"
    return BENCH / ".venv" / "bin" / "python"


def db_url(admin_url: str, dbname: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, ""))


def recreate_db(admin_url: str, dbname: str, drop_only: bool = False) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        # FORCE: a worker left behind by a crashed run must not block the drop.
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )
        if not drop_only:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


@dataclass
class System:
    name: str
    python: Path
    script: Path
    workloads: list[str]
    configs: list[str]
    config_workloads: dict[str, list[str]]
    notes: dict[str, str]

    def runs(self, workload: str) -> list[str]:
        workload = LOADED.get(workload, (workload, ""))[0]
        if workload not in self.workloads:
            return []
        return [c for c in self.configs if workload in self.config_workloads.get(c, self.workloads)]


@dataclass
class Series:
    system: str
    config: str
    workload: str
    figure: str
    unit: str
    values: list[float] = field(default_factory=list)
    extras: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def last_json_line(stdout: str) -> Any:
    for line in reversed(stdout.strip().splitlines()):
        if line.strip():
            return json.loads(line)
    raise ValueError("adapter printed nothing on stdout")


def discover(names: list[str], notes: list[str]) -> list[System]:
    found = []
    for name in names:
        script, python = SYSTEMS_DIR / f"{name}.py", interpreter(name)
        if not script.exists():
            notes.append(f"skip {name}: {script.relative_to(REPO)} does not exist")
            continue
        if not python.exists():
            notes.append(f"skip {name}: interpreter {python} is missing")
            continue
        proc = subprocess.run(
            [str(python), str(script), "describe"], capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            notes.append(f"skip {name}: `describe` failed: {proc.stderr.strip()[-300:]}")
            continue
        info = last_json_line(proc.stdout)
        found.append(
            System(
                name,
                python,
                script,
                info["workloads"],
                info["configs"],
                info.get("config_workloads", {}),
                info.get("notes", {}),
            )
        )
    return found


def variant_args(variant: dict[str, int | float], quick: bool) -> list[str]:
    args = []
    for key, value in variant.items():
        if quick and key in QUICK_SCALED:
            value = (
                max(1, value // QUICK_SCALED[key])
                if isinstance(value, int)
                else max(1.0, value / QUICK_SCALED[key])
            )
        args += [f"--{key}", str(value)]
    return args


def run_one(
    system: System,
    config: str,
    workload: str,
    args: list[str],
    admin_url: str,
    timeout: float,
    log_path: Path,
    hogs: int = 0,
) -> list[dict[str, Any]]:
    """One adapter run on a fresh database; under load (``LOADED``) with ``hogs`` busy loops
    running beside it for the whole run, its figures renamed."""
    if workload in LOADED:
        adapter_workload, prefix = LOADED[workload]
        with cpu_hogs(hogs):
            figs = run_one(system, config, adapter_workload, args, admin_url, timeout, log_path)
        for f in figs:
            f["figure"] = f["figure"].replace(adapter_workload, prefix, 1)
            f.setdefault("extra", {})["cpu_hogs"] = hogs
        return figs
    dbname = "bench_" + system.name.replace("-", "_")
    recreate_db(admin_url, dbname)
    cmd = [
        str(system.python),
        str(system.script),
        workload,
        "--dsn",
        db_url(admin_url, dbname),
        "--config",
        config,
        *args,
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # Own session: a timed-out adapter is killed together with its workers.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=REPO,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        stdout, stderr = proc.communicate()
        log_path.write_text(f"$ {' '.join(cmd)}\n--- TIMEOUT\n{stdout}\n--- stderr\n{stderr}")
        raise RuntimeError(f"timed out after {timeout:.0f}s") from None
    log_path.write_text(f"$ {' '.join(cmd)}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
    if proc.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        raise RuntimeError(f"exit {proc.returncode}: {tail[0][:300]}")
    result = last_json_line(stdout)
    return result if isinstance(result, list) else [result]


class cpu_hogs:
    """``n`` processes that spin on a CPU each (``while True: pass``), for a ``with`` block."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> None:
        self.procs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)
        ]

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def fmt(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) >= 0.01 else f"{value:.2e}"


def print_table(series: list[Series]) -> None:
    header = ["system", "config", "workload", "figure", "unit", "min", "median", "max", "reps"]
    rows = [
        [
            s.system,
            s.config,
            s.workload,
            s.figure,
            s.unit,
            fmt(min(s.values)),
            fmt(s.median),
            fmt(max(s.values)),
            str(len(s.values)),
        ]
        for s in series
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {5, 6, 7, 8}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(header))
    print("  ".join("-" * w for w in widths))
    previous = None
    for s, row in zip(series, rows, strict=True):
        if previous is not None and s.figure != previous:
            print()
        previous = s.figure
        print(line(row))


def ratios(series: list[Series]) -> list[dict[str, Any]]:
    """ours/peer and ours/raw-limit from medians of this run (same figure name)."""
    by_figure: dict[str, list[Series]] = {}
    for s in series:
        by_figure.setdefault(s.figure, []).append(s)
    out = []
    for s in series:
        if s.system != "ours":
            continue
        others = [(o, "peer") for o in by_figure[s.figure] if o.system not in ("ours", "raw")]
        others += [(o, "raw-limit") for o in by_figure[s.figure] if o.system == "raw"]
        for limit in RAW_LIMITS.get(s.figure, []):
            others += [(o, "raw-limit") for o in by_figure.get(limit, []) if o.system == "raw"]
        for other, kind in others:
            out.append(
                {
                    "figure": s.figure,
                    "unit": s.unit,
                    "ours_config": s.config,
                    "kind": kind,
                    "vs": f"{other.system}/{other.config}",
                    "vs_figure": other.figure,
                    "ours": s.median,
                    "other": other.median,
                    "ratio": s.median / other.median if other.median else float("nan"),
                }
            )
    return out


def print_ratios(rows: list[dict[str, Any]]) -> None:
    """One line per pair: `ours[/config] / other` with the kind (peer or raw-limit)."""
    for row in rows:
        better = "lower is better" if row["unit"] == "ms" else "higher is better"
        ours = "ours" + ("" if row["ours_config"] == "default" else f"/{row['ours_config']}")
        vs = row["vs"] + ("" if row["vs_figure"] == row["figure"] else f" {row['vs_figure']}")
        print(
            f"  {row['figure']:<19} {ours:<13} / {vs:<42} {row['ratio']:8.3f}x  "
            f"[ours/{row['kind']}]  ({fmt(row['ours'])} / {fmt(row['other'])} "
            f"{row['unit']}, {better})"
        )


# Workloads whose figures share one panel (they are one system's related numbers).
PANEL_BY_WORKLOAD = {"raw", "bloat"}


def chart(series: list[Series], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on CI or here
    import matplotlib.pyplot as plt

    panels: dict[str, list[Series]] = {}
    for s in series:
        key = s.workload if s.workload in PANEL_BY_WORKLOAD else s.figure
        panels.setdefault(key, []).append(s)
    cols = min(4, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.6 * rows), squeeze=False)
    colors = {name: f"C{i}" for i, name in enumerate(ALL_SYSTEMS)}
    for ax, (key, group) in zip(axes.flat, panels.items(), strict=False):
        mixed = len({s.figure for s in group}) > 1
        labels = [
            "\n".join(
                [s.system]
                + ([s.config] if s.config != "default" else [])
                + ([s.figure] if mixed else [])
            )
            for s in group
        ]
        med = [s.median for s in group]
        err = [
            [m - min(s.values) for m, s in zip(med, group, strict=True)],
            [max(s.values) - m for m, s in zip(med, group, strict=True)],
        ]
        bars = ax.bar(
            range(len(group)),
            med,
            yerr=err,
            capsize=3,
            color=[colors.get(s.system, "C9") for s in group],
        )
        ax.bar_label(bars, labels=[fmt(m) for m in med], fontsize=6, padding=2)
        ax.set_xticks(range(len(group)), labels, rotation=35, ha="right", fontsize=6.5)
        units = sorted({s.unit for s in group})
        ax.set_title(f"{key} ({', '.join(units)})", fontsize=9)
        # Systems differ by orders of magnitude (120/s vs 50,000/s; 0.5 ms vs 500 ms).
        if min(med) > 0 and max(med) / min(med) > 20:
            ax.set_yscale("log")
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(title + "   (bar = median, whisker = min..max)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def environment(admin_url: str) -> dict[str, Any]:
    import psycopg

    env: dict[str, Any] = {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    try:
        with psycopg.connect(admin_url) as conn:
            row = conn.execute("SELECT version()").fetchone()
            env["postgres"] = row[0] if row else "?"
            for name in ("shared_buffers", "synchronous_commit", "fsync"):
                row = conn.execute(f"SHOW {name}").fetchone()
                env[name] = row[0] if row else "?"
    except psycopg.Error as exc:
        env["postgres"] = f"unreachable: {exc}"
    return env


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Workloads: "
        + ", ".join(ALL_WORKLOADS)
        + ". Systems: "
        + ", ".join(ALL_SYSTEMS)
        + ". See bench/systems/README.md.",
    )
    p.add_argument(
        "--systems",
        default=",".join(ALL_SYSTEMS),
        help="comma-separated systems (default: %(default)s)",
    )
    p.add_argument(
        "--workloads",
        default=",".join(ALL_WORKLOADS),
        help="comma-separated workloads (default: %(default)s)",
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions (default: %(default)s)")
    p.add_argument(
        "--quick", action="store_true", help="scale all counts down ~10x for a smoke run"
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help="admin URL; each system gets its own bench_<system> database, "
        "dropped and recreated per run (default: %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="seconds allowed per adapter run (default: %(default)s)",
    )
    p.add_argument(
        "--hogs",
        type=int,
        default=1,
        help="CPU hogs (busy loops) beside the wake_loaded workload (default: %(default)s)",
    )
    p.add_argument(
        "--keep-db", action="store_true", help="keep the bench_<system> databases at the end"
    )
    p.add_argument(
        "--configs",
        default="",
        help="comma-separated configs to run (e.g. default: each system's shipped defaults "
        "only; default: every config each adapter describes)",
    )
    ns = p.parse_args(argv)
    ns.configs = [c for c in ns.configs.split(",") if c]
    ns.systems = [s for s in ns.systems.split(",") if s]
    ns.workloads = [w for w in ns.workloads.split(",") if w]
    unknown = [w for w in ns.workloads if w not in PLANS]
    if unknown:
        p.error(f"unknown workloads: {', '.join(unknown)}")
    return ns


def exclusive_run() -> Any:
    """Serialise harness runs: they share the bench_<system> databases and the CPUs."""
    OUT.mkdir(exist_ok=True)
    lock = (OUT / ".run.lock").open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("note: another bench/run is in progress; waiting for it to finish", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    return lock  # held until the process exits


def main(argv: list[str] | None = None) -> int:
    args = parse_cli(argv)
    lock = exclusive_run()  # noqa: F841 - keeps the lock file open
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logs = OUT / "logs" / stamp
    notes: list[str] = []
    systems = discover(args.systems, notes)
    for note in notes:
        print(f"note: {note}", flush=True)

    series: dict[tuple[str, str, str], Series] = {}
    failures: list[str] = []
    for system in systems:
        for workload in args.workloads:
            if not system.runs(workload):
                why = system.notes.get(workload, "not implemented by the adapter")
                notes.append(f"{system.name} does not run {workload}: {why}")
                print(f"note: {notes[-1]}", flush=True)

    started = time.time()
    # Repetition-major order: drift (autovacuum, page cache, thermal) spreads over
    # all systems instead of biasing whichever ran last.
    for rep in range(1, args.reps + 1):
        for workload in args.workloads:
            for variant in PLANS[workload]:
                vargs = variant_args(variant, args.quick)
                for system in systems:
                    for config in system.runs(workload):
                        if args.configs and config not in args.configs:
                            continue
                        label = f"{system.name}/{config} {workload} {' '.join(vargs)}"
                        print(f"[rep {rep}/{args.reps}] {label} ...", end=" ", flush=True)
                        log_path = logs / (
                            f"{system.name}-{config}-{workload}-"
                            f"{'-'.join(vargs[1::2])}-rep{rep}.log"
                        )
                        t0 = time.time()
                        try:
                            figs = run_one(
                                system,
                                config,
                                workload,
                                vargs,
                                args.database_url,
                                args.timeout,
                                log_path,
                                hogs=args.hogs,
                            )
                        except Exception as exc:
                            failures.append(f"{label} rep {rep}: {exc} (log: {log_path})")
                            print(f"FAILED ({exc})", flush=True)
                            continue
                        shown = []
                        for f in figs:
                            key = (system.name, config, f["figure"])
                            s = series.setdefault(
                                key, Series(system.name, config, workload, f["figure"], f["unit"])
                            )
                            s.values.append(float(f["value"]))
                            s.extras.append(f.get("extra", {}))
                            shown.append(f"{f['figure']}={fmt(float(f['value']))}")
                        print(f"{', '.join(shown)} ({time.time() - t0:.1f}s)", flush=True)

    if not args.keep_db:
        for system in systems:
            recreate_db(args.database_url, "bench_" + system.name.replace("-", "_"), True)

    order = {w: i for i, w in enumerate(ALL_WORKLOADS)}
    sys_order = {s: i for i, s in enumerate(ALL_SYSTEMS)}
    # Figures in the order the adapters emitted them (fresh before churned, k1 before k100).
    seen = {key[2]: i for i, key in reversed(list(enumerate(series)))}
    ordered = sorted(
        series.values(),
        key=lambda s: (
            order.get(s.workload, 99),
            seen[s.figure],
            sys_order.get(s.system, 99),
            s.config != "default",  # the default config first, then the variants
            s.config,
        ),
    )
    print(
        f"\n== results ({'quick' if args.quick else 'full'}, {args.reps} reps, "
        f"{time.time() - started:.0f}s) =="
    )
    if ordered:
        print_table(ordered)
    ratio_rows = ratios(ordered)
    print("\n== ratios (medians of this run) ==")
    if ratio_rows:
        print_ratios(ratio_rows)
    else:
        print("  (none: `ours` produced no figures in this run)")
    for note in notes:
        print(f"note: {note}")
    for failure in failures:
        print(f"FAILED: {failure}")

    OUT.mkdir(exist_ok=True)
    result = {
        "stamp": stamp,
        "quick": args.quick,
        "reps": args.reps,
        "argv": sys.argv[1:],
        "environment": environment(args.database_url),
        "notes": notes,
        "failures": failures,
        "series": [
            {
                "system": s.system,
                "config": s.config,
                "workload": s.workload,
                "figure": s.figure,
                "unit": s.unit,
                "values": s.values,
                "min": min(s.values),
                "median": s.median,
                "max": max(s.values),
                "extra": s.extras,
            }
            for s in ordered
        ],
        "ratios": ratio_rows,
    }
    json_path, png_path = OUT / f"results-{stamp}.json", OUT / f"chart-{stamp}.png"
    json_path.write_text(json.dumps(result, indent=2))
    if ordered:
        chart(
            ordered,
            png_path,
            f"bench {stamp} ({'quick' if args.quick else 'full'}, {args.reps} reps)",
        )
        shutil.copyfile(png_path, OUT / "latest.png")
    shutil.copyfile(json_path, OUT / "latest.json")
    print(
        f"\nwrote {json_path.relative_to(REPO)}"
        + (f" and {png_path.relative_to(REPO)}" if ordered else "")
        + f"; logs in {logs.relative_to(REPO)}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
