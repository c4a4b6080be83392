"""The locks (issue 21): every package CI and the image install is pinned with its hashes, the
development lock at the runtime lock's versions, and each range of the .in files met by its
lock (bin/lock writes them; this catches a hand edit or a lock left behind)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _lock(name: str) -> dict[str, str]:
    """package -> pinned version; every entry is ``name==version`` followed by its hashes."""
    text = (ROOT / name).read_text()
    entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 1)[1] if text.startswith("#") else text)
    pins: dict[str, str] = {}
    for entry in entries:
        first = entry.strip().splitlines()[0] if entry.strip() else ""
        if not first or first.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+) \\", first)
        assert m, f"{name}: not a pin with hashes: {first!r}"
        assert "--hash=sha256:" in entry, f"{name}: {m.group(1)} has no hash"
        pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def _ranges(name: str) -> list[Requirement]:
    found = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            found.append(Requirement(line))
    return found


def _django_sources() -> list[Path]:
    """The other supported Djangos' inputs (the contract suite's venvs: bin/test --django)."""
    return sorted(ROOT.glob("requirements-django*.in"))


def test_each_lock_pins_every_range_of_its_in_file_with_hashes() -> None:
    for source, lock in (
        ("requirements-runtime.in", "requirements-runtime.txt"),
        ("requirements.in", "requirements.txt"),
        *((p.name, p.with_suffix(".txt").name) for p in _django_sources()),
    ):
        pins = _lock(lock)
        for req in _ranges(source):
            name = canonicalize_name(req.name)
            assert name in pins, f"{lock} does not pin {req.name} ({source}): run bin/lock"
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"{lock} pins {req.name}=={pins[name]}, outside {source}'s {req.specifier}"
            )


def test_the_development_lock_holds_the_runtime_lock_as_it_is() -> None:
    runtime, development = _lock("requirements-runtime.txt"), _lock("requirements.txt")
    assert {name: development.get(name) for name in runtime} == runtime


def test_the_image_and_the_setup_install_the_locks_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r requirements-runtime.txt" in dockerfile
    setup = (ROOT / "bin" / "_setup.sh").read_text()
    assert "--require-hashes" in setup and '-r "$lock"' in setup
    assert 'LOCKS=("$ROOT/requirements.txt")' in setup
    # Django's range in the package lets every locked Django in (the locks' own and the other
    # supported ones), and the tasks extra's range the django-tasks the 5.2 lock pins.
    pyproject = (ROOT / "pyproject.toml").read_text()
    [django] = re.findall(r'"(Django[^"]*)"', pyproject)
    [tasks] = re.findall(r'"(django-tasks[^"]*)"', pyproject)
    locks = [_lock("requirements-runtime.txt")] + [
        _lock(p.with_suffix(".txt").name) for p in _django_sources()
    ]
    assert len(locks) == 3  # 6.1, 5.2 and 6.0: every supported Django
    for pins in locks:
        assert Requirement(django).specifier.contains(pins["django"])
    assert Requirement(tasks).specifier.contains(_lock("requirements-django52.txt")["django-tasks"])
