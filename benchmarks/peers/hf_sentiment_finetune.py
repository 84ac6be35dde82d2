"""Hugging Face PyTorch fine-tune of a BERT folder on SST-2-layout data: the reference figure.

Run by `benchmarks/sentiment_real_check.py` in the torch environment with
the same split and hyperparameters as our run: AdamW (weight decay 0.01 off
biases and LayerNorm), linear warmup over the first 10% of steps then linear
decay, dropout 0.1, [CLS]-pooled classifier. Prints one JSON line with the
dev accuracy. With SAVE_DIR, the fine-tuned model and its tokenizer are saved
there (`save_pretrained`), for `benchmarks/serving_speed.py` to serve.

    python hf_sentiment_finetune.py MODEL_DIR DATA_DIR EPOCHS LR BATCH LENGTH SEED [SAVE_DIR]
"""

from __future__ import annotations

import json
import sys

import torch
import transformers


def read(path: str) -> tuple[list[str], list[int]]:
    with open(path, encoding="utf-8") as reader:
        rows = [line.rstrip("\n").split("\t") for line in reader][1:]
    return [row[0] for row in rows], [int(row[1]) for row in rows]


def main() -> None:
    model_dir, data_dir = sys.argv[1], sys.argv[2]
    epochs, rate, batch, length, seed = (int(sys.argv[3]), float(sys.argv[4]),
                                         int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
    torch.manual_seed(seed)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    model = transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    texts, labels = read(f"{data_dir}/train.tsv")
    dev_texts, dev_labels = read(f"{data_dir}/dev.tsv")

    def encode(batch_texts):
        return tokenizer(batch_texts, max_length=length, truncation=True, padding="max_length",
                         return_tensors="pt")

    decay = [p for n, p in model.named_parameters() if "bias" not in n and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=rate, eps=1e-6)
    steps = len(texts) // batch * epochs
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    model.train()
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(texts), generator=generator).tolist()
        for start in range(0, len(order) - batch + 1, batch):
            chosen = order[start:start + batch]
            inputs = encode([texts[i] for i in chosen])
            loss = model(**inputs, labels=torch.tensor([labels[i] for i in chosen])).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(dev_texts), 64):
            logits = model(**encode(dev_texts[start:start + 64])).logits
            correct += (logits.argmax(-1) == torch.tensor(dev_labels[start:start + 64])).sum()
    if len(sys.argv) > 8:
        model.save_pretrained(sys.argv[8])
        tokenizer.save_pretrained(sys.argv[8])
    print(json.dumps({"dev_accuracy": float(correct) / len(dev_texts), "steps": steps}))


if __name__ == "__main__":
    main()
