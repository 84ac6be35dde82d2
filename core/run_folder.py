"""An output folder belongs to one run: one live process at a time, one task and model config.

Two runs writing into one folder interleave checkpoints and result files;
a run of another task (or of another model) in a finished folder
overwrites its `bert_config.json` and its checkpoints, and the folder then
loads something other than what its files say. So a run claims its output
folder before any work:

- the lock: `fcntl.flock` on `.run.lock`, kept open for the life of the
  process. The kernel releases it when the process ends in any way, SIGKILL
  included, so a lock is never stale in the sense of blocking; the file's
  content (PID, host, start time) names the holder to a refused run, and is
  cleared on a normal exit, so content found by a new holder tells that the
  last run was stopped.
- the owner: `run_owner.json` records the task (`pretraining:mlm_nsp`,
  `classification:sst-2`, `squad`, ...) and the model config. A run of the
  same task and config resumes as before; any other is refused, naming both.
  A folder written before stamps existed is recognised by the files its
  runner leaves (`LEGACY_MARKERS`) and by its `bert_config.json`; when they
  agree with this run it is adopted and stamped.

A folder holding nothing but the stamp and the lock holds no work, so a run
that failed before writing anything does not keep the folder from a
corrected rerun; and a run that created the folder removes it again when it
fails so (`removed_unless_used`): a refusal leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from typing import Any

from absl import logging

from core.atomic import write_atomically

LOCK_NAME = ".run.lock"
OWNER_NAME = "run_owner.json"
# Files each runner family writes, for folders written before `run_owner.json` existed.
LEGACY_MARKERS = {
    "pretraining": ("checkpoint", "export"),
    "classification": ("sweep_results.tsv", "submission", "saved_model"),
    "squad": ("predictions.json", "nbest_predictions.json"),
    "ner": ("valid_predictions.txt", "test_predictions.txt", "feature_tagger.weights.h5"),
}
_CONFIG_FILE = "bert_config.json"
_HELD: dict[str, int] = {}  # folder -> descriptor of its locked `.run.lock`


class FolderInUse(OSError):
    """Another live process holds the folder (an OSError, so runners report it in one line)."""


class FolderOwned(ValueError):
    """The folder holds another task's or another model's run."""


def claim(folder: str, task: str, config: Mapping[str, Any]) -> None:
    """Locks `folder` for this process, then checks and writes its owner (see the module).

    Settings the folder's stamp holds and `config` does not give are kept: a
    run that only evaluates does not give the training settings (class
    weights, say), and must not erase the record a resumed training is
    checked against.
    """
    lock(folder)
    check_owner(folder, task, config)
    previous = read_owner(folder)
    if previous and previous.get("task") == task and isinstance(previous.get("config"), dict):
        config = {**previous["config"], **config}
    write_atomically(os.path.join(folder, OWNER_NAME), json.dumps(
        {"task": task, "config_sha256": config_hash(config), "config": dict(config)},
        indent=2, sort_keys=True) + "\n")


def lock(folder: str) -> None:
    """Takes `folder`'s lock or raises FolderInUse naming the holder; held until exit."""
    folder = os.path.abspath(folder)
    if folder in _HELD:
        return
    path = os.path.join(folder, LOCK_NAME)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(_read_holder(descriptor))
        os.close(descriptor)
        raise FolderInUse(f"{folder} is in use by another run ({holder}; lock {path}): wait "
                          "for it to end, or pass another output folder") from None
    previous = _read_holder(descriptor)
    if previous:
        logging.warning("Took over the lock of %s from %s, which no longer runs", folder,
                        _describe(previous))
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                      "started": started}).encode(), 0)
    _HELD[folder] = descriptor


def release(folder: str) -> None:
    """Clears and unlocks `folder`'s lock (also done for every held folder at exit)."""
    descriptor = _HELD.pop(os.path.abspath(folder), None)
    if descriptor is None:
        return
    # Cleared, not removed: removing would let a waiting process lock a file no one else sees.
    os.ftruncate(descriptor, 0)
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    os.close(descriptor)


@contextlib.contextmanager
def removed_unless_used(folder: str) -> Iterator[None]:
    """Runs the body; if it fails and `folder` (with any parents) did not exist before, removes
    what it created, provided nothing beside the stamp and the lock was written there.

    Only a folder this run made is removed, never one a user had, and never
    one holding work (logs, checkpoints): those are kept for a resume.
    """
    created = None if "://" in folder else _first_missing(os.path.abspath(folder))
    try:
        yield
    except BaseException:
        if created is not None:
            _remove_unused(os.path.abspath(folder), created)
        raise


