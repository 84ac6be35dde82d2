"""Hugging Face PyTorch fine-tuning of a BERT folder on one GLUE task: the reference run.

Run by `experiments.glue_peer` in the torch environment (`.venv-ref`), never
imported by the project. It reads one JSON request (the examples as the
project's reader read them, and the recipe) and writes one JSON answer (the
model's outputs on each set to predict), so that the examples, the metrics
and the files written are the project's and only the fine-tuning differs.

The recipe is `run_classifier.py`'s, so that a gap between the two points
at an implementation, not a setting: `BertForSequenceClassification` from
the same folder (dropout 0.1 from its config; one output and mean squared
error for regression), pairs truncated longest-first to `max_seq_length`
and padded to it, the training set read as one stream of reshuffled passes
cut into whole batches (floor(N x epochs / batch) updates), AdamW (weight
decay 0.01 off biases and LayerNorm, epsilon 1e-6), gradients clipped at
global norm 1.0, linear warmup over the first `warmup_proportion` of the
updates, then the original's linear decay, counted from update 0 (so the
rate just after warmup is 0.9 of the peak; `get_linear_schedule_with_warmup`
counts it from the end of warmup, every later rate 1/0.9 of the original's).
`bias_correction` false is the original
BERT optimizer (Adam's moments without bias correction, as
pytorch-pretrained-bert's BertAdam), true is PyTorch's `torch.optim.AdamW`.

    python hf_glue_finetune.py REQUEST.json ANSWER.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import torch
import transformers


class AdamWithoutBiasCorrection(torch.optim.Optimizer):
    """The original BERT AdamW: update = m / (sqrt(v) + eps) + wd * p, moments uncorrected."""

    def __init__(self, groups, lr: float, betas=(0.9, 0.999), eps: float = 1e-6):
        super().__init__(groups, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0})

    @torch.no_grad()
    def step(self, closure=None):
        del closure
        for group in self.param_groups:
            beta_1, beta_2 = group["betas"]
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                state = self.state[parameter]
                if not state:
                    state["m"] = torch.zeros_like(parameter)
                    state["v"] = torch.zeros_like(parameter)
                state["m"].mul_(beta_1).add_(parameter.grad, alpha=1 - beta_1)
                state["v"].mul_(beta_2).addcmul_(parameter.grad, parameter.grad, value=1 - beta_2)
                update = state["m"] / (state["v"].sqrt() + group["eps"])
                update.add_(parameter, alpha=group["weight_decay"])
                parameter.add_(update, alpha=-group["lr"])


def optimizer_for(model: torch.nn.Module, request: dict) -> torch.optim.Optimizer:
    """AdamW with weight decay off biases and LayerNorm, with or without bias correction."""
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if "bias" not in n and "LayerNorm" not in n],
               "weight_decay": 0.01},
              {"params": [p for n, p in named if "bias" in n or "LayerNorm" in n],
               "weight_decay": 0.0}]
    if request["bias_correction"]:
        return torch.optim.AdamW(groups, lr=request["learning_rate"], eps=1e-6)
    return AdamWithoutBiasCorrection(groups, lr=request["learning_rate"])


def batch_order(examples: int, epochs: float, batch: int, seed: int) -> list[list[int]]:
    """Whole batches of one stream of reshuffled passes: floor(examples x epochs / batch)."""
    updates = max(1, int(examples * epochs / batch))
    generator = torch.Generator().manual_seed(seed)
    stream: list[int] = []
    while len(stream) < updates * batch:
        stream.extend(torch.randperm(examples, generator=generator).tolist())
    return [stream[start:start + batch] for start in range(0, updates * batch, batch)]


def original_schedule(updates: int, warmup_proportion: float):
    """The rate's factor at each update: warmup, then decay measured from update 0 (BERT's)."""
    warmup = int(updates * warmup_proportion)

    def factor(step: int) -> float:
        return step / warmup if step < warmup else max(0.0, 1.0 - step / updates)
    return factor


def encode(tokenizer, texts: dict, rows: list[int], length: int) -> dict:
    first = [texts["a"][i] for i in rows]
    second = None if texts["b"] is None else [texts["b"][i] for i in rows]
    return tokenizer(first, second, max_length=length, truncation="longest_first",
                     padding="max_length", return_tensors="pt")


def train(model, tokenizer, request: dict) -> list[list[float]]:
    """Fine-tunes `model` in place; returns [update, loss] every 50 updates (and the last).

    A request's `batches` (rows of each update, in order) replace the shuffled
    stream, and every update's loss is returned: `experiments.glue_step_check`
    compares them with ours update by update.
    """
    data, regression = request["train"], request["labels"] is None
    batches = request.get("batches") or batch_order(
        len(data["a"]), request["epochs"], request["batch_size"], request["seed"])

    def loss_of(rows: list[int]):
        inputs = encode(tokenizer, data, rows, request["max_seq_length"])
        labels = torch.tensor([data["y"][i] for i in rows],
                              dtype=torch.float32 if regression else torch.long)
        return model(**inputs, labels=labels).loss

    return run_updates(model, request, batches, loss_of, every=1 if request.get("batches") else 50)


def run_updates(model, request: dict, batches: list[list[int]], loss_of,
                every: int = 50) -> list[list[float]]:
    """The recipe's updates over `batches` (`loss_of(rows)` gives each batch's loss): the
    request's optimizer, the original schedule, clipping at norm 1.0; [update, loss] every
    `every` updates and at the last, with a progress line."""
    optimizer = optimizer_for(model, request)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, original_schedule(len(batches), request["warmup_proportion"]))
    model.train()
    curve, started = [], time.monotonic()
    for update, rows in enumerate(batches, start=1):
        loss = loss_of(rows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if update % every == 0 or update == len(batches):
            elapsed = time.monotonic() - started
            curve.append([update, loss.item()])
            print(f"step {update}/{len(batches)}  "
                  f"{update * request['batch_size'] / elapsed:.1f} examples/s  loss={loss.item():.4f}"
                  f"  {elapsed * (len(batches) - update) / update:.0f} s left", flush=True)
    return curve


@torch.no_grad()
def outputs(model, tokenizer, texts: dict, length: int) -> list[list[float]]:
    model.eval()
    rows, result = list(range(len(texts["a"]))), []
    for start in range(0, len(rows), 64):
        logits = model(**encode(tokenizer, texts, rows[start:start + 64], length)).logits
        result.extend(logits.tolist())
    return result


def main() -> None:
    request_path, answer_path = sys.argv[1], sys.argv[2]
    with open(request_path, encoding="utf-8") as reader:
        request = json.load(reader)
    torch.manual_seed(request["seed"])
    tokenizer = transformers.BertTokenizerFast.from_pretrained(request["model_dir"])
    labels = request["labels"]
    dropout = {} if request.get("dropout") is None else {
        "hidden_dropout_prob": request["dropout"], "attention_probs_dropout_prob": request["dropout"]}
    model = transformers.BertForSequenceClassification.from_pretrained(
        request["model_dir"], num_labels=1 if labels is None else len(labels),
        problem_type="regression" if labels is None else "single_label_classification",
        **dropout)
    if request.get("classifier"):  # start from the same head as the model compared with
        with torch.no_grad():
            model.classifier.weight.copy_(torch.tensor(request["classifier"]["weight"]))
            model.classifier.bias.copy_(torch.tensor(request["classifier"]["bias"]))
    started = time.monotonic()
    curve = train(model, tokenizer, request)
    answer = {"train_loss": curve, "train_seconds": round(time.monotonic() - started, 1),
              "outputs": {name: outputs(model, tokenizer, texts, request["max_seq_length"])
                          for name, texts in request["predict"].items()}}
    if not all(math.isfinite(value) for value in (loss for _, loss in curve)):
        answer["diverged"] = True
    temporary = f"{answer_path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as writer:
        json.dump(answer, writer)
    os.replace(temporary, answer_path)


if __name__ == "__main__":
    main()
