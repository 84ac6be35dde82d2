"""Raw documents -> masked-LM / next-sentence TFRecords, on all cores, in memory that does not grow.

    python -m data_prep.create_pretraining_data --input_file=corpus/*.txt \\
        --output_file=out.tfrecord --num_output_shards=16 --vocab_file=vocab.txt \\
        --do_lower_case=true --max_seq_length=128 --max_predictions_per_seq=20 \\
        --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10 --short_seq_prob=0.1

Flags, input format (one sentence per line, blank lines between documents)
and records are those of google-research/bert's create_pretraining_data.py,
and the instances follow its algorithm (`pretraining_instances`). The
original holds every document and every instance in memory on one core;
here the work is organized differently:

- Chunks. The corpus is cut into chunks of `--documents_per_chunk`
  documents (`pretraining_shards`). Each chunk is tokenized in one
  in-graph call, turned into the instances of all `--dupe_factor` passes,
  shuffled, masked and written on its own, so memory follows the chunk size,
  not the corpus. The random "next" segment of a pair comes from another
  document of the same chunk, as when the original is run once per input
  shard (how it was used on large corpora), and instances are shuffled
  within their chunk; a new file also starts a new document.
- Determinism. Each chunk draws from generators seeded by
  (`--random_seed`, chunk index) and writes to fixed shards, so the output
  is byte-identical whatever `--num_workers`.
- Workers. Chunks run in a "forkserver" process pool: TensorFlow is
  imported once, in the fork server (`worker_preload`), and its workers are
  forked from it before any TensorFlow op runs (TensorFlow is not fork-safe
  after that), instead of each paying the import (4-6 s of CPU here). This
  process indexes the corpus during that import. Each worker builds its
  tokenizer once and writes a chunk's records to a staging file, which this
  process (free of TensorFlow) appends to the shard's temporary file. Shards
  are renamed into place when complete, and a rerun skips complete shards.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Callable, Iterable, Iterator, TextIO

import numpy as np
from absl import app, flags

from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining.instances import (InstanceOptions, VocabIds, build_features,
                                             chunk_bounds, segment_spans)
from data_prep.pretraining.records import serialize_examples

_BATCH = 2048  # instances padded, masked and encoded together
_PROGRESS_SECONDS = 5.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """One run: the command line's flags, parsed."""

    input_patterns: tuple[str, ...]
    output_files: tuple[str, ...]
    vocab_file: str
    options: InstanceOptions
    do_lower_case: bool = True
    random_seed: int = 12345
    num_output_shards: int | None = None
    num_workers: int = 1
    documents_per_chunk: int = 256

    def __post_init__(self):
        if not self.input_patterns or not self.output_files or not self.vocab_file:
            raise ValueError("--input_file, --output_file and --vocab_file are required")
        for name in ("num_workers", "documents_per_chunk", "num_output_shards"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name}={value} must be at least 1")
        if self.random_seed < 0:
            raise ValueError(f"--random_seed={self.random_seed} must be non-negative")


@dataclasses.dataclass(frozen=True)
class Summary:
    documents: int
    empty_documents: int
    files_without_documents: list[str]
    instances: int
    shards_written: int
    shards_skipped: int
    seconds: float


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


def create_pretraining_data(settings: Settings, log: TextIO = sys.stderr) -> Summary:
    """Writes the records of `settings`; raises ValueError/OSError, leaving no partial shard.

    With `num_workers > 1` the workers import the calling program's main
    module, so a script calling this needs the usual `if __name__ == "__main__":`.
    """
    started = time.monotonic()
    paths = shards_lib.expand_inputs(settings.input_patterns)
    outputs = shards_lib.output_paths(settings.output_files, settings.num_output_shards)
    if not os.path.isfile(settings.vocab_file):
        raise FileNotFoundError(f"--vocab_file={settings.vocab_file}: no such file")
    folders = [path for path in outputs if os.path.isdir(path)]
    if folders:
        raise IsADirectoryError(f"--output_file: {folders[0]} is a folder")
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
    staging = tempfile.mkdtemp(prefix=shards_lib.staging_prefix(outputs[0]),
                               dir=os.path.dirname(os.path.abspath(outputs[0])))
    writer = shards_lib.ShardWriter(outputs, fingerprint, complete, len(index.chunks))
    progress = _Progress(sum(chunk.documents for _, chunk, _ in tasks), log)
    empty = 0
    try:
        for result in run_chunks(_ChunkTask(i, chunk, targets, staging, settings)
                                 for i, chunk, targets in tasks):
            writer.add(result.index, result.files)
            empty += result.empty_documents
            progress.update(result.documents, sum(n for _, n in result.files.values()))
    finally:
        writer.discard_unfinished()
        shutil.rmtree(staging, ignore_errors=True)
    progress.finish()
    return Summary(progress.documents, empty, index.files_without_documents, writer.instances,
                   len(outputs) - len(complete), len(complete), time.monotonic() - started)


def _fingerprint(settings: Settings, paths: list[str], outputs: list[str]) -> dict:
    """Everything that shapes the records (not --num_workers), as JSON reads it back."""
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
        yield lambda tasks: map(_process_chunk, tasks)
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["data_prep.pretraining.worker_preload"])  # imports TensorFlow
    pool = context.Pool(
        settings.num_workers, initializer=_start_worker,
        initargs=(settings.vocab_file, settings.do_lower_case))
    try:
        yield lambda tasks: pool.imap(_process_chunk, tasks)
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


_TOKENIZERS: dict[tuple[str, bool], tuple[object, VocabIds]] = {}


