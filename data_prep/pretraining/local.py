"""The local pipeline: the per-chunk transform on all cores, its records in sharded TFRecord files.

The corpus is indexed into chunks (`shards.index_corpus`); worker processes
run `transform.chunk_records` on each and stage its records, dealt
round-robin over the chunk's target shards, in one file per shard; this
process appends the staged files to each shard's temporary file in chunk
order (`shards.ShardWriter`), renames shards into place when complete, and a
rerun skips complete shards. Since every chunk's records depend only on the
chunk, the output is byte-identical whatever `num_workers`.

Workers run in a "forkserver" process pool: TensorFlow is imported once, in
the fork server (`worker_preload`), and its workers are forked from it
before any TensorFlow op runs (TensorFlow is not fork-safe after that),
instead of each paying the import (4-6 s of CPU here). This process stays
free of TensorFlow and indexes the corpus during that import.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import multiprocessing
import os
import signal
import sys
import time
from typing import Callable, Iterable, Iterator, TextIO

from core.arguments import FieldOSError
from core.atomic import temporary_folder
from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining.instances import LONG_LINE_SEQUENCES
from data_prep.pretraining.settings import Settings

_PROGRESS_SECONDS = 5.0


@dataclasses.dataclass(frozen=True)
class Summary:
    documents: int
    empty_documents: int
    files_without_documents: list[str]
    instances: int
    shards_written: int
    shards_skipped: int
    seconds: float
    long_lines: int = 0  # lines over `InstanceOptions.long_line_tokens` tokens


@dataclasses.dataclass(frozen=True)
class _ChunkTask:
    index: int
    chunk: shards_lib.Chunk
    shards: range
    staging_dir: str
    settings: Settings


@dataclasses.dataclass(frozen=True)
class _ChunkResult:
    index: int
    files: dict[int, tuple[str, int]]  # shard -> (staging file, instances)
    documents: int
    empty_documents: int
    long_lines: int


def create_pretraining_data(settings: Settings, log: TextIO = sys.stderr) -> Summary:
    """Writes the records of `settings`; raises ValueError/OSError, leaving no partial shard.

    With `num_workers > 1` the workers import the calling program's main
    module, so a script calling this needs the usual `if __name__ == "__main__":`.
    """
    started = time.monotonic()
    paths = shards_lib.expand_inputs(settings.input_patterns)
    outputs = shards_lib.output_paths(settings.output_files, settings.num_output_shards)
    settings.check_vocab_file()
    folders = [path for path in outputs if os.path.isdir(path)]
    if folders:
        raise FieldOSError("{output_file}: {0} is a folder", folders[0])
    # Starting the workers waits for their TensorFlow import: index the corpus meanwhile.
    with concurrent.futures.ThreadPoolExecutor(1) as background:
        indexing = background.submit(shards_lib.index_corpus, paths, settings.documents_per_chunk)
        with _chunk_runner(settings) as run_chunks:
            return _write_shards(settings, paths, outputs, indexing.result(), run_chunks, log,
                                 started)


def _write_shards(settings: Settings, paths: list[str], outputs: list[str],
                  index: shards_lib.CorpusIndex,
                  run_chunks: Callable[[Iterable[_ChunkTask]], Iterable[_ChunkResult]],
                  log: TextIO, started: float) -> Summary:
    """Turns the indexed corpus into the shards not yet complete, chunk by chunk."""
    if not index.documents:
        raise ValueError(f"the input files hold no documents: {', '.join(paths)}")
    fingerprint = _fingerprint(settings, paths, outputs)
    complete = {shard for shard, path in enumerate(outputs)
                if shards_lib.is_complete(path, fingerprint)}
    tasks = []
    for chunk_index, chunk in enumerate(index.chunks):
        targets = shards_lib.chunk_shards(chunk_index, len(index.chunks), len(outputs))
        if not set(targets) <= complete:
            tasks.append((chunk_index, chunk, targets))
    for shard, path in enumerate(outputs):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if shard not in complete:
            shards_lib.marker_path(path).unlink(missing_ok=True)
    for leftover in shards_lib.remove_dead_leftovers(outputs):
        print(f"Removed {leftover}, left by a run that was stopped", file=log)
    progress = _Progress(sum(chunk.documents for _, chunk, _ in tasks), log)
    empty = long_lines = 0
    with (temporary_folder(outputs[0]) as staging,
          shards_lib.ShardWriter(outputs, fingerprint, complete, len(index.chunks)) as writer):
        for result in run_chunks(_ChunkTask(i, chunk, targets, staging, settings)
                                 for i, chunk, targets in tasks):
            writer.add(result.index, result.files)
            empty += result.empty_documents
            long_lines += result.long_lines
            progress.update(result.documents, sum(n for _, n in result.files.values()))
    progress.finish()
    if long_lines:
        print(f"warning: {long_lines} line(s) hold over {settings.options.long_line_tokens} "
              f"tokens ({LONG_LINE_SEQUENCES} x max_seq_length); a line is one sentence, so "
              "all but the start of each is cut away (a text on one line makes about one "
              "instance): put one sentence per line", file=log)
    return Summary(progress.documents, empty, index.files_without_documents, writer.instances,
                   len(outputs) - len(complete), len(complete), time.monotonic() - started,
                   long_lines)


def _fingerprint(settings: Settings, paths: list[str], outputs: list[str]) -> dict:
    """Everything that shapes the records (not `num_workers`), as JSON reads it back."""
    settings_json = json.dumps({
        "inputs": [shards_lib.file_identity(path) for path in paths],
        "outputs": [os.path.abspath(path) for path in outputs],
        "vocab_file": shards_lib.file_identity(settings.vocab_file),
        "do_lower_case": settings.do_lower_case, "random_seed": settings.random_seed,
        "documents_per_chunk": settings.documents_per_chunk,
        "options": dataclasses.asdict(settings.options)})
    return json.loads(settings_json)


@contextlib.contextmanager
def _chunk_runner(settings: Settings) -> Iterator[Callable[[Iterable[_ChunkTask]],
                                                           Iterable[_ChunkResult]]]:
    """Maps chunk tasks to results in task order: in this process, or in forked workers."""
    if settings.num_workers == 1:
        yield lambda tasks: map(_stage_chunk, tasks)
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["data_prep.pretraining.worker_preload"])  # imports TensorFlow
    pool = context.Pool(
        settings.num_workers, initializer=_start_worker,
        initargs=(settings.vocab_file, settings.do_lower_case, settings.options.inserts_mask))
    try:
        yield lambda tasks: pool.imap(_stage_chunk, tasks)
    finally:
        pool.terminate()
        pool.join()


class _Progress:
    """A line on `log` every few seconds: documents/s, instances/s and time left."""

    def __init__(self, total_documents: int, log: TextIO):
        self._total, self._log = total_documents, log
        self.documents = self._instances = 0
        self._start = self._last = time.monotonic()

    def update(self, documents: int, instances: int) -> None:
        self.documents += documents
        self._instances += instances
        if time.monotonic() - self._last >= _PROGRESS_SECONDS:
            self.finish()

    def finish(self) -> None:
        self._last = time.monotonic()
        elapsed = max(self._last - self._start, 1e-9)
        rate = self.documents / elapsed
        left = f"{(self._total - self.documents) / rate:.0f} s" if rate else "unknown"
        print(f"{self.documents}/{self._total} documents, {self._instances} instances; "
              f"{rate:.0f} documents/s, {self._instances / elapsed:.0f} instances/s; "
              f"ETA {left}", file=self._log, flush=True)


def _start_worker(vocab_file: str, do_lower_case: bool, needs_mask: bool) -> None:
    """Pool initializer: one thread per TensorFlow op; the tokenizer built before any chunk.

    Ctrl-C reaches every process of the terminal's group: the workers ignore
    it, and the main process, which reports it, stops them.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Imported in the worker only, where the fork server already loaded it (module docstring).
    import tensorflow as tf

    from data_prep.pretraining import transform

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    try:
        transform.load_tokenizer(vocab_file, do_lower_case, needs_mask)
    except Exception:  # the first chunk builds it again and reports the error with its result
        pass


