"""An export's output folder: written whole, and only where nothing of the user's can be lost.

An export (Google's, Hugging Face's or TF Hub's layout) is a whole folder,
and a re-export must replace it whole: files of an older export left beside
the new ones would load as part of it. Replacing a folder deletes what is in
it, so an export writes only into

- a folder that does not exist yet, or an empty one;
- a folder an earlier export of the same kind wrote: it holds the stamp
  `export_owner.json`, which names that kind and every file the export
  wrote (as a run folder holds `run_owner.json`, `core.run_folder`), and
  nothing else.

Anything else is refused, naming why, before any weights are loaded: an
existing file; the source itself, or a folder that holds the source at any
depth (the export would delete what it reads); a folder stamped by another
kind of export; a folder with anything else in it, hidden files included.
The checks run again just before the swap, so a file that appeared during
the export is not lost either.

The new folder is filled under a temporary name beside the target and
renamed into place complete (`core.atomic.atomic_folder`). A write that
finds no room (full disk, `ulimit -f`) is reported by the path the file
would have had in the output folder, not by the temporary one, which is
removed with everything else that was written.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from collections.abc import Iterable, Iterator

from core import atomic, faults
from core.run_folder import read_stamp

STAMP_NAME = "export_owner.json"
_ADVICE = "pass a new or empty folder"
# The temporary suffix of TensorFlow's atomic writes (`file_io.atomic_write_string_to_file`).
_TF_TEMPORARY = re.compile(r"\.tmp[0-9a-f]{32}$")


class ExportFolderRefused(ValueError):
    """The output folder is not one an export may replace (see the module)."""


def check_export_folder(folder: str | os.PathLike, kind: str,
                        sources: Iterable[str | os.PathLike] = (),
                        argument: str = "folder") -> str:
    """Raises ExportFolderRefused unless an export of `kind` may replace `folder`.

    Reads only names and the stamp, never a weight, so callers run it before
    any loading.

    Args:
      folder: the output folder as the user gave it.
      kind: the export's layout (`google`, `huggingface`, `tf_hub`); only a
        folder stamped with the same kind is replaced.
      sources: paths the export reads (a folder, a file or a checkpoint
        prefix); a folder that is or holds one is refused.
      argument: how messages name `folder`: the argument (`output_dir`) from
        Python, the flag (`--output_dir`) from the command line.

    Returns:
      The folder's real path (symbolic links resolved), where the export goes.
    """
    if not isinstance(folder, (str, os.PathLike)) or not os.fspath(folder):
        raise ExportFolderRefused(f"{argument} must be a folder path (a non-empty str or "
                                  f"os.PathLike), got {type(folder).__name__} {folder!r}")
    named = f"{argument} {os.fspath(folder)!r}"
    path = os.path.realpath(os.fspath(folder))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ExportFolderRefused(f"{named} is an existing file, not a folder; {_ADVICE}")
    for source in sources:
        where = os.path.realpath(os.fspath(source))
        if not _exists(where):
            continue
        if where == path:
            raise ExportFolderRefused(f"{named} is the source; an export replaces its folder "
                                      f"whole, so {_ADVICE}")
        if where.startswith(os.path.join(path, "")):
            raise ExportFolderRefused(f"{named} holds the source {os.fspath(source)!r}; an "
                                      f"export replaces its folder whole, so {_ADVICE}")
    if not os.path.isdir(path) or not os.listdir(path):
        return path
    stamp = read_stamp(os.path.join(path, STAMP_NAME), "kind", ExportFolderRefused,
                       f"{named} is no export to replace: {_ADVICE}")
    if stamp is None:  # only its top level is read: it may be a large tree of the user's
        raise ExportFolderRefused(f"{named} holds files no export wrote "
                                  f"({_listing(os.listdir(path))}); an export replaces its "
                                  f"folder whole, so {_ADVICE}")
    if stamp["kind"] != kind:
        raise ExportFolderRefused(f"{named} holds a {stamp['kind']} export ({STAMP_NAME}); "
                                  f"this is a {kind} export: {_ADVICE}")
    files = stamp.get("files") if isinstance(stamp.get("files"), list) else []
    foreign = _entries(path) - {entry for entry in files if isinstance(entry, str)} - {STAMP_NAME}
    if foreign:
        raise ExportFolderRefused(f"{named} holds files its earlier {kind} export did not "
                                  f"write ({_listing(foreign)}); move them out, or {_ADVICE}")
    return path


@contextlib.contextmanager
def export_folder(folder: str | os.PathLike, kind: str,
                  sources: Iterable[str | os.PathLike] = (),
                  argument: str = "folder") -> Iterator[str]:
    """Yields an empty staging folder to fill; it replaces `folder`, stamped, if the block succeeds.

    `folder` is checked (`check_export_folder`, same arguments) on entry and
    again just before the swap. A write in the block that finds no room is
    raised as an OSError naming the file's path in `folder`.
    """
    sources = list(sources)
    path = check_export_folder(folder, kind, sources, argument)
    with atomic.atomic_folder(path) as staging:
        try:
            yield staging
            atomic.write_atomically(os.path.join(staging, STAMP_NAME), json.dumps(
                {"kind": kind, "files": sorted(_entries(staging))}, indent=2) + "\n")
            check_export_folder(folder, kind, sources, argument)
        except Exception as error:
            room = faults.no_room_error(error)
            if room is None:
                raise
            raise OSError(room.errno, room.strerror,
                          _final_path(room, staging, path)) from error


def _exists(path: str) -> bool:
    """Whether something is at `path`, or files start with it (a checkpoint prefix's)."""
    return os.path.lexists(path) or bool(glob.glob(glob.escape(path) + ".*"))


def _entries(folder: str) -> set[str]:
    """Every file and folder under `folder`, as paths relative to it."""
    entries = set()
    for root, folders, files in os.walk(folder, onerror=_raise):
        for name in folders + files:
            entries.add(os.path.relpath(os.path.join(root, name), folder))
    return entries


def _raise(error: OSError) -> None:
    """A folder that cannot be listed is not one to replace: its error reaches the user."""
    raise error


def _listing(entries: Iterable[str], shown: int = 3) -> str:
    """The first few of `entries` for a message; a folder's contents go under its name."""
    entries = set(entries)
    tops = sorted(entry for entry in entries if os.path.dirname(entry) not in entries)
    more = f" and {len(tops) - shown} more" if len(tops) > shown else ""
    return ", ".join(tops[:shown]) + more


def _final_path(error: OSError, staging: str, path: str) -> str:
    """Where the file `error` names would have been in the output folder (the folder itself
    when the error names no file in the staging folder, as a failed `write` does not)."""
    for named in (error.filename, error.filename2):
        if named is None:
            continue
        relative = os.path.relpath(os.path.abspath(os.fsdecode(named)), staging)
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            continue
        # A file written under a temporary name lands under its own; a temporary folder
        # inside (files staged to move into the folder above it) is no part of the path.
        *folders, leaf = relative.split(os.sep)
        parts = [part for part in folders if atomic.temporary_target(part) is None]
        parts.append(atomic.temporary_target(leaf) or leaf)
        return _TF_TEMPORARY.sub("", os.path.join(path, *parts))
    return path
