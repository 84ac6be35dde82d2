"""A model folder rewritten in another ecosystem's layout: Google's, Hugging Face's or TF Hub's.

Whatever the source's format (Google release, Hugging Face folder, this
project's run), the output is what that ecosystem's own tools expect:

- "google": `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*` (TF1
  name-based), what the original repository's `--init_checkpoint` reads;
- "huggingface": `config.json`, `model.safetensors`, `vocab.txt`,
  `tokenizer_config.json`, what `transformers`' `from_pretrained` reads;
- "tf_hub": the `preprocess` and `encoder` SavedModels of TF Hub's BERT
  interface (`modeling.tf_hub_export`).

The first two carry the pre-trained network: the encoder and, when the
source has them, the masked-LM and next-sentence heads. A fine-tuned head
(a classifier, a span or tag layer) has no place in those layouts; such
tensors are counted and named in the log, never dropped silently.

The output folder appears whole or not at all, and only where nothing is
lost: a new or empty folder, or one an earlier export of the same format
wrote, which is replaced whole (`core.export_folder`). The source, a folder
holding it, a folder of other files, an export of another format and an
existing file are refused, each by name, before any weights are loaded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from absl import logging

from core.export_folder import check_export_folder, export_folder
from modeling.checkpoints import export_google_checkpoint, export_huggingface, load_weights
from modeling.pretrained import load_config, load_tokenizer
from modeling.pretrainer import BertPretrainer
from modeling.tf_hub_export import export_tf_hub

FORMATS = ("google", "huggingface", "tf_hub")


def export_model(source: str | os.PathLike, output_dir: str | os.PathLike, format_name: str,
                 sequence_length: int = 128, do_lower_case: bool | None = None) -> Path:
    """Writes the model in `source` to `output_dir` in `format_name` (one of FORMATS).

    `output_dir` must be new, empty, or an earlier export of the same format
    (see the module). `do_lower_case` overrides the casing read from the
    source; it decides the TF Hub preprocessor's tokenizer and Hugging
    Face's `tokenizer_config.json`. `sequence_length` is the TF Hub
    preprocessor's.
    """
    if format_name not in FORMATS:
        raise ValueError(f"format_name must be one of {', '.join(FORMATS)}, "
                         f"got {format_name!r}")
    check_export_folder(output_dir, format_name, [source], argument="output_dir")
    if format_name == "tf_hub":
        return export_tf_hub(source, output_dir, sequence_length, do_lower_case)
    config = load_config(source)
    tokenizer = load_tokenizer(source, do_lower_case)
    model = BertPretrainer(config)
    report = load_weights(model, source)
    logging.info("%s: %d tensors to export (%s format)", source, len(report.loaded),
                 report.format)
    if report.missing:
        logging.info("the source has no %s; they are not exported", ", ".join(report.missing))
    if report.unexpected:
        logging.warning("%d tensors of %s are not part of a pre-trained BERT and are not "
                        "exported: %s", len(report.unexpected), source,
                        ", ".join(report.unexpected))
    weights = _LoadedWeights(model, report.loaded)
    with export_folder(output_dir, format_name, [source], argument="output_dir") as staging:
        if format_name == "google":
            export_google_checkpoint(weights, os.path.join(staging, "bert_model.ckpt"))
            config.to_json_file(os.path.join(staging, "bert_config.json"))
        else:
            export_huggingface(weights, staging, config)
            settings = {"do_lower_case": tokenizer.do_lower_case,
                        "tokenizer_class": "BertTokenizer",
                        "model_max_length": config.max_position_embeddings}
            Path(staging, "tokenizer_config.json").write_text(json.dumps(settings, indent=2)
                                                               + "\n")
        shutil.copyfile(tokenizer.vocab_file, os.path.join(staging, "vocab.txt"))
    return Path(output_dir)


class _LoadedWeights:
    """The variables the source filled, under their Google names: a head the source lacks
    (randomly initialized here) is left out of the export rather than written as if trained."""

    def __init__(self, model: BertPretrainer, loaded: list[str]):
        variables = model.checkpoint_variables()
        self._variables = {name: variables[name] for name in loaded}

    def checkpoint_variables(self) -> dict:
        return dict(self._variables)
