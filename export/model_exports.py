"""Every export of `export_model.py`, from any model: the layouts and the raw-text SavedModels.

`export.layouts` writes the layouts other ecosystems read (Google,
Hugging Face, TF Hub); this module adds the SavedModels that take raw text,
which live with the tasks that define what they serve:

- "saved_model": the fine-tuned model's own serving signature, chosen by
  its kind: a classifier's `serve_single` / `serve_pair` (probabilities and
  label), a tagger's tags per word, a span model's answers, an embedder's
  vectors (`export.serving`, `serving_tagging`, `serving_span`,
  `serving_embedder`);
- "embedder": a `BertTextEmbedder`'s vectors; a folder is read as
  `BertTextEmbedder.from_pretrained` reads it (a sentence-transformers
  folder's pooling and normalization);
- "tf_serving": the same SavedModel split in two as TF Hub's BERT is, the
  preprocessing on strings and the model on ids, beside the raw-text one;
  "tflite": any model on ids in LiteRT's flat buffer (`export.tflite`), float32
  or LiteRT's own int8.

Each takes what every export takes (`export.sources`): a model
object, a `.keras` file, or a folder, checkpoint or name, and writes
`output_dir` whole under the same rule (new, empty, or an earlier export of
the same format).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import keras

from core.arguments import FieldError, check_integer
from core.export_folder import check_export_folder, export_folder
from export import layouts
from export.serving import ClassifierServing, export_classifier
from export.serving_embedder import EmbedderServing, export_embedder
from export.serving_folders import NUMERIC_FORMATS, check_numeric_format, write_numeric_folder
from export.serving_preprocess import (ClassifierPreprocess, EmbedderPreprocess, SpanPreprocess,
                                       TaggerPreprocess)
from export.serving_span import SpanServing, export_span_model
from export.serving_tagging import TaggerServing, export_tagger
from export.sources import ExportSource, export_source, source_paths
from export.tflite import ids_preprocess
from modeling.classifier import BertClassifier
from modeling.preprocessor import default_sequence_length
from modeling.span_model import BertSpanModel
from modeling.text_embedder import BertTextEmbedder
from modeling.token_tagger import BertTokenTagger
from network.quantization import QuantizableModel, check_quantize

FORMATS = (*layouts.FORMATS, "saved_model", "embedder", *NUMERIC_FORMATS)


def export_model(source: Any, output_dir: str | os.PathLike, format_name: str,
                 sequence_length: int | None = None, do_lower_case: bool | None = None,
                 quantize: str | None = None, serving_version: int = 1) -> Path:
    """Writes the model in `source` to `output_dir` in `format_name` (one of FORMATS).

    Args:
      source: a model object, a `.keras` file, or a folder, checkpoint or name.
      output_dir: new, empty, or an earlier export of the same format.
      format_name: one of FORMATS (see the module).
      sequence_length: tokens per text in the export; default the model's
        preprocessor's (an embedder folder's: its `max_seq_length`), else 128.
      do_lower_case: overrides the source's casing.
      quantize: "int8" quantizes the exported model first (`model.quantize`), for
        "tf_hub" and a task model's "saved_model" and "tf_serving". It takes folders and `.keras`
        files: a model object is quantized by its own `quantize`, which changes
        it in place, so this export refuses to do that behind the caller's back.
        "tflite" takes any source: LiteRT's converter quantizes, the model unchanged.
      serving_version: "tf_serving": the numeric model's folder, `model/<serving_version>/`.
    """
    if format_name not in FORMATS:
        raise ValueError(f"format_name must be one of {', '.join(FORMATS)}, "
                         f"got {format_name!r}")
    _check_used(format_name, sequence_length, serving_version)
    if format_name in layouts.FORMATS:
        return layouts.export_model(source, output_dir, format_name,
                                    sequence_length, do_lower_case,
                                    quantize)
    check_quantize(quantize, format_name, None)
    # TFLite is quantized by its converter (export.tflite), the Keras model left as it is.
    lite_quantize, quantize = (quantize, None) if format_name == "tflite" else (None, quantize)
    serving_version = check_integer("serving_version", serving_version)
    if quantize and isinstance(source, keras.Model):
        raise FieldError("{quantize}={0!r} with a model object: call its quantize({0!r}) "
                         "first (it changes the model in place), then export it without "
                         "{quantize}", quantize)
    check_export_folder(output_dir, format_name, source_paths(source), argument="output_dir")
    if format_name == "embedder" and not isinstance(source, keras.Model) and not os.fspath(
            source).endswith(".keras"):
        model = BertTextEmbedder.from_pretrained(source, sequence_length,
                                                 do_lower_case=do_lower_case)
        loaded = export_source(model)
    else:
        loaded = export_source(source, do_lower_case)
    model = loaded.model
    if format_name == "embedder" and not isinstance(model, BertTextEmbedder):
        raise ValueError(f"source holds a {type(model).__name__}, not a BertTextEmbedder: "
                         "give an embedder, its .keras file, or a model folder")
    if format_name in NUMERIC_FORMATS:
        check_numeric_format(model, format_name)
    write = (format_name == "tflite" and ids_preprocess(model)) or _serving_export(model)
    if quantize:
        if not isinstance(model, QuantizableModel):
            raise FieldError("{quantize}={0!r}: a {1} has no int8 path; export it without "
                             "{quantize}", quantize, type(model).__name__)
        model.quantize(quantize)
    length = _sequence_length(model, loaded, sequence_length)
    loaded.require_vocabulary("a SavedModel on raw text")
    with tempfile.TemporaryDirectory() as scratch, export_folder(
            output_dir, format_name, source_paths(source), argument="output_dir") as staging:
        vocab_file = os.path.join(scratch, "vocab.txt")
        loaded.write_vocabulary(vocab_file, "a SavedModel on raw text")
        tokenizer = loaded.tokenizer(vocab_file)
        if format_name in NUMERIC_FORMATS:
            write_numeric_folder(model, staging, format_name, serving_version,
                                 lambda path, preprocess: write(tokenizer, length, path,
                                                                preprocess), lite_quantize)
        else:
            write(tokenizer, length, staging, False)
    return Path(output_dir)


def _check_used(format_name: str, sequence_length: Any, serving_version: Any) -> None:
    """Refuses a setting `format_name` has no use for: ignored, it would look applied."""
    if sequence_length is not None and format_name in ("google", "huggingface"):
        raise FieldError("{sequence_length}={0!r} sets a preprocessor's length; the {1} format "
                         "holds weights only, so leave {sequence_length} unset", sequence_length,
                         format_name)
    if serving_version != 1 and format_name != "tf_serving":
        raise FieldError("{serving_version}={0!r} applies to format_name='tf_serving', not {1!r}",
                         serving_version, format_name)


def _sequence_length(model, loaded: ExportSource, sequence_length: int | None) -> int:
    preprocessor = getattr(model, "preprocessor", None)
    if sequence_length is None:
        sequence_length = (preprocessor.sequence_length if preprocessor is not None
                           else default_sequence_length(loaded.config))
    return loaded.config.check_sequence_length(sequence_length)


def _serving_export(model) -> Callable[[Any, int, str, bool], Any]:
    """Writes (tokenizer, length, path, preprocess) the SavedModel whose signature is `model`'s
    task's; with `preprocess`, its preprocessing alone (`export.serving_preprocess`)."""
    if isinstance(model, BertTextEmbedder):
        return lambda tokenizer, length, path, preprocess: export_embedder(
            model, tokenizer, length, path,
            EmbedderPreprocess if preprocess else EmbedderServing)
    if isinstance(model, BertClassifier):
        labels = None if model.num_labels == 1 else _labels(model)  # one score: regression
        return lambda tokenizer, length, path, preprocess: export_classifier(
            model, tokenizer, length, labels, False, path,
            ClassifierPreprocess if preprocess else ClassifierServing)
    if isinstance(model, BertTokenTagger):
        return lambda tokenizer, length, path, preprocess: export_tagger(
            model, tokenizer, length, _labels(model), path,
            module_class=TaggerPreprocess if preprocess else TaggerServing)
    if isinstance(model, BertSpanModel):
        return lambda tokenizer, length, path, preprocess: export_span_model(
            model, tokenizer, length, None, path,
            SpanPreprocess if preprocess else SpanServing)
    raise ValueError(f"a {type(model).__name__} has no SavedModel on raw text: export a "
                     "fine-tuned classifier, tagger or span model, or an embedder; an "
                     "encoder goes to format tf_hub")


def _labels(model) -> list[str]:
    return model.label_names or [str(index) for index in range(model.num_labels)]
