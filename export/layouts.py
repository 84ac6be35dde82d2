"""A model rewritten in another ecosystem's layout: Google's, Hugging Face's or TF Hub's.

Whatever the source (a model object, a `.keras` file, a Google release, a
Hugging Face folder, this project's run: `export.sources`), the output is what that ecosystem's own tools expect:

- "google": `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*` (TF1
  name-based), what the original repository's `--init_checkpoint` reads;
- "huggingface": `config.json`, `model.safetensors`, `vocab.txt`,
  `tokenizer_config.json`, what `transformers`' `from_pretrained` reads;
- "tf_hub": the `preprocess` and `encoder` SavedModels of TF Hub's BERT
  interface (`export.tf_hub`).

The first two carry the pre-trained network: the encoder and, when the
source has them, the masked-LM and next-sentence heads. A fine-tuned head
goes to Google's layout under the original scripts' names (`output_weights`,
`cls/squad/...`), and to Hugging Face's as the matching `BertFor...` class
(`export.huggingface_tasks`); one that has no such class is refused, and
a tensor that has no place in a layout is named in the log, never dropped
silently.

The output folder appears whole or not at all, and only where nothing is
lost: a new or empty folder, or one an earlier export of the same format
wrote, which is replaced whole (`core.export_folder`). The source, a folder
holding it, a folder of other files, an export of another format and an
existing file are refused, each by name, before any weights are loaded.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from absl import logging

from core.export_folder import check_export_folder, export_folder
from export.huggingface_tasks import check_task_layout, export_huggingface_task, has_task_layout
from export.sources import export_source, source_paths
from export.tf_hub import export_tf_hub
from network.checkpoints import export_google_checkpoint, export_huggingface
from network.model_folder import GOOGLE_CHECKPOINT, VOCAB_FILE, write_model_folder
from network.quantization import check_quantize

FORMATS = ("google", "huggingface", "tf_hub")


def export_model(source: Any, output_dir: str | os.PathLike, format_name: str,
                 sequence_length: int | None = None, do_lower_case: bool | None = None,
                 quantize: str | None = None) -> Path:
    """Writes the model in `source` to `output_dir` in `format_name` (one of FORMATS).

    Args:
      source: a model of this project (a fine-tuned task model, an encoder,
        a `BertTextEmbedder`), a `.keras` file one was saved to, or a folder,
        checkpoint or model name (`export.sources`).
      output_dir: new, empty, or an earlier export of the same format (see the module).
      format_name: "google", "huggingface" or "tf_hub".
      sequence_length: what the TF Hub preprocessor pads to (default: the
        model's default, `modeling.preprocessor.default_sequence_length`).
      do_lower_case: overrides the casing read from the source; it decides the
        TF Hub preprocessor's tokenizer and Hugging Face's `tokenizer_config.json`.
      quantize: "int8" quantizes the TF Hub encoder (`model.quantize`); the
        other formats write float checkpoints and refuse it.

    A fine-tuned classifier, tagger or span model goes to Hugging Face as
    its `BertFor...` class with its labels (`export.huggingface_tasks`),
    and to Google's layout with its head under the original scripts' names.
    """
    if format_name not in FORMATS:
        raise ValueError(f"format_name must be one of {', '.join(FORMATS)}, "
                         f"got {format_name!r}")
    check_quantize(quantize, format_name, None if format_name == "tf_hub" else
                   "a float checkpoint (int8 weights have no place in it)")
    check_export_folder(output_dir, format_name, source_paths(source), argument="output_dir")
    if format_name == "tf_hub":
        return export_tf_hub(source, output_dir, sequence_length, do_lower_case, quantize)
    loaded = export_source(source, do_lower_case)
    task_layout = format_name == "huggingface" and has_task_layout(loaded.model)
    if task_layout:
        check_task_layout(loaded.model)
    need = f"the {format_name} export"
    loaded.require_vocabulary(need)
    with export_folder(output_dir, format_name, source_paths(source),
                       argument="output_dir") as staging:
        if format_name == "google":
            write_model_folder(staging, weights=(GOOGLE_CHECKPOINT, functools.partial(
                export_google_checkpoint, _Weights(loaded.variables))), config=loaded.config,
                vocabulary=functools.partial(loaded.write_vocabulary, need=need))
        else:
            loaded.write_vocabulary(os.path.join(staging, VOCAB_FILE), need)
            if task_layout:
                export_huggingface_task(loaded.model, loaded.config, staging)
            else:
                export_huggingface(_Weights(_encoder_side(loaded.variables)), staging,
                                   loaded.config)
            settings = {"do_lower_case": loaded.do_lower_case,
                        "tokenizer_class": "BertTokenizer",
                        "model_max_length": loaded.config.max_position_embeddings}
            Path(staging, "tokenizer_config.json").write_text(json.dumps(settings, indent=2)
                                                               + "\n")
    return Path(output_dir)


def _encoder_side(variables: dict) -> dict:
    """The variables a Hugging Face BertModel / BertForPreTraining has: no fine-tuned head
    (a head without a BertFor... class is listed in the log, not dropped silently)."""
    kept = {name: value for name, value in variables.items()
            if name.startswith(("bert/", "cls/predictions/", "cls/seq_relationship/"))}
    left = sorted(set(variables) - set(kept))
    if left:
        logging.warning("%d tensors are not part of a pre-trained BERT and are not exported: "
                        "%s", len(left), ", ".join(left))
    return kept


class _Weights:
    """Variables by Google name, as the checkpoint writers take a model."""

    def __init__(self, variables: dict):
        self._variables = dict(variables)

    def checkpoint_variables(self) -> dict:
        return dict(self._variables)
