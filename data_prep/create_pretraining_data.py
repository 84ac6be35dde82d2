"""Raw documents -> masked-LM / next-sentence TFRecords, on all cores, in memory that does not grow.

    python -m data_prep.create_pretraining_data --input_file=corpus/*.txt \\
        --output_file=out.tfrecord --num_output_shards=16 --vocab_file=vocab.txt \\
        --do_lower_case=true --max_seq_length=128 --max_predictions_per_seq=20 \\
        --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10 --short_seq_prob=0.1

Flags, input format (one sentence per line, blank lines between documents)
and records are those of google-research/bert's create_pretraining_data.py,
and the instances follow its algorithm (`data_prep.pretraining.instances`). The
original holds every document and every instance in memory on one core;
here the work is organized differently:

- Chunks. The corpus is cut into chunks of `--documents_per_chunk`
  documents (`data_prep.pretraining.shards`). Each chunk is tokenized in one
  in-graph call, turned into the instances of all `--dupe_factor` passes,
  shuffled, masked and written on its own, so memory follows the chunk size,
  not the corpus. The random "next" segment of a pair comes from another
  document of the same chunk, as when the original is run once per input
  shard (how it was used on large corpora), and instances are shuffled
  within their chunk; a new file also starts a new document.
- Determinism. Each chunk draws from generators seeded by
  (`--random_seed`, chunk index) and writes to fixed shards, so the output
  is byte-identical whatever `--num_workers`.
- Workers. Chunks run in a pool of worker processes forked from a server
  that imported TensorFlow once; each stages its chunk's records, which this
  process (free of TensorFlow) appends to the shards. Shards are renamed
  into place when complete, and a rerun skips complete shards.

This module is the command line: flags -> `Settings` -> the library.
The pipeline is in `data_prep.pretraining`: `transform` (a chunk's records,
writing nothing; the Beam pipeline uses it too) and `local` (the workers
and the sharded writer).
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from core import faults, program
from core.arguments import FieldError
from data_prep.pretraining.instances import InstanceOptions
from data_prep.pretraining.local import create_pretraining_data
from data_prep.pretraining.settings import Settings


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The original's flags, then the new ones: defined only by programs that run it (this
    one and the Beam pipeline), so importing the library defines no flags."""
    into = {"flag_values": flag_values}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    flags.DEFINE_string("input_file", None, "Input text: comma-separated files or globs; one "
                        "sentence per line, blank lines between documents.", **into)
    flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated: one "
                        "shard each, or one name numbered by --num_output_shards.", **into)
    flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary the model uses.", **into)
    flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased models).",
                      **into)
    flags.DEFINE_bool("do_whole_word_mask", False, "Mask all pieces of a word together.", **into)
    flags.DEFINE_integer("max_seq_length", 128,
                         "Tokens per instance, [CLS] and [SEP]s included.", **into)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked positions per instance.",
                         **into)
    flags.DEFINE_integer("random_seed", 12345,
                         "Seed; the output depends on nothing else random.", **into)
    flags.DEFINE_integer("dupe_factor", 10, "Passes over the corpus, each with fresh masks.",
                         **into)
    flags.DEFINE_float("masked_lm_prob", 0.15, "Share of tokens masked; 0 for no masking "
                       "(left-to-right LM).", **into)
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.", **into)
    flags.DEFINE_integer("num_output_shards", None, "Number of shards --output_file names.", **into)
    flags.DEFINE_list("mask_ratios", ["0.8", "0.1", "0.1"], "Shares of masked positions that "
                      "become [MASK], a random token, and stay unchanged (paper, Table 8).", **into)
    flags.DEFINE_bool("no_nsp", False, "One segment per instance, no next-sentence task.", **into)
    flags.DEFINE_integer("num_workers", cores, "Worker processes (default: usable cores).", **into)
    flags.DEFINE_integer("documents_per_chunk", 256, "Documents processed together; random next "
                         "segments are drawn within a chunk.", **into)


def settings_from_flags(values: flags.FlagValues = flags.FLAGS) -> Settings:
    """The parsed flags of `define_flags` as `Settings`; a bad value raises a FieldError
    naming its flag."""
    try:
        ratios = tuple(float(share) for share in values.mask_ratios)
    except ValueError:
        raise FieldError("{mask_ratios}={0} must be three numbers",
                         ",".join(values.mask_ratios)) from None
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


def main(argv: list[str], values: flags.FlagValues = flags.FLAGS) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    # A rerun skips complete shards: what a full disk or Ctrl-C ends with says so (`core.faults`).
    faults.note_resume_point("complete shards are kept")
    summary = create_pretraining_data(settings_from_flags(values))
    rate = summary.instances / max(summary.seconds, 1e-9)
    print(f"wrote {summary.instances} instances from {summary.documents} documents to "
          f"{summary.shards_written} shard(s) in {summary.seconds:.1f} s ({rate:.0f} instances/s); "
          f"{summary.shards_skipped} shard(s) already complete; {summary.empty_documents} "
          f"document(s) without tokens skipped", file=sys.stderr)
    for path in summary.files_without_documents:
        print(f"note: {path} holds no documents", file=sys.stderr)


def console_main() -> None:
    """The installed `bert-create-pretraining-data` command: the same as `python -m` this module."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
