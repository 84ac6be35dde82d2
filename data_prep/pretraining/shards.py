"""Where pre-training data comes from and goes to: input chunks, output shards, completion markers.

`create_pretraining_data` never holds the corpus in memory. One pass here
reads every input file as bytes, checks that each line is UTF-8 (so a bad
byte stops the run before anything is written, naming file and line) and
notes the byte ranges of consecutive groups of documents: the chunks that
workers later read, tokenize and turn into instances on their own.

Output shards hold contiguous runs of chunks, so shard files complete one
after another while the corpus is processed, and a run that stops part way
keeps the shards it finished. With fewer chunks than shards, each chunk
deals its instances round-robin over its own run of shards instead.
`ShardWriter` appends chunk results to a hidden temporary file per shard
and renames it into place once the shard's last chunk is in. A complete
shard then gets a small JSON marker, `.<shard name>.complete.json` in
the same folder, recording every setting that shapes its content; a rerun
with the same settings skips shards whose marker and size still match.
The training input pipeline skips such hidden files in its globs.

Shards, markers and the staging folder are written under `core.atomic`'s
temporary names, which carry the writing process' ID
(`.<name>.<pid>-<random>.partial`). A run killed part way leaves them
behind; the next run over the same outputs removes those whose process is
gone, and leaves those of a live run alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import re
import shutil
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

import numpy as np

from core.arguments import FieldError, FieldFileNotFoundError
from core.atomic import atomic_open, remove_dead_temporaries, write_atomically
from text.text_files import decode_line

_BLOCK_BYTES = 1 << 22


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Byte ranges `(path, start, stop)` holding `documents` consecutive documents."""

    pieces: tuple[tuple[str, int, int], ...]
    documents: int


@dataclasses.dataclass(frozen=True)
class CorpusIndex:
    chunks: list[Chunk]
    documents: int
    files_without_documents: list[str]


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Files matching each pattern of `input_file`, sorted per pattern; a pattern matching
    nothing is an error."""
    paths = []
    for pattern in patterns:
        if "://" in pattern:
            raise FieldError("{input_file}={0}: only local files are read here", pattern)
        matches = sorted(path for path in glob.glob(os.path.expanduser(pattern))
                         if os.path.isfile(path))
        if not matches:
            raise FieldFileNotFoundError("{input_file}={0} matches no files", pattern)
        paths += matches
    return paths


def index_corpus(paths: Sequence[str], documents_per_chunk: int) -> CorpusIndex:
    """Chunks of `documents_per_chunk` documents (the last may hold fewer).

    A document is a run of lines that are not blank (after stripping
    whitespace, as the original); blank lines separate documents, and so
    does the end of a file.
    """
    chunks: list[Chunk] = []
    pieces: list[tuple[str, int, int]] = []
    in_chunk = 0  # documents in the chunk being gathered
    documents = 0
    without_documents = []
    for path in paths:
        piece_start = None  # where this file's part of the current chunk begins
        file_documents = 0
        for offsets in _document_offsets(path):
            for offset in offsets.tolist():
                if in_chunk == documents_per_chunk:
                    if piece_start is not None:
                        pieces.append((path, piece_start, offset))
                    chunks.append(Chunk(tuple(pieces), in_chunk))
                    pieces, in_chunk, piece_start = [], 0, None
                if piece_start is None:
                    piece_start = offset
                in_chunk += 1
            file_documents += len(offsets)
        if piece_start is not None:
            pieces.append((path, piece_start, os.path.getsize(path)))
        if not file_documents:
            without_documents.append(path)
        documents += file_documents
    if in_chunk:
        chunks.append(Chunk(tuple(pieces), in_chunk))
    return CorpusIndex(chunks, documents, without_documents)


def _document_offsets(path: str) -> Iterator[np.ndarray]:
    """Byte offsets of the first line of each document in `path`, a block of lines at a time.

    Works on bytes with numpy, several times faster than a loop over lines:
    every block is checked to be UTF-8 in one decode (an error names file and
    line), and a line is blank when it holds only ASCII whitespace, or when
    its other bytes decode to whitespace (rare: U+00A0, U+3000, ...).
    """
    offset = lines_before = 0
    previous_blank = True
    rest = b""
    with open(path, "rb") as reader:
        while True:
            block = reader.read(_BLOCK_BYTES)
            data = rest + block
            if block:  # keep a trailing partial line for the next block
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            if not data:
                if block:
                    continue
                return
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as error:
                line = data.count(b"\n", 0, error.start)
                start = data.rfind(b"\n", 0, error.start) + 1
                stop = data.find(b"\n", error.start)
                decode_line(data[start:stop if stop >= 0 else len(data)], path,
                            lines_before + line + 1)  # raises, naming the spot
            starts, blank = _blank_lines(data)
            follows_blank = np.concatenate([[previous_blank], blank[:-1]])
            yield offset + starts[~blank & follows_blank]
            previous_blank = bool(blank[-1])
            lines_before += len(blank)
            offset += len(data)
            if not block:
                return


def _blank_lines(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start offset of each line of `data` and whether the line is blank."""
    values = np.frombuffer(data, dtype=np.uint8)
    stops = np.flatnonzero(values == ord("\n"))
    if not data.endswith(b"\n"):
        stops = np.append(stops, len(values))
    starts = np.concatenate([[0], stops[:-1] + 1])
    # Bytes other than what str.strip() removes among ASCII: \t \n \v \f \r, \x1c-\x1f, space.
    content = (values > 32) | (values < 9) | ((values > 13) & (values < 28))
    content_count = np.add.reduceat(content, starts, dtype=np.int32)  # no line is empty: "\n"
    blank = content_count == 0
    non_ascii_count = np.add.reduceat(values >= 0x80, starts, dtype=np.int32)
    for line in np.flatnonzero(~blank & (content_count == non_ascii_count)).tolist():
        blank[line] = not data[starts[line]:stops[line]].decode("utf-8").strip()
    return starts, blank


