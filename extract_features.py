"""Writes BERT's per-token hidden states for lines of text as JSON lines.

Same flags and output as the original `extract_features.py` (the layout is
described in `tasks/features.py`): each input line is one text, or a pair
written `text_a ||| text_b`; each output line holds the chosen layers'
values for every WordPiece token of that line.
"""

from __future__ import annotations

from absl import flags

from cli import entry, runner_flags
from tasks import features

FLAGS = flags.FLAGS
runner_flags.define_model_flags(FLAGS)
flags.DEFINE_string("input_file", None, "Text file: one text, or `text_a ||| text_b`, per line.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indices to write.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length; longer texts are truncated.")
flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.")


def main(argv: list[str]) -> None:
    del argv
    extraction = features.FeatureExtraction(FLAGS.input_file, FLAGS.output_file, FLAGS.layers,
                                            FLAGS.max_seq_length, FLAGS.batch_size)
    features.run(runner_flags.model_files_from_flags(FLAGS), extraction)


if __name__ == "__main__":
    entry.run(main)
