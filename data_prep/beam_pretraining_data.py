"""The same pre-training data on Apache Beam, for corpora that outgrow one machine.

    python -m data_prep.beam_pretraining_data --input_file='corpus/*.txt' \\
        --output_file=gs://bucket/records/wiki --num_output_shards=256 \\
        --vocab_file=vocab.txt --runner=DataflowRunner \\
        --beam_pipeline_options='--project=P --region=R --temp_location=gs://bucket/tmp'

It takes every flag of `data_prep.create_pretraining_data` plus `--runner`
(DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...) and
`--beam_pipeline_options` (passed to Beam as they are). The pipeline maps
the local tool's per-chunk transform (`data_prep.pretraining.transform`)
over the same chunks (byte ranges of `--documents_per_chunk` documents):
each chunk becomes the same records as in a local worker (same seed per
chunk, same instances), and Beam's TFRecord sink writes them to
`--num_output_shards` files named `<output_file>-SSSSS-of-NNNNN`. The set of
records therefore equals the local tool's for the same flags; only their
order across files differs, which training shuffles anyway.

Input paths must be readable by the Beam workers (shared or cloud storage
for a distributed runner); the corpus index is built here, once.
"""

from __future__ import annotations

import os
from typing import Iterator

from absl import app, flags, logging

from core import extras, program
from core.arguments import FieldError
from data_prep import create_pretraining_data
from data_prep.create_pretraining_data import settings_from_flags
from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining import transform
from data_prep.pretraining.settings import Settings

with extras.needed("beam"):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions


class ChunkToRecords(beam.DoFn):
    """(chunk index, chunk) -> its serialized tf.train.Examples; the tokenizer built once per
    worker, in `setup`, since building it traces TensorFlow graphs."""

    def __init__(self, settings: Settings):
        super().__init__()
        self.settings = settings
        self._tokenizer: transform.PretrainingTokenizer | None = None

    def setup(self) -> None:
        self._tokenizer = transform.load_tokenizer(self.settings.vocab_file,
                                                   self.settings.do_lower_case,
                                                   self.settings.options.inserts_mask)

    def process(self, item: tuple[int, shards_lib.Chunk]) -> Iterator[bytes]:
        index, chunk = item
        lines, document_starts = shards_lib.read_chunk_lines(chunk)
        records = transform.chunk_records(index, lines, document_starts, self.settings,
                                          self._tokenizer)
        if records.long_lines:  # counted over the job in the runner's metrics
            beam.metrics.Metrics.counter("create_pretraining_data", "long_lines").inc(
                records.long_lines)
            logging.warning("chunk %d: %d line(s) hold over %d tokens; a line is one sentence: "
                            "put one sentence per line", index, records.long_lines,
                            self.settings.options.long_line_tokens)
        for batch in records.batches:
            yield from batch


def build_pipeline(pipeline: beam.Pipeline, settings: Settings, output_prefix: str,
                   num_shards: int) -> beam.pvalue.PDone:
    """Adds the transform to `pipeline`: corpus chunks -> records -> sharded TFRecord files."""
    paths = shards_lib.expand_inputs(settings.input_patterns)
    index = shards_lib.index_corpus(paths, settings.documents_per_chunk)
    if not index.documents:
        raise ValueError(f"the input files hold no documents: {', '.join(paths)}")
    return (pipeline
            | "Chunks" >> beam.Create(list(enumerate(index.chunks)))
            | "Spread" >> beam.Reshuffle()
            | "Records" >> beam.ParDo(ChunkToRecords(settings))
            | "Write" >> beam.io.WriteToTFRecord(output_prefix, num_shards=num_shards))


def run(settings: Settings, runner: str, pipeline_options: str = "") -> None:
    """Runs the pipeline of `settings` on `runner`; raises ValueError/OSError on bad settings."""
    if len(settings.output_files) != 1:
        raise FieldError("{output_file} must name one prefix on Beam (use {num_output_shards})")
    settings.check_vocab_file()
    options = PipelineOptions([f"--runner={runner}", *pipeline_options.split()])
    with beam.Pipeline(options=options) as pipeline:
        build_pipeline(pipeline, settings, settings.output_files[0],
                       settings.num_output_shards or 1)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The local tool's flags (listed by `--help` too), then the runner and its options."""
    create_pretraining_data.define_flags(flag_values)
    flags.adopt_module_key_flags(create_pretraining_data, flag_values)
    flags.DEFINE_string("runner", "DirectRunner", "Beam runner: DirectRunner, DataflowRunner, "
                        "FlinkRunner, SparkRunner, ...", flag_values=flag_values)
    flags.DEFINE_string("beam_pipeline_options", "", "Further Beam pipeline options, "
                        "space-separated (--project=..., --temp_location=...).",
                        flag_values=flag_values)


def main(argv: list[str], values: flags.FlagValues = flags.FLAGS) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    run(settings_from_flags(values), values.runner, values.beam_pipeline_options)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    program.run_command(define_flags, main, __name__)
