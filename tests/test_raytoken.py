"""This account's Ray token file is made owner-only before clusters are launched or connected
to (``ray start`` writes a new one with mode 0644), issue 16. Real files in a temporary home."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from eugo_jupyter._raytoken import secure_token_file, token_path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_world_readable_token_and_folder_are_made_owner_only(home: Path) -> None:
    folder = home / ".ray"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    token = folder / "auth_token"
    token.write_text("secret")
    token.chmod(0o644)  # as `ray start` leaves it
    assert secure_token_file() == token
    assert _mode(token) == 0o600
    assert _mode(folder) == 0o700
    assert token.read_text() == "secret"  # the same token: clusters keep accepting it


def test_before_a_launch_a_missing_token_is_written_owner_only(home: Path) -> None:
    path = secure_token_file(create=True)
    assert path == home / ".ray" / "auth_token" == token_path()
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    assert len(path.read_text().strip()) >= 32


def test_connecting_never_creates_a_token(home: Path) -> None:
    assert secure_token_file() is None
    assert not (home / ".ray").exists()


def test_a_custom_token_path_keeps_its_shared_folder(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: the folder's mode is not ours to change
    token = shared / "token"
    token.write_text("secret")
    token.chmod(0o644)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    assert secure_token_file() == token
    assert _mode(token) == 0o600
    assert _mode(shared) == 0o1777


def test_a_link_is_not_followed(home: Path) -> None:
    target = home / "elsewhere"
    target.write_text("not a token")
    target.chmod(0o644)
    (home / ".ray").mkdir(mode=0o700)
    (home / ".ray" / "auth_token").symlink_to(target)
    secure_token_file()
    assert _mode(target) == 0o644
