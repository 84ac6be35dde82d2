"""Hugging Face PyTorch fine-tuning of a BERT folder for tagging (CoNLL-2003 NER): the reference.

Run by `experiments.conll` in the torch environment (`.venv-ref`), never
imported by the project. It reads one JSON request (the sentences as the
project's CoNLL reader read them, the tag set and the recipe) and writes one
JSON answer (a tag for every word of each set to predict), so that the
data, the scoring and the files written are the project's and only the
fine-tuning differs.

The recipe is `run_ner.py`'s: `BertForTokenClassification` from the same
folder (dropout 0.1 from its config), each word's label on its first
sub-token and none elsewhere, the mean cross-entropy over labelled
positions, and the optimizer, schedule and batch order of
`hf_glue_finetune` (the original BERT AdamW, or PyTorch's with
`bias_correction`). Training truncates a sentence to `max_seq_length`
sub-tokens, as Hugging Face's token-classification examples do, where
`run_ner.py` reads it in overlapping windows; prediction reads each sentence
whole (up to 512 sub-tokens), so every word gets a tag.

    python hf_ner_finetune.py REQUEST.json ANSWER.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_glue_finetune import batch_order, run_updates  # noqa: E402

NO_LABEL = -100  # PyTorch's ignore_index
PREDICT_LENGTH = 512  # the model's positions: no sentence is cut when predicting


def encode(tokenizer, sentences: list[list[str]], length: int):
    """Sub-tokens of pre-split words, and each word's first sub-token position per sentence."""
    inputs = tokenizer(sentences, is_split_into_words=True, max_length=length, truncation=True,
                       padding="longest", return_tensors="pt")
    firsts = []
    for row in range(len(sentences)):
        words = inputs.word_ids(row)
        firsts.append([k for k, word in enumerate(words)
                       if word is not None and (k == 0 or words[k - 1] != word)])
    return inputs, firsts


def train(model, tokenizer, request: dict) -> list[list[float]]:
    """Fine-tunes `model` in place; returns [update, loss] every 50 updates (and the last)."""
    words, tags = request["train"]["words"], request["train"]["tags"]
    label_ids = {label: index for index, label in enumerate(request["labels"])}
    batches = batch_order(len(words), request["epochs"], request["batch_size"], request["seed"])

    def loss_of(rows: list[int]):
        inputs, firsts = encode(tokenizer, [words[i] for i in rows], request["max_seq_length"])
        targets = torch.full(inputs["input_ids"].shape, NO_LABEL)
        for row, (index, positions) in enumerate(zip(rows, firsts)):
            for position, tag in zip(positions, tags[index]):
                targets[row, position] = label_ids[tag]
        return model(**inputs, labels=targets).loss

    return run_updates(model, request, batches, loss_of)


@torch.no_grad()
def predict(model, tokenizer, sentences: list[list[str]], labels: list[str]) -> list[list[str]]:
    """A tag for every word, read at its first sub-token."""
    model.eval()
    tags = []
    for start in range(0, len(sentences), 64):
        inputs, firsts = encode(tokenizer, sentences[start:start + 64], PREDICT_LENGTH)
        best = model(**inputs).logits.argmax(-1)
        tags.extend([labels[int(best[row, k])] for k in positions]
                    for row, positions in enumerate(firsts))
    return tags


def main() -> None:
    request_path, answer_path = sys.argv[1], sys.argv[2]
    with open(request_path, encoding="utf-8") as reader:
        request = json.load(reader)
    torch.manual_seed(request["seed"])
    tokenizer = transformers.BertTokenizerFast.from_pretrained(
        request["model_dir"], do_lower_case=request["do_lower_case"])
    model = transformers.BertForTokenClassification.from_pretrained(
        request["model_dir"], num_labels=len(request["labels"]))
    started = time.monotonic()
    curve = train(model, tokenizer, request)
    answer = {"train_loss": curve, "train_seconds": round(time.monotonic() - started, 1),
              "tags": {name: predict(model, tokenizer, sentences, request["labels"])
                       for name, sentences in request["predict"].items()}}
    if not all(math.isfinite(loss) for _, loss in curve):
        answer["diverged"] = True
    temporary = f"{answer_path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as writer:
        json.dump(answer, writer)
    os.replace(temporary, answer_path)


if __name__ == "__main__":
    main()
