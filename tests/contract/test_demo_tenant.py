"""manage.py create_demo_tenant: the demo login, with a password that stays the same."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tenancy.contexts import Role
from tenancy.models import Membership

User = get_user_model()


pytestmark = pytest.mark.usefixtures("committed")


def _run(password_file: Path) -> str:
    out = io.StringIO()
    call_command("create_demo_tenant", password_file=str(password_file), stdout=out)
    return out.getvalue().strip().splitlines()[-1].split("password: ")[1]


def test_the_demo_password_is_made_once_and_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    kept = tmp_path / ".demo-password"
    first = _run(kept)
    assert kept.read_text().strip() == first and (kept.stat().st_mode & 0o777) == 0o600
    assert _run(kept) == first  # a second run changes nothing
    user = User.objects.using("admin").get(username="admin")
    assert user.check_password(first) and user.is_staff and user.is_superuser
    assert Membership.objects.using("admin").get(user=user).role == Role.OWNER


def test_demo_password_from_the_environment_wins(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "from the environment")
    assert _run(tmp_path / ".demo-password") == "from the environment"
    assert not (tmp_path / ".demo-password").exists()
    assert User.objects.using("admin").get(username="admin").check_password("from the environment")