def _start_worker(vocab_file: str, do_lower_case: bool) -> None:
    """Pool initializer: one thread per TensorFlow op; the tokenizer built before any chunk."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    try:
        _tokenizer(vocab_file, do_lower_case)
    except Exception:  # the first chunk builds it again and reports the error with its result
        pass


def _tokenizer(vocab_file: str, do_lower_case: bool) -> tuple[object, VocabIds]:
    key = (vocab_file, do_lower_case)
    if key not in _TOKENIZERS:
        from data_prep.text.tokenization import PRETRAINING_TOKENS, FullTokenizer

        tokenizer = FullTokenizer(vocab_file, do_lower_case, required_tokens=PRETRAINING_TOKENS)
        tokens = [tokenizer.inv_vocab[i] for i in range(tokenizer.vocab_size)]
        _TOKENIZERS[key] = (tokenizer, VocabIds.from_tokens(tokens))
    return _TOKENIZERS[key]


def _process_chunk(task: _ChunkTask) -> _ChunkResult:
    """Reads, tokenizes and turns one chunk into records, staged in one file per target shard."""
    import tensorflow as tf

    settings = task.settings
    tokenizer, vocab = _tokenizer(settings.vocab_file, settings.do_lower_case)
    lines, document_starts = shards_lib.read_chunk_lines(task.chunk)
    token_ids, _ = tokenizer.tokenize_batch(tf.constant(lines, dtype=tf.string))
    document_bounds, sentence_bounds, empty = chunk_bounds(token_ids.row_splits.numpy(),
                                                           document_starts)
    span_seed, mask_seed = np.random.SeedSequence([settings.random_seed, task.index]).spawn(2)
    spans = segment_spans(document_bounds, sentence_bounds, settings.options,
                          random.Random(int(span_seed.generate_state(1, np.uint64)[0])))
    mask_rng = np.random.default_rng(mask_seed)
    flat_ids = token_ids.flat_values.numpy()
    files = {shard: os.path.join(task.staging_dir, f"chunk-{task.index:07d}-shard-{shard:05d}")
             for shard in task.shards}
    writers = [tf.io.TFRecordWriter(files[shard]) for shard in task.shards]
    for start in range(0, len(spans), _BATCH):
        features = build_features(flat_ids, spans[start:start + _BATCH], settings.options, vocab,
                                  mask_rng)
        records = serialize_examples(features)
        for offset, writer in enumerate(writers):  # instance k goes to the k % n-th shard
            for record in records[(offset - start) % len(writers)::len(writers)]:
                writer.write(record)
    for writer in writers:
        writer.close()
    counts = [len(range(offset, len(spans), len(writers))) for offset in range(len(writers))]
    return _ChunkResult(task.index, {shard: (files[shard], count)
                                     for shard, count in zip(task.shards, counts)},
                        len(document_starts), empty)


def _define_flags() -> None:
    """The original's flags, then the new ones; defined only when run as a program."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    flags.DEFINE_string("input_file", None, "Input text: comma-separated files or globs; one "
                        "sentence per line, blank lines between documents.")
    flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated: one "
                        "shard each, or one name numbered by --num_output_shards.")
    flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary the model uses.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased models).")
    flags.DEFINE_bool("do_whole_word_mask", False, "Mask all pieces of a word together.")
    flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance, [CLS] and [SEP]s included.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked positions per instance.")
    flags.DEFINE_integer("random_seed", 12345, "Seed; the output depends on nothing else random.")
    flags.DEFINE_integer("dupe_factor", 10, "Passes over the corpus, each with fresh masks.")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Share of tokens masked; 0 for no masking "
                       "(left-to-right LM).")
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
    flags.DEFINE_integer("num_output_shards", None, "Number of shards --output_file names.")
    flags.DEFINE_list("mask_ratios", ["0.8", "0.1", "0.1"], "Shares of masked positions that "
                      "become [MASK], a random token, and stay unchanged (paper, Table 8).")
    flags.DEFINE_bool("no_nsp", False, "One segment per instance, no next-sentence task.")
    flags.DEFINE_integer("num_workers", cores, "Worker processes (default: usable cores).")
    flags.DEFINE_integer("documents_per_chunk", 256, "Documents processed together; random next "
                         "segments are drawn within a chunk.")


def _settings_from_flags() -> Settings:
    values = flags.FLAGS
    try:
        ratios = tuple(float(share) for share in values.mask_ratios)
    except ValueError:
        raise ValueError(f"--mask_ratios={','.join(values.mask_ratios)} must be three "
                         "numbers") from None
    options = InstanceOptions(
        max_seq_length=values.max_seq_length,
        max_predictions_per_seq=values.max_predictions_per_seq,
        masked_lm_prob=values.masked_lm_prob, short_seq_prob=values.short_seq_prob,
        dupe_factor=values.dupe_factor, mask_ratios=ratios,
        do_whole_word_mask=values.do_whole_word_mask, next_sentence=not values.no_nsp)
    return Settings(_split(values.input_file), _split(values.output_file), values.vocab_file or "",
                    options, values.do_lower_case, values.random_seed, values.num_output_shards,
                    values.num_workers, values.documents_per_chunk)


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        summary = create_pretraining_data(_settings_from_flags())
    except (ValueError, OSError) as error:
        print(f"create_pretraining_data: error: {error}", file=sys.stderr)
        sys.exit(1)
    rate = summary.instances / max(summary.seconds, 1e-9)
    print(f"wrote {summary.instances} instances from {summary.documents} documents to "
          f"{summary.shards_written} shard(s) in {summary.seconds:.1f} s ({rate:.0f} instances/s); "
          f"{summary.shards_skipped} shard(s) already complete; {summary.empty_documents} "
          f"document(s) without tokens skipped", file=sys.stderr)
    for path in summary.files_without_documents:
        print(f"note: {path} holds no documents", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _define_flags()
    app.run(main)
