# Sourced by bin/run and bin/test: find Python 3.12+, make .venv, install the lock requirements.txt
# (every package pinned with its hashes, the runtime lock's versions; bin/lock writes it) when it
# changed. Prints one line and exits 2 when no suitable Python is found.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# The locks ensure_venv installs into $VENV, each over the one before it.
LOCKS=("$ROOT/requirements.txt")

use_django() {
    # Another supported Django than the locks' 6.1 (bin/test --django 5.2): a venv of its own,
    # requirements.txt with that Django's lock (requirements-django52.txt) installed over it.
    local name="django${1/./}" found
    if [ ! -f "$ROOT/requirements-$name.txt" ]; then
        found="$(cd "$ROOT" && ls requirements-django*.txt | sed -E 's/requirements-django([0-9])([0-9]+).txt/\1.\2/' | paste -sd' ')"
        echo "error: --django takes one of: $found (the locks' own is 6.1), not '${1:-}'" >&2
        exit 2
    fi
    VENV="$ROOT/.venv-$name"
    LOCKS+=("$ROOT/requirements-$name.txt")
}

find_python() {
    # pyenv's shims fail without PYENV_VERSION, so each candidate must actually run.
    local candidate
    for candidate in ${PYTHON:-} python3.13 python3.12 python3 "$HOME"/.pyenv/versions/3.1[23]*/bin/python; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

ensure_venv() {
    if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
        local python
        if ! python="$(find_python)"; then
            echo "error: Python 3.12 or newer with venv is needed: install python3.13 and python3.13-venv (apt-get install python3.13-venv), or set PYTHON=/path/to/python3.12" >&2
            exit 2
        fi
        rm -rf "$VENV"
        "$python" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip
    fi
    local stamp="$VENV/.requirements.sha256" want lock
    want="$(cat "${LOCKS[@]}" "$ROOT/requirements-runtime.txt" | sha256sum | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        # --require-hashes: a file whose hash is not the lock's is refused, and so is a package
        # the lock does not pin. A package an older lock had stays installed (nothing imports it).
        for lock in "${LOCKS[@]}"; do
            "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
                -r "$lock"
        done
        echo "$want" >"$stamp"
    fi
}

ensure_database() {
    # The set-up path: start the embedded server when DATABASE_URL is unset, then create (or
    # put back) the two logins. A wrong or unreachable database stops here with one line.
    if [ -z "${DATABASE_URL:-}" ]; then
        "$VENV/bin/python" -m project.embedded start >/dev/null || exit 2
    fi
    "$VENV/bin/python" "$ROOT/manage.py" create_logins --no-grants >/dev/null || exit 2
}
