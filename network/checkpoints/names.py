"""Variable names: Google's TF1 names are the canonical ones; Hugging Face's derive from them.

Every model here lists its weights under Google's names and in Google's
shapes (`checkpoint_variables()`), so each checkpoint format needs only a
translation to and from that one naming, never a map per model class.

Hugging Face's PyTorch names follow the same tree with dots, `weight`/`bias`
for dense layers and LayerNorm (older files: `gamma`/`beta`), and dense
kernels stored transposed ([out, in], as `torch.nn.Linear` keeps them). The
next-sentence matrix is the exception: Google already stored it [2, hidden],
the orientation of a Linear weight, so it is copied as it is.
"""

from __future__ import annotations

import re

# Optimizer slots and counters of a training checkpoint: not model weights.
_TRAINING_STATE = frozenset({"adam_m", "adam_v", "global_step", "good_steps",
                             "current_loss_scale"})
# Buffers and tied copies that a Hugging Face file may hold beside the weights.
HF_SKIPPED = re.compile(r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$")
_HF_RENAMED = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}
# Hugging Face's fine-tuned BertFor... classes (`architectures` in config.json): the module of
# their head -> our head's Google-style prefix, and the model class of ours with that head. A
# head is one Linear layer, stored [outputs, hidden] in both, so it is renamed, not transposed.
HF_TASK_HEADS = {
    "BertForSequenceClassification": ("classifier", "", "BertClassifier"),
    "BertForMultipleChoice": ("classifier", "multiple_choice/", "BertMultipleChoice"),
    "BertForTokenClassification": ("classifier", "ner/", "BertTokenTagger"),
    "BertForQuestionAnswering": ("qa_outputs", "cls/squad/", "BertSpanModel"),
}
_LAST_PART = {"kernel": "weight", "gamma": "weight", "beta": "bias",
              "bias": "bias", "output_weights": "weight", "output_bias": "bias"}


def is_training_state(name: str) -> bool:
    """True for an optimizer slot or step counter in a Google training checkpoint."""
    return name.rsplit("/", 1)[-1] in _TRAINING_STATE


def google_to_huggingface(name: str) -> tuple[str, bool]:
    """Hugging Face's name for a Google variable name, and whether it is stored transposed."""
    if name in _HF_RENAMED:
        return _HF_RENAMED[name], False
    *path, last = name.split("/")
    path = [re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in path]
    if last.endswith("embeddings"):
        return ".".join([*path, last, "weight"]), False
    if last not in _LAST_PART:
        raise KeyError(f"no Hugging Face name is known for {name!r}")
    return ".".join([*path, _LAST_PART[last]]), last == "kernel"


def huggingface_to_google(name: str) -> tuple[str, bool]:
    """Google's name for a (normalized) Hugging Face name, and whether to transpose it."""
    for google_name, hf_name in _HF_RENAMED.items():
        if name == hf_name:
            return google_name, False
    *path, last = name.split(".")
    if last not in ("weight", "bias") or not path:
        raise KeyError(f"no Google name is known for {name!r}")
    google_path = "/".join(path)
    google_path = re.sub(r"(^|/)layer/(\d+)(?=/|$)", r"\1layer_\2", google_path)
    if path[-1].endswith("embeddings"):
        return google_path, False
    if path[-1] == "LayerNorm":
        return f"{google_path}/{'gamma' if last == 'weight' else 'beta'}", False
    return f"{google_path}/{'kernel' if last == 'weight' else 'bias'}", last == "weight"


def huggingface_head_names(architecture: str | None) -> dict[str, str]:
    """{Hugging Face name: Google name} of the head of a `BertFor...` `architecture`; {} for
    another (a BertModel, a pre-training class), whose names the general rule translates."""
    if architecture not in HF_TASK_HEADS:
        return {}
    head, prefix, _ = HF_TASK_HEADS[architecture]
    return {f"{head}.weight": f"{prefix}output_weights", f"{head}.bias": f"{prefix}output_bias"}


def normalize_huggingface_name(name: str) -> str:
    """Folds the old `gamma`/`beta` LayerNorm names and a missing `bert.` prefix."""
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    # A bare BertModel is saved without its `bert.` prefix.
    if name.split(".", 1)[0] in ("embeddings", "encoder", "pooler"):
        name = "bert." + name
    return name

