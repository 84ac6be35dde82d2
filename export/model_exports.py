"""The one `export_model`: any model, to any format `export_model.py --format` offers.

- "google", "huggingface": the checkpoint layouts other ecosystems read
  (`export.layouts`); "tf_hub": TF Hub's BERT interface (`export.tf_hub`);
- "saved_model": the fine-tuned model's own serving signature on raw text,
  chosen by what the model says it serves (`serving_spec()`,
  `network.serving_spec`): a classifier's `serve_single` / `serve_pair`
  (probabilities and label), a tagger's tags per word, a span model's
  answers, an embedder's vectors (`export.serving`, `serving_tagging`,
  `serving_span`, `serving_embedder`);
- "embedder": a `BertTextEmbedder`'s vectors; a folder is read as
  `BertTextEmbedder.from_pretrained` reads it (a sentence-transformers
  folder's pooling and normalization);
- "tf_serving": the same SavedModel split in two as TF Hub's BERT is, the
  preprocessing on strings and the model on ids, beside the raw-text one;
  "tflite": any model on ids in LiteRT's TFLite, float32 or LiteRT's own
  int8 (`export.tflite`, `export.serving_folders`).

Each takes what every export takes (`export.sources`): a model
object, a `.keras` file, or a folder, checkpoint or name, and writes
`output_dir` whole under the same rule (new, empty, or an earlier export of
the same format), every argument checked before any weights are loaded.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import keras

from core.arguments import FieldError, check_integer
from core.export_folder import check_export_folder, export_folder
from export.layouts import LAYOUTS, write_layout
from export.serving import ClassifierServing, export_classifier
from export.serving_embedder import EmbedderServing, export_embedder
from export.serving_folders import NUMERIC_FORMATS, write_numeric_folder
from export.serving_preprocess import (ClassifierPreprocess, EmbedderPreprocess, SpanPreprocess,
                                       TaggerPreprocess)
from export.serving_span import SpanServing, export_span_model
from export.serving_tagging import TaggerServing, export_tagger
from export.sources import ExportSource, export_source, is_model_or_file, source_paths
from export.tf_hub import export_tf_hub
from export.tflite import ids_preprocess
from modeling.preprocessor import default_sequence_length
from modeling.text_embedder import BertTextEmbedder
from network.quantization import QuantizableModel, check_quantize
from network.serving_spec import ServingSpec
from text.tokenization import FullTokenizer

_SAVED_MODELS = ("saved_model", "embedder", *NUMERIC_FORMATS)  # a task model's own signatures
FORMATS = (*LAYOUTS, "tf_hub", *_SAVED_MODELS)
# Each format that refuses `quantize`: what it writes instead of int8 weights.
_FLOAT_ONLY = dict.fromkeys(LAYOUTS, "a float checkpoint (int8 weights have no place in it)")
# What a model serves (its spec's kind) -> its SavedModel on raw text, and that one's
# preprocessing alone (`export.serving_preprocess`).
_TEXT_MODULES = {"classifier": (ClassifierServing, ClassifierPreprocess),
                 "tagger": (TaggerServing, TaggerPreprocess),
                 "span": (SpanServing, SpanPreprocess),
                 "embedder": (EmbedderServing, EmbedderPreprocess)}


def export_model(source: Any, output_dir: str | os.PathLike, format_name: str,
                 sequence_length: int | None = None, do_lower_case: bool | None = None,
                 quantize: str | None = None, serving_version: int = 1) -> Path:
    """Writes the model in `source` to `output_dir` in `format_name` (one of FORMATS).

    Args:
      source: a model of this project (a fine-tuned task model, an encoder,
        a `BertTextEmbedder`), a `.keras` file one was saved to, or a folder,
        checkpoint or model name (`export.sources`).
      output_dir: new, empty, or an earlier export of the same format.
      format_name: one of FORMATS (see the module).
      sequence_length: tokens per text in a SavedModel (the TF Hub
        preprocessor's default too); default the model's preprocessor's (an
        embedder folder's: its `max_seq_length`), else 128 or the model's
        positions where it has fewer.
      do_lower_case: overrides the source's casing; it decides the SavedModels'
        tokenizer and Hugging Face's `tokenizer_config.json`.
      quantize: "int8" quantizes the exported model first (`model.quantize`), for
        "tf_hub" (a copy of the encoder) and a task model's "saved_model" and
        "tf_serving". These two take folders and `.keras` files: a model object
        is quantized by its own `quantize`, which changes it in place, so this
        export refuses to do that behind the caller's back. "tflite" takes any
        source: LiteRT's converter quantizes, the model left as it is. The
        checkpoint layouts refuse it.
      serving_version: "tf_serving": the numeric model's folder, `model/<serving_version>/`.

    Examples:

    >>> export_model("out/sst2", "sst2_serving", "tf_serving")
    PosixPath('sst2_serving')
    """
    if format_name not in FORMATS:
        raise ValueError(f"format_name must be one of {', '.join(FORMATS)}, "
                         f"got {format_name!r}")
    check_quantize(quantize, format_name, _FLOAT_ONLY.get(format_name))
    _check_used(format_name, sequence_length, serving_version)
    if format_name in _SAVED_MODELS:
        serving_version = check_integer("serving_version", serving_version)
        if quantize and format_name != "tflite" and isinstance(source, keras.Model):
            raise FieldError("{quantize}={0!r} with a model object: call its quantize({0!r}) "
                             "first (it changes the model in place), then export it without "
                             "{quantize}", quantize)
    check_export_folder(output_dir, format_name, source_paths(source), argument="output_dir")
    if format_name == "tf_hub":
        return export_tf_hub(source, output_dir, sequence_length, do_lower_case, quantize)
    if format_name in LAYOUTS:
        return write_layout(source, output_dir, format_name, do_lower_case)
    loaded = _served_source(source, format_name, sequence_length, do_lower_case)
    _write_saved_models(loaded, source_paths(source), output_dir, format_name,
                        sequence_length, quantize, serving_version)
    return Path(output_dir)


def _served_source(source: Any, format_name: str, sequence_length: int | None,
                   do_lower_case: bool | None) -> ExportSource:
    """The source of a SavedModel export; for "embedder", a folder read as
    `BertTextEmbedder.from_pretrained` reads it, and nothing but an embedder."""
    if format_name == "embedder" and not is_model_or_file(source):
        loaded = export_source(BertTextEmbedder.from_pretrained(source, sequence_length,
                                                                do_lower_case=do_lower_case))
    else:
        loaded = export_source(source, do_lower_case)
    if format_name == "embedder" and loaded.model.serving_spec().kind != "embedder":
        raise ValueError(f"source holds a {type(loaded.model).__name__}, not a "
                         "BertTextEmbedder: give an embedder, its .keras file, or a model folder")
    return loaded


def _write_saved_models(loaded: ExportSource, sources: list[str], output_dir: str | os.PathLike,
                        format_name: str, sequence_length: int | None, quantize: str | None,
                        serving_version: int) -> None:
    """Writes `format_name`, one of `_SAVED_MODELS`, of the checked arguments (`export_model`)."""
    model = loaded.model
    spec = model.serving_spec()
    # TFLite is quantized by its converter (export.tflite), the Keras model left as it is.
    lite_quantize, quantize = (quantize, None) if format_name == "tflite" else (None, quantize)
    write = (format_name == "tflite" and ids_preprocess(model, spec)) or _text_model_writer(
        model, spec)
    if quantize:
        if not isinstance(model, QuantizableModel):
            raise FieldError("{quantize}={0!r}: a {1} has no int8 path; export it without "
                             "{quantize}", quantize, type(model).__name__)
        model.quantize(quantize)
    if sequence_length is None:
        sequence_length = spec.sequence_length or default_sequence_length(loaded.config)
    length = loaded.config.check_sequence_length(sequence_length)
    loaded.require_vocabulary("a SavedModel on raw text")
    with tempfile.TemporaryDirectory() as scratch, export_folder(
            output_dir, format_name, sources, argument="output_dir") as staging:
        vocab_file = os.path.join(scratch, "vocab.txt")
        loaded.write_vocabulary(vocab_file, "a SavedModel on raw text")
        tokenizer = loaded.tokenizer(vocab_file)
        if format_name in NUMERIC_FORMATS:
            write_numeric_folder(model, staging, format_name, serving_version,
                                 lambda path, preprocess: write(tokenizer, length, path,
                                                                preprocess), lite_quantize)
        else:
            write(tokenizer, length, staging, False)


def _check_used(format_name: str, sequence_length: Any, serving_version: Any) -> None:
    """Refuses a setting `format_name` has no use for: ignored, it would look applied."""
    if sequence_length is not None and format_name in LAYOUTS:
        raise FieldError("{sequence_length}={0!r} sets a preprocessor's length; the {1} format "
                         "holds weights only, so leave {sequence_length} unset", sequence_length,
                         format_name)
    if serving_version != 1 and format_name != "tf_serving":
        raise FieldError("{serving_version}={0!r} applies to format_name='tf_serving', not {1!r}",
                         serving_version, format_name)


def _text_model_writer(model, spec: ServingSpec) -> Callable[[FullTokenizer, int, str, bool], str]:
    """Writes (tokenizer, length, path, preprocess) the SavedModel on raw text of what `model`
    serves (`spec`); with `preprocess`, its preprocessing alone."""
    if spec.kind not in _TEXT_MODULES:
        raise ValueError(f"a {type(model).__name__} has no SavedModel on raw text: export a "
                         "fine-tuned classifier, tagger or span model, or an embedder; an "
                         "encoder goes to format_name='tf_hub'")

    def write(tokenizer: FullTokenizer, length: int, path: str, preprocess: bool) -> str:
        serving, preprocessing = _TEXT_MODULES[spec.kind]
        module_class = preprocessing if preprocess else serving
        if spec.kind == "classifier":  # one score: a regression, which has no labels
            labels = None if spec.num_labels == 1 else spec.labels()
            return export_classifier(model, tokenizer, length, labels, False, path, module_class)
        if spec.kind == "tagger":
            return export_tagger(model, tokenizer, length, spec.labels(), path,
                                 module_class=module_class)
        if spec.kind == "span":
            return export_span_model(model, tokenizer, length, None, path, module_class)
        return export_embedder(model, tokenizer, length, path, module_class)

    return write
