# Sourced by bin/run and bin/test: find Python 3.12+, make .venv, install the lock requirements.txt
# (every package pinned with its hashes, the runtime lock's versions; bin/lock writes it) when it
# changed. Prints one line and exits 2 when no suitable Python is found. bin/test also sets up
# the system packages its tests use (ensure_test_tools, below).

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

# The system packages the tests use besides the venv: Debian's chromium (the browser test drives
# it with Playwright; Playwright's own browser download is never used) and pgbouncer (the pooler
# tests start their own). TEST_TOOLS says what bin/test does when one is missing: "install"
# (the default: apt-get where it may, as root or with passwordless sudo; otherwise the tests
# that need it skip, and one line says what to install), "skip" (never install) or "required"
# (install, or stop: .ci/run).
TEST_PACKAGES=(chromium pgbouncer)
declare -A TEST_PACKAGE_USE=([chromium]="the browser test is" [pgbouncer]="the pooler tests are")

has_command() {
    # pgbouncer lives in /usr/sbin, not always on PATH.
    PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1
}

may_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    [ "$(id -u)" -eq 0 ] && return 0
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null
}

ensure_test_tools() {
    local mode="${TEST_TOOLS:-install}" package missing=()
    case "$mode" in
    install | skip | required) ;;
    *)
        echo "error: TEST_TOOLS must be install, skip or required (got '$mode')" >&2
        exit 2
        ;;
    esac
    for package in "${TEST_PACKAGES[@]}"; do
        has_command "$package" || missing+=("$package")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$mode" != skip ] && may_install; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
        echo "== installing ${missing[*]} (apt-get) for the tests that use them"
        { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            $sudo apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 || true
    fi
    for package in "${missing[@]}"; do
        has_command "$package" && continue
        if [ "$mode" = required ]; then
            echo "error: $package is not installed and could not be (TEST_TOOLS=required): apt-get install $package" >&2
            exit 2
        fi
        echo "$package is not installed, so ${TEST_PACKAGE_USE[$package]} skipped: apt-get install $package"
    done
}
