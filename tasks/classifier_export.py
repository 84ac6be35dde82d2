"""A fine-tuned classifier's folder, exported for serving: on raw text, on ids, for TFLite.

`export_model.py --format=tf_serving` (or `tflite`) on a fine-tuning
`--output_dir` (or any folder holding a classifier checkpoint and
`bert_config.json`, `vocab.txt`, `labels.txt`) writes, in one folder that
appears whole or not at all (`core.export_folder`):

- "tf_serving":
  - `raw_text/`: the runner's SavedModel on strings (`serve_single`,
    `serve_pair`; needs `import tensorflow_text`);
  - `preprocess/`: strings -> `input_ids`, `input_mask`, `segment_ids`;
  - `model/<serving_version>/`: the numeric SavedModel, in TF Serving's
    layout (`--model_base_path=<output_dir>/model`);
- "tflite": `model.tflite` (the numeric signature in TFLite's built-in
  ops) and `preprocess/`;

each with `labels.txt`, the label names in the order of the outputs. See
`tasks.numeric_export` for the signatures. The tokenizer stays out of the
TFLite model: it reproduces the original's normalization with regular
expressions and ICU ops (`text.normalization`) that have no TFLite kernels
(the converted model stops at `StaticRegexFullMatch`); tensorflow-text's
stock `FastBertTokenizer`, which has one, gives other ids on some text.

`quantize="int8"` quantizes the classifier (`model.quantize`) before a
SavedModel export; TFLite has its own quantization, so it is refused there.
The checkpoint must hold a plain classifier (the encoder, the pooler and
`output_weights`): a pre-trained encoder is refused before any weights are
loaded, a BiLSTM or a language-model head once they are, naming the
tensors; nothing is written then.
"""

from __future__ import annotations

import os
from pathlib import Path

from absl import logging

from core.arguments import check_integer
from core.export_folder import check_export_folder, export_folder
from modeling.checkpoints import load_weights, read_checkpoint
from modeling.pretrained import LABELS_FILE, load_config, load_labels, load_tokenizer
from modeling.quantization import check_quantize
from modeling.task_models import BertClassifier
from tasks.numeric_export import NumericServing, save_numeric, save_preprocess, write_tflite
from tasks.serving import export_classifier

CLASSIFIER_FORMATS = ("tf_serving", "tflite")
_HEAD = "output_weights"


def export_classifier_folder(source: str | os.PathLike, output_dir: str | os.PathLike,
                             format_name: str, sequence_length: int = 128,
                             do_lower_case: bool | None = None, quantize: str | None = None,
                             serving_version: int = 1) -> Path:
    """Writes the classifier in `source` to `output_dir` as `format_name` (see the module).

    Args:
      source: a folder (or checkpoint) holding a fine-tuned classifier.
      output_dir: new, empty, or an earlier export of the same format.
      format_name: "tf_serving" or "tflite".
      sequence_length: what the preprocessing (and the raw-text model) pads to.
      do_lower_case: the tokenizer's casing; None: the source folder's.
      quantize: None, or "int8" (tf_serving only).
      serving_version: the numeric model's version folder under `model/`.

    Returns:
      `output_dir`.
    """
    if format_name not in CLASSIFIER_FORMATS:
        raise ValueError(f"format_name must be one of {', '.join(CLASSIFIER_FORMATS)}, "
                         f"got {format_name!r}")
    check_quantize(quantize, format_name,
                   "a float TFLite model" if format_name == "tflite" else None)
    serving_version = check_integer("serving_version", serving_version)
    if do_lower_case is not None and not isinstance(do_lower_case, bool):
        raise ValueError(f"do_lower_case must be True, False or None, got {do_lower_case!r}")
    check_export_folder(output_dir, format_name, [source], argument="output_dir")
    config = load_config(source)
    sequence_length = config.check_sequence_length(sequence_length)
    tokenizer = load_tokenizer(source, do_lower_case)
    labels = _label_names(source)
    model = BertClassifier(config, num_labels=len(labels or [None]), label_names=labels)
    report = load_weights(model, source)
    if report.missing or report.unexpected:
        differing = [*report.missing, *report.unexpected]
        raise ValueError(f"source {os.fspath(source)!r} is not a plain fine-tuned classifier: "
                         f"it differs from one in {', '.join(differing[:4])}"
                         f"{' and more' if len(differing) > 4 else ''}")
    if quantize:
        model.quantize(quantize)
    with export_folder(output_dir, format_name, [source], argument="output_dir") as staging:
        if format_name == "tf_serving":
            export_classifier(model, tokenizer, sequence_length, labels, pair=False,
                              path=os.path.join(staging, "raw_text"))
            save_numeric(model, os.path.join(staging, "model", str(serving_version)))
        else:
            write_tflite(NumericServing(model), os.path.join(staging, "model.tflite"))
        save_preprocess(model, tokenizer, sequence_length, labels,
                        os.path.join(staging, "preprocess"))
        if labels:
            Path(staging, LABELS_FILE).write_text("".join(f"{label}\n" for label in labels),
                                                  encoding="utf-8")
    return Path(output_dir)


def _label_names(source: str | os.PathLike) -> list[str] | None:
    """The folder's label names; for a checkpoint without `labels.txt`, the class indices
    ("0", "1", ...), or None for a regression (one output). Refuses a source with no head."""
    units = read_checkpoint(source).tensors.get(_HEAD)
    if units is None:
        raise ValueError(f"source {os.fspath(source)!r} holds no fine-tuned classifier (no "
                         f"{_HEAD} tensor); a pre-trained encoder exports with "
                         "format_name='tf_hub'")
    count = units.shape[0]
    labels = load_labels(source)
    if labels is not None and len(labels) != count:
        raise ValueError(f"source {os.fspath(source)!r}: {LABELS_FILE} names {len(labels)} "
                         f"labels but the classifier has {count} outputs")
    if labels is None and count > 1:
        labels = [str(index) for index in range(count)]
        logging.info("%s has no %s: the labels are the class indices 0-%d", source, LABELS_FILE,
                     count - 1)
    return labels
