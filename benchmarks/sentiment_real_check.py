"""Real check of run_classifier.py: the real MiniLM weights on real sentiment data, vs PyTorch.

Fine-tunes the real pre-trained MiniLM on the Rotten Tomatoes snippets in
the SST-2 layout (fixed 8000 / 2000 split, `data_prep.corpora.rotten_tomatoes`)
three times with the same hyperparameters (2 epochs, learning rate 5e-5,
batch 32, length 64, warmup 10%): ours from the MiniLM weights, ours from
random weights, and Hugging Face's PyTorch `BertForSequenceClassification`
from the same folder (`benchmarks/peers/hf_sentiment_finetune.py`, run in
the torch environment `.venv-ref`). Ours must land within 1 accuracy point
of PyTorch's, and random initialization clearly below both.

    make real-check
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from benchmarks import harness  # noqa: E402
from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.corpora.rotten_tomatoes import sst2_layout_dir  # noqa: E402

EPOCHS, RATE, BATCH, LENGTH, SEED = 2, 5e-5, 32, 64, 12345
TORCH_PYTHON = REPO / ".venv-ref" / "bin" / "python"


def ours(model_dir: Path, data_dir: Path, pretrained: bool) -> float:
    """Dev accuracy of our fine-tuning, in a folder removed afterwards."""
    with tempfile.TemporaryDirectory() as output:
        return finetune_ours(model_dir, data_dir, Path(output), pretrained)


def finetune_ours(model_dir: Path, data_dir: Path, output: Path, pretrained: bool = True,
                  export_saved_model: bool = False, epochs: float = EPOCHS) -> float:
    """Fine-tunes with `run_classifier.py` into `output` (kept); returns the dev accuracy."""
    command = [sys.executable, str(REPO / "run_classifier.py"), "--task_name=SST-2",
               f"--data_dir={data_dir}", f"--vocab_file={model_dir / 'vocab.txt'}",
               f"--bert_config_file={model_dir / 'config.json'}", f"--output_dir={output}",
               "--do_train", "--do_eval", f"--export_saved_model={export_saved_model}",
               f"--num_train_epochs={epochs}", f"--learning_rate={RATE}",
               f"--train_batch_size={BATCH}", f"--max_seq_length={LENGTH}",
               f"--random_seed={SEED}", "--eval_batch_size=64", "--log_every=100"]
    if pretrained:
        command.append(f"--init_checkpoint={model_dir}")
    subprocess.run(command, check=True)
    for line in (output / "eval_results.txt").read_text().splitlines():
        key, _, value = line.partition(" = ")
        if key == "eval_accuracy":
            return float(value)
    raise RuntimeError("run_classifier.py wrote no eval_accuracy")


def pytorch(model_dir: Path, data_dir: Path, save_dir: Path | None = None) -> float:
    """Dev accuracy of Hugging Face's fine-tuning; the model is saved in `save_dir` if given."""
    environment = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE")
    command = [str(TORCH_PYTHON), str(REPO / "benchmarks" / "peers" / "hf_sentiment_finetune.py"),
               str(model_dir), str(data_dir), str(EPOCHS), str(RATE), str(BATCH), str(LENGTH),
               str(SEED)]
    if save_dir is not None:
        command.append(str(save_dir))
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
    return json.loads(result.stdout.strip().splitlines()[-1])["dev_accuracy"]


def main() -> None:
    model_dir, data_dir = minilm_dir(), sst2_layout_dir()
    figures = {"ours, MiniLM weights": ours(model_dir, data_dir, pretrained=True),
               "Hugging Face PyTorch, MiniLM weights": pytorch(model_dir, data_dir),
               "ours, random initialization": ours(model_dir, data_dir, pretrained=False)}
    gap = 100 * (figures["ours, MiniLM weights"] - figures["Hugging Face PyTorch, MiniLM weights"])
    rows = [[name, f"{100 * accuracy:.1f}"] for name, accuracy in figures.items()]
    report = "\n".join([
        "# Real check: sentiment fine-tuning of the real MiniLM", "",
        __doc__.split("\n\n")[1].strip(), "",
        harness.markdown_table(["run", "dev accuracy (%)"], rows), "",
        f"Ours minus PyTorch: {gap:+.1f} points (target: within 1).", "",
        "## Machine", "", *(f"- {k}: {v}" for k, v in
                            harness.machine_info(["tensorflow", "keras"]).items())]) + "\n"
    harness.write_report("sentiment_real_check", report)


if __name__ == "__main__":
    main()
