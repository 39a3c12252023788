"""Owner-only paths: the data dir holds the embedded database, its password, the broker's
files and the watcher's spool (event payloads), none of which another local user may read."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["private_dir", "private_file"]


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents 0700; make ``path`` 0700 also when it existed."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty if missing, 0600 from the first byte; make an existing one 0600."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)
    return path