def read_chunk_lines(chunk: Chunk) -> tuple[list[str], list[int]]:
    """The chunk's non-blank lines, stripped, and the index of each document's first line."""
    lines: list[str] = []
    document_starts: list[int] = []
    for path, start, stop in chunk.pieces:
        with open(path, "rb") as reader:
            reader.seek(start)
            text = reader.read(stop - start).decode("utf-8")
        in_document = False
        for line in text.split("\n"):
            line = line.strip()
            if line and not in_document:
                document_starts.append(len(lines))
            if line:
                lines.append(line)
            in_document = bool(line)
    return lines, document_starts


def output_paths(output_files: Sequence[str], num_output_shards: int | None) -> list[str]:
    """The shard files: the comma list as given, or one name numbered `-0000i-of-0000n`."""
    if num_output_shards is None or num_output_shards == len(output_files):
        return list(output_files)
    if len(output_files) != 1:
        raise FieldError("{num_output_shards}={0} disagrees with the {1} names in "
                         "{output_file}", num_output_shards, len(output_files))
    stem, suffix = os.path.splitext(output_files[0])
    return [f"{stem}-{shard:05d}-of-{num_output_shards:05d}{suffix}"
            for shard in range(num_output_shards)]


def chunk_shards(chunk: int, num_chunks: int, num_shards: int) -> range:
    """The shards that chunk `chunk` writes to: one of them, or its own run of several."""
    if num_chunks >= num_shards:
        shard = chunk * num_shards // num_chunks
        return range(shard, shard + 1)
    return range(_ceil_div(chunk * num_shards, num_chunks),
                 _ceil_div((chunk + 1) * num_shards, num_chunks))


def last_chunk_of_shard(shard: int, num_chunks: int, num_shards: int) -> int:
    """The chunk whose results complete shard `shard`."""
    if num_chunks >= num_shards:
        return _ceil_div((shard + 1) * num_chunks, num_shards) - 1
    return shard * num_chunks // num_shards


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def marker_path(shard_path: str) -> Path:
    path = Path(shard_path)
    return path.with_name(f".{path.name}.complete.json")