def _stage_chunk(task: _ChunkTask) -> _ChunkResult:
    """The chunk's records in one staging file per target shard, instance k in the k % n-th."""
    # Imported in the worker only, where the fork server already loaded it (module docstring).
    import tensorflow as tf

    from data_prep.pretraining import transform

    settings = task.settings
    lines, document_starts = shards_lib.read_chunk_lines(task.chunk)
    records = transform.chunk_records(
        task.index, lines, document_starts, settings,
        transform.load_tokenizer(settings.vocab_file, settings.do_lower_case,
                                 settings.options.inserts_mask))
    files = {shard: os.path.join(task.staging_dir, f"chunk-{task.index:07d}-shard-{shard:05d}")
             for shard in task.shards}
    count = len(task.shards)
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(tf.io.TFRecordWriter(files[shard]))
                   for shard in task.shards]
        start = 0
        for batch in records.batches:
            for offset, writer in enumerate(writers):
                for record in batch[(offset - start) % count::count]:
                    writer.write(record)
            start += len(batch)
    counts = [len(range(offset, records.instances, count)) for offset in range(count)]
    return _ChunkResult(task.index, {shard: (files[shard], instances)
                                     for shard, instances in zip(task.shards, counts)},
                        records.documents, records.empty_documents, records.long_lines)
