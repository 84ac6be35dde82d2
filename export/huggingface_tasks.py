"""A fine-tuned model in Hugging Face's `BertFor...` layout, for PyTorch users.

transformers 5 has no TensorFlow, so a model fine-tuned here reaches
PyTorch users only as one of its PyTorch classes: a classifier as
`BertForSequenceClassification` (and multiple choice as
`BertForMultipleChoice`), both reading [CLS]'s pooled vector; a tagger as
`BertForTokenClassification` and a span model as `BertForQuestionAnswering`,
both reading the sequence output and built without a pooler. The heads
compute what ours do: dropout, then one linear layer, whose weight here is
already stored [labels, hidden] as a `torch.nn.Linear` keeps it; the span
layer's two outputs are the start and end logits in that order. Label
names go to `config.json` as `id2label` / `label2id`, and a regression's or
a multi-label classifier's reading as `problem_type` (`regression`,
`multi_label_classification`: a sigmoid and binary cross-entropy per
label; transformers has no threshold, so 0.5 is implied). Such a folder
loads back here as the same task model with its labels
(`network.model_folder`, the head's names in `names.HF_TASK_HEADS`).

A model that reads anything else (the left-to-right model's last token, a
BiLSTM, GPT's two orders of a pair) has no such class and is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from network.checkpoints.names import huggingface_head_names
from network.checkpoints.writing import (huggingface_config, huggingface_tensors,
                                         write_huggingface_folder)
from network.config import BertConfig
from network.serving_spec import ServingSpec

# A task model's kind (its `serving_spec()`) -> (its Hugging Face class, whether that class has
# the pooler); the head's names on both sides are in `names.HF_TASK_HEADS`, which also reads
# such a folder back.
LAYOUTS = {
    "classifier": ("BertForSequenceClassification", True),
    "multiple_choice": ("BertForMultipleChoice", True),
    "tagger": ("BertForTokenClassification", False),
    "span": ("BertForQuestionAnswering", False),
}


def has_task_layout(spec: ServingSpec) -> bool:
    """Whether the model of `spec` is a fine-tuned model that goes to a `BertFor...` class."""
    return spec.kind in LAYOUTS


def export_huggingface_task(model, config: BertConfig, folder: str | os.PathLike) -> Path:
    """Writes `model.safetensors` and `config.json` of `model`'s `BertFor...` class into `folder`.

    Args:
      model: a BertClassifier, BertMultipleChoice, BertTokenTagger or BertSpanModel.
      config: its BertConfig.
      folder: created if missing; each file appears whole.

    Raises:
      ValueError: a model that reads its inputs in a way no `BertFor...` class does.
    """
    spec = model.serving_spec()
    check_task_layout(spec, type(model).__name__)
    architecture, pooler = LAYOUTS[spec.kind]
    variables = model.encoder.checkpoint_variables()
    if not pooler:
        variables = {name: value for name, value in variables.items()
                     if not name.startswith("bert/pooler/")}
    tensors = huggingface_tensors(variables)
    head_variables = model.head_variables()
    for theirs, ours in huggingface_head_names(architecture).items():
        tensors[theirs] = np.ascontiguousarray(np.asarray(head_variables[ours].numpy(),
                                                          np.float32))
    hf_config = huggingface_config(config, architecture)
    if spec.num_labels is not None:  # a classifier's or a tagger's labels
        names = spec.labels("LABEL_{}")
        hf_config.update(id2label={str(index): name for index, name in enumerate(names)},
                         label2id={name: index for index, name in enumerate(names)})
        if spec.kind == "classifier" and spec.num_labels == 1:
            hf_config["problem_type"] = "regression"
        elif spec.activation == "sigmoid":  # multi-label: a sigmoid per label
            hf_config["problem_type"] = "multi_label_classification"
    return write_huggingface_folder(tensors, hf_config, folder)


def check_task_layout(spec: ServingSpec, name: str) -> None:
    """Refuses the task model `name` of `spec` if no `BertFor...` class computes it, naming
    what differs."""
    if spec.kind not in LAYOUTS:
        raise ValueError(f"{name} has no Hugging Face BertFor... class; the task models that "
                         f"have one are the {', '.join(LAYOUTS)} models")
    if spec.causal:
        raise ValueError(f"{name} is the left-to-right model (causal=True), which no "
                         "Hugging Face BERT class computes")
    if spec.bilstm_units:
        raise ValueError(f"{name} reads the encoder through a BiLSTM (bilstm_units="
                         f"{spec.bilstm_units}), which no Hugging Face BERT class has")
