"""Exports a BERT model to Google's TF1, Hugging Face's or TF Hub's layout, in one command.

    python export_model.py --source=uncased_L-12_H-768_A-12 --format=tf_hub \
        --output_dir=bert_hub --sequence_length=128

`--source` is anything the library loads: a Google release folder, a
Hugging Face folder, this project's pre-training or fine-tuning
`--output_dir`. `--format`:

- `google`: `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`, for the
  original repository's `--init_checkpoint`;
- `huggingface`: `config.json`, `model.safetensors`, `vocab.txt`,
  `tokenizer_config.json`, for `transformers`' `from_pretrained`;
- `tf_hub`: `preprocess/` and `encoder/` SavedModels in TF Hub's BERT
  interface; load the preprocessor after `import tensorflow_text`.

The Google and Hugging Face layouts hold the pre-trained network (with its
masked-LM and next-sentence heads when the source has them); fine-tuned
heads are listed in the log and left out. `--output_dir` is replaced whole,
only once the export is complete. See `modeling/exports.py`.
"""

from __future__ import annotations

from absl import flags, logging

from cli import entry
from modeling.exports import FORMATS, export_model

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Called only when the file runs as a script, so that importing it (tests,
    notebooks) registers nothing in absl's global registry."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("source", None, "The model: a Google, Hugging Face or own folder.",
                        **into)
    flags.DEFINE_string("format", None, f"Layout to write: {', '.join(FORMATS)}.", **into)
    flags.DEFINE_string("output_dir", None, "Folder to write (replaced whole if it exists).",
                        **into)
    flags.DEFINE_integer("sequence_length", 128, "tf_hub: positions the preprocessor pads to "
                         "(its bert_pack_inputs takes a length of its own).", **into)
    flags.DEFINE_bool("do_lower_case", None, "Lowercase and strip accents (default: what the "
                      "source's folder implies).", **into)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    for name in ("source", "format", "output_dir"):
        if not values[name].value:
            raise ValueError(f"--{name} is required")
    path = export_model(values.source, values.output_dir, values.format,
                        values.sequence_length, values.do_lower_case)
    logging.info("Wrote %s (%s)", path, values.format)
    print(path)


def console_main() -> None:
    """The installed `bert-export-model` command: the same as running this file."""
    entry.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
