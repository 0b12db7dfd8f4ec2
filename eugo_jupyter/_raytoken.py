"""This account's Ray token file: owner-only before any cluster is launched or connected to.

Ray keeps the token that opens every cluster of this account in ``~/.ray/auth_token`` (or
``$RAY_AUTH_TOKEN_PATH``), and ``ray start`` writes a new one with mode 0644: on a login node
whose home folders others can read, anyone could take it. :func:`secure_token_file` makes the
file 0600 and the default ``~/.ray`` folder 0700, and with ``create=True`` writes a missing token
itself (0600 from the first byte) so that ``ray start`` finds one and never writes its own.

>>> from eugo_jupyter._raytoken import secure_token_file
>>> secure_token_file()                 # doctest: +SKIP
PosixPath('/home/me/.ray/auth_token')
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .exceptions import ClusterError

__all__ = ["account_token", "secure_token_file", "token_path"]


def token_path() -> Path:
    """Where Ray reads this account's token from (``$RAY_AUTH_TOKEN_PATH`` first)."""
    custom = os.environ.get("RAY_AUTH_TOKEN_PATH", "").strip()
    return Path(custom).expanduser() if custom else Path.home() / ".ray" / "auth_token"


def _tighten(path: Path, mode: int) -> None:
    try:
        info = path.lstat()
    except OSError:
        return
    # Never follow a link (it could point at a file that is not the token) nor touch others' files.
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        return
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077 & mode)


def _generate() -> str:
    from ._raystate import new_token

    return new_token()


def secure_token_file(create: bool = False) -> Path | None:
    """Make the token file 0600 (its default folder 0700); returns its path, None if none.

    ``create=True`` (before a launch) writes a new token when there is none and no
    ``$RAY_AUTH_TOKEN`` gives one. A token given in the environment needs no file.
    """
    path = token_path()
    default_folder = path.parent == Path.home() / ".ray"
    if create and not os.environ.get("RAY_AUTH_TOKEN") and not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # written meanwhile by another launch: keep that one
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(_generate())
    if default_folder:
        # Only Ray's own folder: the folder of a custom path may be shared (/tmp) on purpose.
        _tighten(path.parent, 0o700)
    if not path.exists():
        return None
    _tighten(path, 0o600)
    return path


def account_token() -> str:
    """This account's Ray token (written first if there is none), for the nodes of another
    machine or a pod to use."""
    given = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if given:
        return given
    path = secure_token_file(create=True)
    if path is None:
        raise ClusterError("No Ray token could be written; check that ~/.ray is writable.")
    return path.read_text().strip()
