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
import re
import secrets
import shutil
from typing import IO, Iterator

from absl import logging

_TEMPORARY_SUFFIX = ".partial"
# `temporary_name`'s shape: `.<name>.<pid>-<8 hex>.partial`.
_TEMPORARY = re.compile(r"\..+\.(\d+)-[0-9a-f]{8}" + re.escape(_TEMPORARY_SUFFIX))


def temporary_name(path: str | os.PathLike) -> str:
    """A fresh hidden name beside `path`, unique to this process and call."""
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}-{secrets.token_hex(4)}"
                                f"{_TEMPORARY_SUFFIX}")


def temporary_target(name: str) -> str | None:
    """The name a `temporary_name` stands in for (`.NAME.PID-HEX.partial` -> NAME), else None."""
    match = _TEMPORARY.fullmatch(name)
    return name[1:match.start(1) - 1] if match else None


@contextlib.contextmanager
def temporary_folder(path: str | os.PathLike) -> Iterator[str]:
    """A new empty folder under a temporary name beside `path`, removed when the block ends.

    For writers that stage several files and move them into place one by
    one; the name carries this process' ID, so a rerun can tell a killed
    writer's folder from a live one's (`remove_dead_temporaries`).
    """
    staging = temporary_name(path)
    os.mkdir(staging)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_dead_temporaries(folder: str | os.PathLike,
                            pattern: re.Pattern = _TEMPORARY) -> list[str]:
    """Removes the temporary files and folders in `folder` whose writing process is gone.

    A writer killed midway (SIGKILL, a lost machine) cannot remove its
    temporary name; nothing else would. Only names that `pattern` matches in
    full are considered (by default `temporary_name`'s shape; the first group
    that matched is the writer's process ID), and only when that process is
    not running (or started after the leftover was last changed: a reused
    ID), so a live writer's file is never touched. Call it from the folder's
    own writer, on the machine that wrote there. Returns the removed paths.
    """
    folder = os.fspath(folder)
    try:
        entries = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry)
        path = os.path.join(folder, entry)
        if not match or writer_alive(int(next(g for g in match.groups() if g)), path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        logging.info("Removed %s, left by a writer that was stopped", path)
        removed.append(path)
    return removed


def writer_alive(pid: int, path: str) -> bool:
    """Whether process `pid` may still be writing `path` (when unsure: yes)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    except OverflowError:  # not a process ID this system can have
        return False
    started = _process_start_time(pid)
    try:
        modified = os.lstat(path).st_mtime
    except FileNotFoundError:
        return True  # its writer just renamed or removed it: let it be
    # A process started after the leftover's last change did not write it (reused ID).
    return started is None or started <= modified + 1.0


def _process_start_time(pid: int) -> float | None:
    """When process `pid` started, in seconds since the epoch, where /proc tells (Linux)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as reader:
            fields = reader.read().rpartition(")")[2].split()
        with open("/proc/stat", encoding="ascii") as reader:
            boot = next(float(line.split()[1]) for line in reader if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError, StopIteration):
        return None


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[str]:
    """Yields an empty staging folder to fill; it replaces the folder at `path` if the block succeeds.

    Readers see the old folder or the new one, never a mix of files. A folder
    cannot be renamed over a non-empty one, so an old folder is first moved
    aside under a temporary name (a dead writer's leftovers are recognisable
    by `remove_dead_temporaries`) and removed after the new one is in place.
    Whatever was at `path` is gone, so call it only on a folder the caller
    owns (a cache entry, a run's own subfolder); a folder a user names for
    an export goes through `core.export_folder`, which checks it first.
    """
    path = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with temporary_folder(path) as staging:
        yield staging
        old = temporary_name(path)
        if os.path.lexists(path):
            os.replace(path, old)
        os.replace(staging, path)
        shutil.rmtree(old, ignore_errors=True)


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