def _first_missing(folder: str) -> str | None:
    """The outermost of `folder` and its parents that does not exist (None: it exists)."""
    missing = None
    while not os.path.exists(folder):
        missing, folder = folder, os.path.dirname(folder)
    return missing


def _remove_unused(folder: str, created: str) -> None:
    release(folder)
    try:
        if set(os.listdir(folder)) - {LOCK_NAME, OWNER_NAME}:
            return
        for name in (LOCK_NAME, OWNER_NAME):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, name))
        while True:  # the folder, then each parent this run made
            os.rmdir(folder)
            if folder == created:
                return
            folder = os.path.dirname(folder)
    except OSError:  # best effort: the run's own error is the one to report
        return


@atexit.register
def _release_all() -> None:
    for folder in list(_HELD):
        release(folder)


def _read_holder(descriptor: int) -> dict:
    try:
        return json.loads(os.pread(descriptor, 4096, 0).decode() or "{}")
    except (ValueError, UnicodeDecodeError):
        return {}


def _describe(holder: Mapping[str, Any]) -> str:
    if not holder:
        return "a process that has not yet written its PID"
    return (f"PID {holder.get('pid')} on {holder.get('host')}, started "
            f"{holder.get('started')}")


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True).encode()).hexdigest()


def check_owner(folder: str, task: str, config: Mapping[str, Any]) -> None:
    """Raises FolderOwned when `folder` holds work of another task or model config."""
    if not _holds_work(folder):
        return
    owner = read_owner(folder)
    if owner is None:
        owner = _infer_owner(folder)
        if owner is None:
            return
    their_task, their_config = owner.get("task"), owner.get("config")
    # An unstamped folder tells its task family at most (not the GLUE task, say).
    same_task = their_task == task or (owner.get("inferred") and
                                       their_task in (None, task.split(":")[0]))
    differences = _differences(their_config, config) if their_config is not None else []
    if same_task and not differences:
        return
    source = "its files" if owner.get("inferred") else OWNER_NAME
    what = (f"a {their_task} run" if not differences else
            f"a {their_task} run with " + ", ".join(f"{key}={their}" for key, their, _ in
                                                    differences))
    this = (f"a {task} run" if not differences else
            f"a {task} run with " + ", ".join(f"{key}={ours}" for key, _, ours in differences))
    raise FolderOwned(f"{folder} holds {what} (from {source}); this is {this}. Pass another "
                      "output folder, or remove this one to start over")


def read_owner(folder: str) -> dict | None:
    return read_stamp(os.path.join(folder, OWNER_NAME), "task", FolderOwned,
                      "remove it if this folder is yours to reuse")


def read_stamp(path: str, key: str, refused: type[Exception], advice: str) -> dict | None:
    """The JSON object in the stamp file `path` (None when there is none).

    A stamp that is not JSON, or names no `key` as a string, raises
    `refused`, naming the file and ending in `advice`: a folder whose stamp
    cannot be read is not one to write into.
    """
    try:
        with open(path, encoding="utf-8") as reader:
            stamp = json.load(reader)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as error:
        raise refused(f"{path} is not valid JSON ({error}); {advice}") from None
    if not isinstance(stamp, dict) or not isinstance(stamp.get(key), str):
        raise refused(f"{path} names no {key}; {advice}")
    return stamp


def _holds_work(folder: str) -> bool:
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return False
    return any(entry not in (LOCK_NAME, OWNER_NAME) and not entry.startswith(".")
               for entry in entries)


def _infer_owner(folder: str) -> dict | None:
    """The task family and config of a folder an unstamped runner wrote, where its files tell."""
    families = [family for family, markers in LEGACY_MARKERS.items()
                if any(os.path.exists(os.path.join(folder, marker)) for marker in markers)]
    config = None
    try:
        with open(os.path.join(folder, _CONFIG_FILE), encoding="utf-8") as reader:
            config = json.load(reader)
    except (OSError, ValueError):
        pass
    if not families and config is None:
        return None
    return {"task": families[0] if families else None, "config": config, "inferred": True}


def _differences(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> list[tuple]:
    """(key, their value, our value) for every field both configs have that differs.

    Only shared fields: a field added to the config in a later version is no
    reason to refuse a folder written before it.
    """
    return [(key, theirs[key], ours[key]) for key in sorted(set(theirs) & set(ours))
            if theirs[key] != ours[key]]
