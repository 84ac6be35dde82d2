"""What a model serves, as the model states it: the one thing every export format reads.

An export writes a model for someone else's code: Hugging Face's
`BertFor...` classes, a SavedModel on raw text, TF Serving's model on ids,
TFLite. Each needs the same few facts: what the model reads (ids of one
text, or [batch, rows, seq] for a pair in both orders or a question's
choices; the vocabulary, casing and length of its raw text), what it
returns (its outputs' names), how its logits become an answer (a softmax
over its labels, a sigmoid per label above a threshold, or raw scores),
whether it reads a long text through windows, and how its head reads the
encoder. Guessed from the model's class and attributes, each format guessed
differently and a new setting was missed by some; stated by the model
(`serving_spec()` on the encoder, the pre-trainer, every task model and the
embedder), it is read the same way by all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

# What a model is, as the exports tell models apart; a task model's kind names its task.
KINDS = ("encoder", "pretrainer", "classifier", "multiple_choice", "tagger", "span", "embedder")
# How logits become scores: one softmax over the labels, or a sigmoid per label (multi-label).
ACTIVATIONS = ("softmax", "sigmoid")


@dataclasses.dataclass(frozen=True)
class ServingSpec:
    """What a model reads and returns, stated by the model (see the module).

    Args:
      kind: one of KINDS.
      outputs: the names of what the model returns, each a float tensor.
      returns_dict: the model returns a dict holding `outputs` by name (and maybe
        more that no export serves, such as an encoder's hidden states); else it
        returns the one tensor named `outputs[0]`.
      input_rank: 2 for ids [batch, seq]; 3 for [batch, rows, seq] (a pair read
        in both orders, a question's choices).
      num_labels: the labels a classifier or tagger scores; None for other kinds.
      label_names: their names, in the order of the outputs; None when unnamed.
      activation: how the logits become probabilities: one of ACTIVATIONS, or
        None for raw scores (a regression, spans, choices, vectors).
      threshold: with "sigmoid", the probability above which a label is predicted.
      windows: a text longer than `sequence_length` is read through windows
        `window_stride` pieces apart (default: half a window), not cut.
      window_stride: see `windows`.
      both_orders: a pair is read in both orders (GPT's similarity input).
      causal: the encoder reads left to right.
      bilstm_units: units per direction of a BiLSTM between the encoder and the head.
      vocabulary: the word pieces of the model's raw-text preprocessor, in id order;
        None for a model of ids only.
      do_lower_case: that preprocessor's casing.
      sequence_length: the pieces that preprocessor packs per text.

    Examples:

    >>> model = BertClassifier(config, num_labels=2, label_names=["negative", "positive"])
    >>> spec = model.serving_spec()
    >>> spec.kind, spec.outputs, spec.labels()
    ('classifier', ('logits',), ['negative', 'positive'])
    """

    kind: str
    outputs: tuple[str, ...]
    returns_dict: bool = False
    input_rank: int = 2
    num_labels: int | None = None
    label_names: Sequence[str] | None = None
    activation: str | None = None
    threshold: float | None = None
    windows: bool = False
    window_stride: int | None = None
    both_orders: bool = False
    causal: bool = False
    bilstm_units: int = 0
    vocabulary: Sequence[str] | None = dataclasses.field(default=None, repr=False)
    do_lower_case: bool | None = None
    sequence_length: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.activation not in (None, *ACTIVATIONS):
            raise ValueError(f"activation must be None or one of {', '.join(ACTIVATIONS)}, got "
                             f"{self.activation!r}")
        if (self.threshold is not None) != (self.activation == "sigmoid"):
            raise ValueError(f"threshold={self.threshold!r} goes with activation='sigmoid' "
                             f"and only with it, got activation={self.activation!r}")
        if self.input_rank not in (2, 3):
            raise ValueError(f"input_rank must be 2 or 3, got {self.input_rank!r}")
        if len(self.outputs) != 1 and not self.returns_dict:
            raise ValueError(f"outputs {self.outputs!r}: a model returns one tensor, or a dict "
                             "(returns_dict=True)")
        for name in ("outputs", "label_names", "vocabulary"):  # frozen: lists become tuples
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def labels(self, unnamed: str = "{}") -> list[str]:
        """The label names; for a model trained without them, `unnamed` with each index
        (`"{}"`: "0", "1", ...; Hugging Face's `"LABEL_{}"`)."""
        if self.num_labels is None:
            raise ValueError(f"a {self.kind} model has no labels")
        return list(self.label_names or [unnamed.format(index)
                                         for index in range(self.num_labels)])


def text_inputs(preprocessor: Any) -> dict[str, Any]:
    """The spec's raw-text fields, read from a model's preprocessor (None: ids only)."""
    if preprocessor is None:
        return {}
    return {"vocabulary": preprocessor.vocabulary,
            "do_lower_case": preprocessor.tokenizer.do_lower_case,
            "sequence_length": preprocessor.sequence_length}
