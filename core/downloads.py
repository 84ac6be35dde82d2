"""Files fetched over HTTP into the cache: once, whole, verified, and resumed after a cut.

Pre-trained weights run to hundreds of megabytes, so a download that stops
midway keeps what it got (`.NAME.download` beside the target) and the next
attempt asks only for the rest with an HTTP Range request; a server that
answers with the whole file instead is read from the start. The target name
appears only once the file has its announced size and its format checks out
(`verify_file`), so a file in the cache is always one that was checked.

A machine without network must learn so in seconds, not minutes: one short
socket timeout, no retry of a connection that failed. Only a transfer that
was making progress is resumed on the spot, a few times.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from absl import logging

TIMEOUT_SECONDS = 10.0  # to connect, and the longest silence tolerated mid-transfer
RESUME_ATTEMPTS = 3
_CHUNK = 1 << 20
# The most an archive may unpack to: Google's largest release (BERT-Large, a 1.3 GB
# checkpoint) fits twice over; a member claiming or holding more is refused.
MAX_UNPACKED_BYTES = 3 << 30
_USER_AGENT = "bert-tf2-downloader"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class DownloadError(OSError):
    """A file that could not be fetched, failed its check, or has no usable cache folder to go
    to; names the URL, the file or the folder."""


class _Interrupted(Exception):
    """The connection ended before the body did."""


def cache_dir() -> Path:
    """Root of the download cache, `$BERT_CACHE_DIR` or `~/.cache/bert_tf2` (created on demand).

    Raises DownloadError naming the variable and the path when the path is
    a file, lies under a file, or cannot be created or written to: mkdir's
    own "File exists" names neither.
    """
    given = os.environ.get("BERT_CACHE_DIR")
    root = Path(given) if given else Path.home() / ".cache" / "bert_tf2"
    where = (f"BERT_CACHE_DIR={given}" if given else
             f"the download cache {root} (the default; set BERT_CACHE_DIR for another folder)")
    problem = None
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        problem = "is a file, not a folder"
    except NotADirectoryError:
        parent = next(folder for folder in root.parents if folder.exists())
        problem = f"cannot be created: {parent} is not a folder"
    except PermissionError as error:
        problem = f"cannot be created: permission denied for {error.filename or root}"
    else:
        if not os.access(root, os.W_OK | os.X_OK):
            problem = "is a folder this user cannot write to"
    if problem:
        raise DownloadError(f"{where}: {problem}; the cache must be a folder this user can "
                            "write to")
    return root


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Holds an exclusive lock named after `path`, so two processes never fill it at once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def download(url: str, destination: str | os.PathLike, progress: IO[str] | None = sys.stderr,
             timeout: float = TIMEOUT_SECONDS, attempts: int = RESUME_ATTEMPTS) -> Path:
    """Fetches `url` to `destination` unless it is already there; returns `destination`.

    Raises DownloadError naming the URL when the server cannot be reached or
    refuses (at once), when the transfer keeps being cut (the partial file is
    kept for the next call), or when the file fails `verify_file` (then it is
    removed: resuming a corrupt file cannot mend it).
    """
    destination = Path(destination)
    if destination.is_file():
        return destination
    partial = destination.with_name(f".{destination.name}.download")
    with locked(destination):
        if destination.is_file():  # another process finished it while we waited
            return destination
        logging.info("Downloading %s to %s", url, destination)
        total = None
        for attempt in range(attempts):
            before = _size(partial)
            try:
                total = _fetch(url, partial, progress, timeout)
                break
            except _Interrupted as cut:
                if attempt + 1 == attempts or _size(partial) <= before:
                    raise DownloadError(
                        f"{url}: the transfer stopped at {_size(partial)} bytes ({cut}); the "
                        f"part received is kept in {partial}, and the next attempt resumes "
                        "from there") from None
        received = _size(partial)
        if total is not None and received != total:
            partial.unlink()
            raise DownloadError(f"{url}: received {received} bytes, the server announced "
                                f"{total}; the file was discarded")
        try:
            verify_file(partial, destination.name)
        except DownloadError as error:
            partial.unlink()
            raise DownloadError(f"{url}: {error}; the file was discarded") from None
        os.replace(partial, destination)
    return destination


def _fetch(url: str, partial: Path, progress: IO[str] | None, timeout: float) -> int | None:
    """Appends the rest of `url` to `partial`; returns the full size, when the server said."""
    start = _size(partial)
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    if start:
        request.add_header("Range", f"bytes={start}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and start:  # the partial file is longer than the file now is
            partial.unlink()
            return _fetch(url, partial, progress, timeout)
        raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise DownloadError(f"{url}: cannot connect ({reason})") from None
    with response:
        announced = response.headers.get("Content-Length")
        total = int(announced) if announced is not None else None
        content_range = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range") or "")
        if response.status == 206:
            if not (start and content_range and int(content_range[1]) == start):
                if not start:
                    raise DownloadError(f"{url}: the server sent part of the file unasked")
                partial.unlink()  # another part than the one asked for: start over
                return _fetch(url, partial, progress, timeout)
            mode = "ab"
            total = int(content_range[3]) if content_range[3] != "*" else None
        else:  # a fresh start, or a server that ignored Range and sends it all
            start, mode = 0, "wb"
        meter = _Progress(partial.name[1:-len(".download")], start, total, progress)
        with open(partial, mode) as writer:
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except (http.client.IncompleteRead, OSError) as error:
                    meter.close()
                    raise _Interrupted(str(error) or type(error).__name__) from None
                if not chunk:
                    break
                writer.write(chunk)
                meter.update(len(chunk))
        meter.close()
        if total is not None and _size(partial) < total:
            raise _Interrupted("the connection closed early")
    return total


def verify_file(path: str | os.PathLike, name: str) -> None:
    """Checks that the file at `path` is a sound `name` by its suffix (.zip, .json, .safetensors).

    A cut or garbled transfer of the right length happens (proxies, disks),
    and loading such a file later fails far from its cause.
    """
    path = Path(path)
    if name.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as archive:
                _check_declared_sizes(name, archive.infolist())  # before testzip inflates them
                bad = archive.testzip()
        except DownloadError:
            raise
        except (zipfile.BadZipFile, OSError) as error:
            raise DownloadError(f"{name}: not a readable zip archive ({error})") from None
        if bad is not None:
            raise DownloadError(f"{name}: corrupt zip archive (member {bad} fails its CRC check)")
    elif name.endswith(".json"):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise DownloadError(f"{name}: not valid JSON ({error})") from None
    elif name.endswith(".safetensors"):
        _verify_safetensors(path, name)


def _verify_safetensors(path: Path, name: str) -> None:
    """The header parses and its tensors fill the data that follows it exactly."""
    size = path.stat().st_size
    with open(path, "rb") as reader:
        prefix = reader.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < length <= size - 8:
            raise DownloadError(f"{name}: not a safetensors file (header length {length} in a "
                                f"file of {size} bytes)")
        try:
            header = json.loads(reader.read(length))
        except (ValueError, UnicodeDecodeError) as error:
            raise DownloadError(f"{name}: unreadable safetensors header ({error})") from None
    if not isinstance(header, dict):
        raise DownloadError(f"{name}: the safetensors header is not a JSON object")
    try:
        end = max((entry["data_offsets"][1] for key, entry in header.items()
                   if key != "__metadata__"), default=0)
    except (TypeError, KeyError, IndexError):
        raise DownloadError(f"{name}: a safetensors header entry lacks data_offsets") from None
    if end != size - 8 - length:
        raise DownloadError(f"{name}: its tensors need {end} bytes of data, the file holds "
                            f"{size - 8 - length}")


def extract_zip(archive: str | os.PathLike, folder: str | os.PathLike, members: Sequence[str],
                max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """Unpacks the wanted members of `archive` into the existing `folder`.

    Releases zip one folder (`name/file`) or loose files; either way the
    caller gets the files directly in `folder`, without the top folder.
    Only members whose path (below that folder) matches one of the
    `members` patterns (`fnmatch`, e.g. `bert_model.ckpt.data-*`) are
    unpacked; the others are counted in the log. Their sizes may add up to
    `max_bytes` at most: the sizes the archive declares are checked before
    anything is written, and the bytes actually unpacked while they are
    written, since a damaged or hostile archive may declare less than it
    holds.

    Args:
      archive: the zip file.
      folder: where the members go; it must exist.
      members: patterns of the member paths to unpack.
      max_bytes: the most bytes the unpacked members may hold together.

    Raises DownloadError naming the archive and the member for a member
    that would land outside `folder` (absolute paths, `..`), sizes over
    `max_bytes`, or data that does not match the member's header.
    """
    folder = Path(folder)
    with zipfile.ZipFile(archive) as bundle:
        files = [member for member in bundle.infolist() if not member.is_dir()]
        tops = {member.filename.split("/", 1)[0] for member in files}
        strip = len(tops) == 1 and all("/" in member.filename for member in files)
        wanted, skipped = [], []
        for member in files:
            relative = member.filename.split("/", 1)[1] if strip else member.filename
            parts = Path(relative).parts
            if Path(relative).is_absolute() or ".." in parts:
                raise DownloadError(f"{archive}: member {member.filename} points outside the "
                                    "folder it unpacks into")
            if any(fnmatch.fnmatchcase(relative, pattern) for pattern in members):
                wanted.append((member, folder.joinpath(*parts)))
            else:
                skipped.append(member.filename)
        if skipped:
            logging.info("%s: left out %d member(s) not needed: %s", archive, len(skipped),
                         ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else ""))
        _check_declared_sizes(archive, [member for member, _ in wanted], max_bytes)
        for member, target in wanted:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                _unpack(bundle, member, target)
            except DownloadError as error:
                target.unlink(missing_ok=True)
                raise DownloadError(f"{archive}: member {member.filename} {error}") from None


def _check_declared_sizes(archive: str | os.PathLike, members: Sequence[zipfile.ZipInfo],
                          max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """Refuses members whose declared sizes add up to more than `max_bytes`, naming the one
    that crosses it."""
    declared = 0
    for member in members:
        declared += member.file_size
        if declared > max_bytes:
            raise DownloadError(f"{archive}: member {member.filename} brings the unpacked size "
                                f"to {declared} bytes, over the limit of {max_bytes}")


def _unpack(bundle: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path) -> None:
    """Writes one member to `target`, never more bytes than its header declares.

    zipfile itself stops at the declared size and then fails the CRC check;
    the count here keeps the limit whatever the decompressor does. The
    DownloadError's message continues a sentence that names the member.
    """
    written = 0
    try:
        with bundle.open(member) as reader, open(target, "wb") as writer:
            while chunk := reader.read(_CHUNK):
                written += len(chunk)
                if written > member.file_size:
                    raise DownloadError(f"holds more than the {member.file_size} bytes its "
                                        "header declares")
                writer.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise DownloadError(f"does not match its header ({error})") from None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class _Progress:
    """One line of bytes, rate and time left, rewritten in place on a terminal."""

    def __init__(self, name: str, start: int, total: int | None, stream: IO[str] | None):
        self.name, self.done, self.total, self.stream = name, start, total, stream
        self.first, self.began, self.shown, self.done_shown = start, time.monotonic(), 0.0, -1
        self.width = 0
        self.interactive = bool(stream and getattr(stream, "isatty", lambda: False)())

    def update(self, count: int) -> None:
        self.done += count
        if time.monotonic() - self.shown >= (0.5 if self.interactive else 10.0):
            self._show()

    def close(self) -> None:
        if self.done != self.done_shown:
            self._show()
        if self.stream and self.interactive:
            self.stream.write("\n")
            self.stream.flush()

    def _show(self) -> None:
        if self.stream is None:
            return
        self.shown, self.done_shown = time.monotonic(), self.done
        rate = (self.done - self.first) / max(self.shown - self.began, 1e-6)
        line = f"{self.name}: {_megabytes(self.done)}"
        if self.total:
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            line += (f" of {_megabytes(self.total)} ({100 * self.done // self.total}%), "
                     f"{_megabytes(rate)}/s, ETA {_duration(left)}")
        else:
            line += f", {_megabytes(rate)}/s"
        self.width = max(self.width, len(line))  # blank out the end of a longer previous line
        self.stream.write(("\r" + line.ljust(self.width)) if self.interactive else line + "\n")
        self.stream.flush()


def _megabytes(count: float) -> str:
    return f"{count / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
