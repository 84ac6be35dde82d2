"""A task model exported for serving without string ops: on raw text, on ids, for TFLite.

`export_model(..., format_name="tf_serving")` (`export.model_exports`,
`export_model.py --format=tf_serving`) writes, for a fine-tuned classifier,
tagger or span model, or an embedder, in one folder that appears whole or
not at all (`core.export_folder`):

- "tf_serving":
  - `raw_text/`: the model's SavedModel on strings, as `saved_model` writes
    it (needs `import tensorflow_text`);
  - `preprocess/`: the same signatures, strings -> `input_ids`,
    `input_mask`, `segment_ids` and each kind's map back onto the text
    (`export.serving_preprocess`);
  - `model/<serving_version>/`: the numeric SavedModel, in TF Serving's
    layout (`--model_base_path=<output_dir>/model`; `export.numeric`);
- "tflite" (every kind of model, `export.tflite`): `model.tflite` (the numeric
  signature in TFLite's built-in ops; with `quantize`, LiteRT's int8) and
  `preprocess/`;

each with `labels.txt`, the label names in the order of the outputs (a
classifier's or a tagger's). The tokenizer stays out of the TFLite model: it
reproduces the original's normalization with regular expressions and ICU
ops (`text.normalization`) that have no TFLite kernels (the converted model
stops at `StaticRegexFullMatch`); tensorflow-text's stock
`FastBertTokenizer`, which has one, gives other ids on some text.
"""

from __future__ import annotations

import os
import shutil
from typing import Callable

from export.numeric import save_numeric
from export.tflite import TFLITE_FILE, write_tflite
from network.model_folder import LABELS_FILE

NUMERIC_FORMATS = ("tf_serving", "tflite")
RAW_TEXT, PREPROCESS, MODEL = "raw_text", "preprocess", "model"


def write_numeric_folder(model, folder: str, format_name: str, serving_version: int,
                         write_text_model: Callable[[str, bool], object],
                         quantize: str | None = None) -> None:
    """Writes `model`'s `format_name` layout (see the module) into `folder`, an export's staging.

    Args:
      model: the task model (already quantized, if asked).
      folder: the staging folder (`core.export_folder`).
      format_name: one of NUMERIC_FORMATS.
      serving_version: the numeric model's version folder under `model/`.
      write_text_model: (path, preprocess) writes the raw-text SavedModel of the
        model's kind to `path`, or with `preprocess` its preprocessing alone.
      quantize: "tflite": "int8" converts with LiteRT's int8 (`export.tflite`).
    """
    if format_name == "tf_serving":
        write_text_model(os.path.join(folder, RAW_TEXT), False)
        save_numeric(model, os.path.join(folder, MODEL, str(serving_version)))
    else:
        write_tflite(model, os.path.join(folder, TFLITE_FILE), quantize)
    write_text_model(os.path.join(folder, PREPROCESS), True)
    labels = os.path.join(folder, PREPROCESS, LABELS_FILE)
    if os.path.isfile(labels):
        shutil.copyfile(labels, os.path.join(folder, LABELS_FILE))
