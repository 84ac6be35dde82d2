"""Exports a BERT model in Google's, Hugging Face's or TF Hub's layout, or a task model for serving.

    python export_model.py --source=uncased_L-12_H-768_A-12 --format=tf_hub \
        --output_dir=bert_hub --sequence_length=128

`--source` is anything the library loads: a Google release folder, a
Hugging Face folder, this project's pre-training or fine-tuning
`--output_dir`, or a `.keras` file a model was saved to from Python. `--format`:

- `google`: `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`, for the
  original repository's `--init_checkpoint`;
- `huggingface`: `config.json`, `model.safetensors`, `vocab.txt`,
  `tokenizer_config.json`, for `transformers`' `from_pretrained`;
- `tf_hub`: `preprocess/` and `encoder/` SavedModels in TF Hub's BERT
  interface; load the preprocessor after `import tensorflow_text`;
- `saved_model`: a fine-tuned model's SavedModel on raw text (a classifier's
  probabilities, a tagger's tags, a span model's answers, an embedder's vectors);
- `embedder`: a sentence embedder's SavedModel (`serving_default(text)` ->
  `embedding`), pooled as the source's sentence-transformers files say.
- `tf_serving` (a fine-tuned classifier, tagger or span model, or an
  embedder): `raw_text/` (the SavedModel on strings), `preprocess/` (strings
  -> `input_ids`, `input_mask`, `segment_ids`, and for a tagger or a span
  model each word's pieces) and `model/<--serving_version>/`, the SavedModel
  on those ids in TF Serving's layout: no tensorflow-text needed, compiles
  with XLA;
- `tflite` (any model: a pre-trained network's `sequence_output` and
  `pooled_output`, or a fine-tuned model's outputs as in `tf_serving`):
  `model.tflite` on the same ids, for `ai_edge_litert`'s interpreter, and
  `preprocess/`. See `export/tflite.py`.

`--quantize=int8` quantizes the model before a SavedModel export (`tf_hub`,
a task model's `saved_model`, `tf_serving`); with `tflite` it is LiteRT's
own dynamic-range int8; the other formats refuse it.

The Google and Hugging Face layouts hold the pre-trained network (with its
masked-LM and next-sentence heads when the source has them); a fine-tuned
classifier, tagger or span model goes to Hugging Face as its `BertFor...`
class with its labels, and to Google's layout with its head.

`--output_dir` must be a new or empty folder, or one an earlier export of
the same `--format` wrote (its `export_owner.json` says so); that one is
replaced whole, once the new export is complete. Anything else (the source,
a folder holding it, a folder of other files, an export of another format,
a file) is refused in one line before any weights are loaded, and nothing
is written. A full disk or a file-size limit also ends in one line, naming
the file, and leaves no output. See `export/layouts.py`.
"""

from __future__ import annotations

from absl import flags, logging

from core import program
from core.export_folder import check_export_folder
from export.model_exports import FORMATS, export_model

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Called only when the file runs as a script, so that importing it (tests,
    notebooks) registers nothing in absl's global registry."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("source", None, "The model: a Google, Hugging Face or own folder, or "
                        "a .keras file.",
                        **into)
    flags.DEFINE_string("format", None, f"Layout to write: {', '.join(FORMATS)}.", **into)
    flags.DEFINE_string("output_dir", None, "Folder to write: new, empty, or an earlier export "
                        "of the same --format (replaced whole).", **into)
    flags.DEFINE_integer("sequence_length", None, "tf_hub, saved_model, embedder, tf_serving, "
                         "tflite: tokens per text (default: the source's preprocessor's or "
                         "sentence-transformers window, else 128 or the model's positions if "
                         "fewer; tf_hub's bert_pack_inputs takes its own).", **into)
    flags.DEFINE_string("quantize", None, "int8: quantize before a SavedModel export "
                        "(tf_hub, a task model's saved_model, tf_serving); tflite: LiteRT's "
                        "dynamic-range int8.", **into)
    flags.DEFINE_integer("serving_version", 1, "tf_serving: the numeric model's version "
                         "folder, model/<version>/, as TF Serving reads it.", **into)
    flags.DEFINE_bool("do_lower_case", None, "Lowercase and strip accents (default: what the "
                      "source's folder implies).", **into)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    for name in ("source", "format", "output_dir"):
        if not values[name].value:
            raise ValueError(f"--{name} is required")
    if values.format not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {values.format!r}")
    if values["serving_version"].present and values.format != "tf_serving":
        raise ValueError(f"--serving_version applies to --format=tf_serving, not "
                         f"--format={values.format}")
    check_export_folder(values.output_dir, values.format, [values.source],
                        argument="--output_dir")
    path = export_model(values.source, values.output_dir, values.format,
                        values.sequence_length, values.do_lower_case, values.quantize,
                        values.serving_version)
    logging.info("Wrote %s (%s)", path, values.format)
    print(path)


def console_main() -> None:
    """The installed `bert-export-model` command: the same as running this file."""
    program.run_command(define_flags, main, __name__, rerun="rerun the same command")


if __name__ == "__main__":
    console_main()
