"""The settings for a transaction pooler in front of PostgreSQL (the reference site's
DATABASE_POOLER and DATABASE_DIRECT_URL, the queue's WORKQUEUE["POOLER"] and
["LISTEN_DATABASE_ALIAS"]), and where the listener connects, without a database."""

from __future__ import annotations

from pathlib import Path

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured

from project.database import DIRECT_ALIAS, database_settings, pooler_mode
from tests.helpers import queue_settings
from workers.listen import connection_kwargs

ROOT = Path(__file__).resolve().parents[2]
APP = "postgres://workqueue_app@pooler.internal:6432/workqueue"
DIRECT = "postgres://workqueue_app@db.internal:5432/workqueue"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Set some variables (the others unset) and read them as the settings do."""
    for name in (
        "DATABASE_URL",
        "SYSTEM_DATABASE_URL",
        "ADMIN_DATABASE_URL",
        "DATABASE_DIRECT_URL",
        "DATABASE_POOLER",
    ):
        monkeypatch.delenv(name, raising=False)

    def read(**values: str) -> environ.Env:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        return environ.Env()

    return read


def test_no_alias_sends_anything_at_connect_a_pooler_would_refuse(env) -> None:  # type: ignore[no-untyped-def]
    """PgBouncer refuses a startup option (``unsupported startup parameter: options``); the
    logins' session settings are theirs instead (wqcore.conf.LOGIN_SETTINGS)."""
    databases = database_settings(env(DATABASE_URL=APP), ROOT)
    for alias, entry in databases.items():
        assert "options" not in entry.get("OPTIONS", {}), alias
        assert not entry.get("DISABLE_SERVER_SIDE_CURSORS"), alias


def test_behind_a_transaction_pooler_no_alias_uses_server_side_cursors(env) -> None:  # type: ignore[no-untyped-def]
    read = env(DATABASE_URL=APP, DATABASE_POOLER="transaction")
    assert pooler_mode(read) == "transaction"
    databases = database_settings(read, ROOT)
    assert {alias: e["DISABLE_SERVER_SIDE_CURSORS"] for alias, e in databases.items()} == {
        "default": True,
        "system": True,
        "admin": True,
    }


def test_the_owner_defaults_to_the_direct_server(env) -> None:  # type: ignore[no-untyped-def]
    """Migrations want a session of their own: the owner's default is the server itself."""
    databases = database_settings(env(DATABASE_URL=APP, DATABASE_DIRECT_URL=DIRECT), ROOT)
    assert (databases["admin"]["HOST"], databases["admin"]["USER"]) == ("db.internal", "postgres")
    assert (databases["system"]["HOST"], databases["system"]["PORT"]) == ("pooler.internal", 6432)
    without = database_settings(env(DATABASE_DIRECT_URL=""), ROOT)
    assert without["admin"]["HOST"] == "pooler.internal"


@pytest.mark.parametrize("value", ["", "none", "None", " transaction "])
def test_the_pooler_modes(env, value: str) -> None:  # type: ignore[no-untyped-def]
    assert pooler_mode(env(DATABASE_POOLER=value)) == (value.strip().lower() or "none")


def test_an_unknown_pooler_mode_is_refused_in_one_line(env) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ImproperlyConfigured, match="DATABASE_POOLER must be one of") as raised:
        pooler_mode(env(DATABASE_POOLER="session"))
    assert "\n" not in str(raised.value)


def test_the_direct_alias_is_there_only_when_set(env) -> None:  # type: ignore[no-untyped-def]
    assert DIRECT_ALIAS not in database_settings(env(DATABASE_URL=APP), ROOT)
    direct = database_settings(env(DATABASE_URL=APP, DATABASE_DIRECT_URL=DIRECT), ROOT)[
        DIRECT_ALIAS
    ]
    assert (direct["HOST"], direct["PORT"], direct["NAME"]) == ("db.internal", 5432, "workqueue")


def test_the_listener_connects_where_it_can_keep_a_session(settings) -> None:  # type: ignore[no-untyped-def]
    """LISTEN needs a session: the listener reaches PostgreSQL itself (LISTEN_DATABASE_ALIAS)
    when one is named; behind a transaction pooler with none it does not listen at all."""
    with queue_settings(POOLER="none", LISTEN_DATABASE_ALIAS=None):
        params = connection_kwargs()
        assert params is not None and params["prepare_threshold"] is None
    with queue_settings(POOLER="transaction", LISTEN_DATABASE_ALIAS=None):
        assert connection_kwargs() is None
    # A named alias (the reference site's "direct", from DATABASE_DIRECT_URL): its parameters.
    with queue_settings(POOLER="transaction", LISTEN_DATABASE_ALIAS="admin"):
        params = connection_kwargs()
    owner = settings.DATABASES["admin"]
    assert params is not None
    assert (params["dbname"], params["user"]) == (owner["NAME"], owner["USER"])
