"""Writes BERT's per-token hidden states for lines of text as JSON lines.

Same flags and output as the original `extract_features.py` (the layout is
described in `tasks/features.py`): each input line is one text, or a pair
written `text_a ||| text_b`; each output line holds the chosen layers'
values for every WordPiece token of that line.
"""

from __future__ import annotations

from absl import flags

from cli import runner_flags
from core import program
from tasks import features

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Called only when the file runs as a script, so that importing it (tests,
    notebooks) registers nothing in absl's global registry; the shared flags it
    uses are key flags, listed by `--help`."""
    into = {"flag_values": flag_values}
    runner_flags.define_model_flags(flag_values)
    flags.DEFINE_string("input_file", None,
                        "Text file: one text, or `text_a ||| text_b`, per line.", **into)
    flags.DEFINE_string("output_file", None, "JSON-lines file to write.", **into)
    flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indices to write.",
                        **into)
    flags.DEFINE_integer("max_seq_length", 128, "Packed length; longer texts are truncated.",
                         **into)
    flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.", **into)
    flags.adopt_module_key_flags(runner_flags, flag_values)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    runner_flags.run_extraction(values, features.TASK, features.FeatureTask)


def console_main() -> None:
    """The installed `bert-extract-features` command: the same as running this file."""
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
