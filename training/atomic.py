"""Result files that appear whole or not at all, with the permissions the user's umask asks for.

Every output is written under a hidden temporary name beside its target and
renamed onto it once complete, so a reader (or a rerun after a kill) never
sees half a file. `tempfile.mkstemp` would create the temporary file with
mode 0600 whatever the umask, leaving results private while the
checkpoints beside them are not; the temporary file is created here with
mode 0666 so the kernel applies the umask, as for any other new file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import IO, Iterator

_TEMPORARY_SUFFIX = ".partial"


def temporary_name(path: str | os.PathLike) -> str:
    """A fresh hidden name beside `path`, unique to this process and call."""
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}-{secrets.token_hex(4)}"
                                f"{_TEMPORARY_SUFFIX}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields the name of a new empty file to fill; renames it onto `path` if the block succeeds.

    For writers that need a file name rather than a handle (numpy memmaps);
    the temporary file is removed if the block raises.
    """
    path = os.fspath(path)
    temporary = temporary_name(path)
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None) -> Iterator[IO]:
    """`open(path, mode)` for writing, made atomic: the file appears at `path` only when closed."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as temporary:
        with open(temporary, mode, encoding=encoding, newline=newline) as writer:
            yield writer


def write_atomically(path: str | os.PathLike, content: str | bytes) -> None:
    """Writes `content` (text as UTF-8) to `path` atomically, creating its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(os.fspath(path))), exist_ok=True)
    with atomic_open(path, "wb" if isinstance(content, bytes) else "w") as writer:
        writer.write(content)