def is_complete(shard_path: str, settings: dict) -> bool:
    """Whether `shard_path` was completed by a run with exactly these settings."""
    try:
        marker = json.loads(marker_path(shard_path).read_text(encoding="utf-8"))
        return marker["settings"] == settings and os.path.getsize(shard_path) == marker["bytes"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def mark_complete(shard_path: str, settings: dict, instances: int) -> None:
    """Writes the shard's marker, whole or not at all, so that a marker present is one a run
    finished: a rerun trusts it to skip the shard."""
    content = {"settings": settings, "instances": instances, "bytes": os.path.getsize(shard_path)}
    write_atomically(marker_path(shard_path), json.dumps(content, indent=1, sort_keys=True))


def remove_dead_leftovers(outputs: Sequence[str]) -> list[str]:
    """Removes the temporary files and folders of killed runs writing `outputs`; returns them.

    Only names this module makes for these very outputs are considered, and
    only when the process whose ID the name carries is gone (or the ID now
    belongs to a process started after the leftover was last written to).
    """
    removed = []
    by_folder: dict[str, list[str]] = {}
    for path in outputs:
        by_folder.setdefault(os.path.dirname(os.path.abspath(path)), []).append(
            os.path.basename(path))
    for folder, names in by_folder.items():
        alternatives = "|".join(re.escape(name) for name in names)
        # `core.atomic.temporary_name` of a shard, a marker, or the staging folder.
        pattern = re.compile(rf"\.(?:{alternatives})(?:\.complete\.json)?"
                             rf"\.(\d+)-[0-9a-f]{{8}}\.partial")
        removed += remove_dead_temporaries(folder, pattern)
    return removed


def file_identity(path: str) -> list:
    """What tells a changed input file: absolute path, size and modification time."""
    status = os.stat(path)
    return [os.path.abspath(path), status.st_size, status.st_mtime_ns]


def append_file(source: BinaryIO, target: BinaryIO) -> None:
    """Copies the rest of `source` to `target`, inside the kernel where it can.

    `os.copy_file_range` spares the trip through user space: for the
    hundreds of MB of records a run appends, a tenth of the CPU time of a
    read/write loop, on a machine whose cores the workers need. The copy
    works on the descriptors' positions, so neither file may have anything
    pending in its Python buffer.
    """
    try:
        while os.copy_file_range(source.fileno(), target.fileno(), 1 << 30):
            pass
    except (AttributeError, OSError):  # not Linux, or a file system without it
        shutil.copyfileobj(source, target, 1 << 20)


class ShardWriter:
    """Appends staged chunk records to shard temporary files; renames and marks complete shards.

    Used as a context manager: when the block ends, shards still unfinished
    (the run failed or was interrupted) lose their temporary files.
    """

    def __init__(self, outputs: list[str], fingerprint: dict, complete: set[int], num_chunks: int):
        self._outputs, self._fingerprint, self._complete = outputs, fingerprint, complete
        self._num_chunks = num_chunks
        self._unfinished = contextlib.ExitStack()  # every open shard's atomic_open
        # shard -> (its atomic_open, the open temporary file, instances written)
        self._open: dict[int, tuple[contextlib.ExitStack, BinaryIO, int]] = {}
        self.instances = 0

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, *error) -> bool:
        self._open.clear()
        return self._unfinished.__exit__(*error)

    def add(self, chunk: int, staged_files: dict[int, tuple[str, int]]) -> None:
        """Appends chunk `chunk`'s staged files (`shard -> (file, instances)`), removing them."""
        for shard, (staged, count) in sorted(staged_files.items()):
            if shard not in self._complete:
                if shard not in self._open:
                    shard_stack = contextlib.ExitStack()
                    handle = shard_stack.enter_context(atomic_open(self._outputs[shard], "wb"))
                    self._unfinished.push(shard_stack)
                    self._open[shard] = (shard_stack, handle, 0)
                shard_stack, handle, written = self._open[shard]
                with open(staged, "rb") as source:
                    try:
                        append_file(source, handle)
                    except OSError as error:  # a failed write names no file: name the shard
                        raise OSError(error.errno, error.strerror, self._outputs[shard]) from None
                self._open[shard] = (shard_stack, handle, written + count)
                self.instances += count
                if chunk == last_chunk_of_shard(shard, self._num_chunks, len(self._outputs)):
                    self._finish(shard)
            os.remove(staged)

    def _finish(self, shard: int) -> None:
        shard_stack, _, written = self._open.pop(shard)
        shard_stack.close()  # closes the temporary file and renames it onto the shard
        mark_complete(self._outputs[shard], self._fingerprint, written)
