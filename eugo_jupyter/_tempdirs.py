"""Ray's temp folders inside a 0700 folder of ours, and removing only what we created.

Ray makes its temp, session, socket and log folders mode 0777 (``try_make_directory_shared``),
including the ``--temp-dir`` it is given. So every cluster (and the embedded Ray) gets an outer
folder ``<tmp>/eugo-<id>`` that we create with mode 0700, and Ray's temp dir is ``r`` inside it:
other local users cannot reach anything below, whatever modes Ray sets there.

>>> outer = make_private("c-1234abcd")          # doctest: +SKIP
>>> ray_temp_dir(outer)                         # doctest: +SKIP
'/tmp/eugo-c-1234abcd/r'
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["expected_dir", "make_private", "ray_temp_dir", "remove_ours"]

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def expected_dir(owner_id: str) -> str:
    """The outer folder of cluster ``owner_id``: short, since Ray puts unix sockets below it."""
    if not _ID_RE.fullmatch(owner_id):
        raise ValueError(f"{owner_id!r} is not a cluster id (letters, digits, - and _).")
    return f"{tempfile.gettempdir()}/eugo-{owner_id}"


def ray_temp_dir(outer: str) -> str:
    """Ray's ``--temp-dir`` inside ``outer`` (Ray makes this one 0777; ``outer`` stays 0700)."""
    return f"{outer.rstrip('/')}/r"


def make_private(outer: str) -> str:
    """Create ``outer`` with mode 0700 (or tighten it if we own it); returns it.

    Refuses a path that is a link or belongs to someone else: another user could have placed it
    there to read what Ray writes.
    """
    path = Path(outer)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise PermissionError(
            f"{outer} exists and is not a folder of this account; remove it, or set TMPDIR to a "
            "private folder, and launch again."
        )
    os.chmod(path, 0o700)  # mkdir's mode is reduced by the umask, never widened; be exact
    return outer


def remove_ours(owner_id: str, outer: str) -> bool:
    """Remove ``outer`` if it is exactly the folder we create for ``owner_id``; True if removed.

    A record on disk names the folder, but only the path we would have made for that id, owned
    by this account and not a link, is ever deleted.
    """
    try:
        if outer != expected_dir(owner_id):
            return False
        info = os.lstat(outer)
    except (ValueError, OSError):
        return False
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return False
    shutil.rmtree(outer, ignore_errors=True)
    return not os.path.exists(outer)
