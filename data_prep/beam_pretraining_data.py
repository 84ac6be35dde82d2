"""The same pre-training data on Apache Beam, for corpora that outgrow one machine.

    python -m data_prep.beam_pretraining_data --input_file='corpus/*.txt' \\
        --output_file=gs://bucket/records/wiki --num_output_shards=256 \\
        --vocab_file=vocab.txt --runner=DataflowRunner \\
        --beam_pipeline_options='--project=P --region=R --temp_location=gs://bucket/tmp'

It takes every flag of `data_prep.create_pretraining_data` plus `--runner`
(DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...) and
`--beam_pipeline_options` (passed to Beam as they are). The pipeline is
the local tool's own per-chunk transform: the corpus is indexed into the
same chunks (byte ranges of `--documents_per_chunk` documents), each chunk
becomes its records exactly as in a local worker (same seed per chunk, same
instances), and Beam writes them to `--num_output_shards` files named
`<output_file>-SSSSS-of-NNNNN`. The set of records therefore equals the
local tool's for the same flags; only their order across files differs,
which training shuffles anyway.

Input paths must be readable by the Beam workers (shared or cloud storage
for a distributed runner); the corpus index is built here, once.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Iterator

from absl import app, flags

from data_prep import create_pretraining_data as local
from data_prep.pretraining import shards as shards_lib


class ChunkToRecords:
    """Beam DoFn-compatible callable: (chunk index, chunk) -> serialized tf.train.Examples."""

    def __init__(self, settings: local.Settings):
        self.settings = settings

    def __call__(self, item: tuple[int, shards_lib.Chunk]) -> Iterator[bytes]:
        import tensorflow as tf

        index, chunk = item
        with tempfile.TemporaryDirectory(prefix="beam-chunk-") as staging:
            result = local._process_chunk(local._ChunkTask(index, chunk, range(1), staging,
                                                            self.settings))
            path, _ = result.files[0]
            for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
                yield record


def build_pipeline(pipeline, settings: local.Settings, output_prefix: str, num_shards: int):
    """Adds the transform to `pipeline`: corpus chunks -> records -> sharded TFRecord files."""
    import apache_beam as beam

    paths = shards_lib.expand_inputs(settings.input_patterns)
    index = shards_lib.index_corpus(paths, settings.documents_per_chunk)
    if not index.documents:
        raise ValueError(f"the input files hold no documents: {', '.join(paths)}")
    return (pipeline
            | "Chunks" >> beam.Create(list(enumerate(index.chunks)))
            | "Spread" >> beam.Reshuffle()
            | "Records" >> beam.FlatMap(ChunkToRecords(settings))
            | "Write" >> beam.io.WriteToTFRecord(output_prefix, num_shards=num_shards))


def run(settings: local.Settings, runner: str, pipeline_options: str = "") -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    if len(settings.output_files) != 1:
        raise ValueError("--output_file must name one prefix on Beam (use --num_output_shards)")
    if not os.path.isfile(settings.vocab_file):
        raise FileNotFoundError(f"--vocab_file={settings.vocab_file}: no such file")
    options = PipelineOptions([f"--runner={runner}", *pipeline_options.split()])
    with beam.Pipeline(options=options) as pipeline:
        build_pipeline(pipeline, settings, settings.output_files[0],
                       settings.num_output_shards or 1)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        run(local._settings_from_flags(), flags.FLAGS.runner, flags.FLAGS.beam_pipeline_options)
    except (ValueError, OSError) as error:
        print(f"beam_pretraining_data: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    local._define_flags()
    flags.DEFINE_string("runner", "DirectRunner", "Beam runner: DirectRunner, DataflowRunner, "
                        "FlinkRunner, SparkRunner, ...")
    flags.DEFINE_string("beam_pipeline_options", "", "Further Beam pipeline options, "
                        "space-separated (--project=..., --temp_location=...).")
    app.run(main)
