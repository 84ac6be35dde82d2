"""How often few-sample fine-tuning degenerates: the original AdamW against Adam's bias correction.

Fine-tunes the real pre-trained MiniLM on Pang & Lee's sentence polarity
data (fixed 3,000 / 1,000 split in the SST-2 layout,
`data_prep.corpora.pang_lee_polarity`; 2 epochs, learning rate 5e-5, batch
32, length 64, warmup 10%) with `run_classifier.py`, once per seed in each of
four configurations: the original optimizer (no bias correction) or
`--adam_bias_correction`, each on the default training path and with
`--jit_compile=false`. The runs go seed-major (the first seed of every
configuration, then the second...), so a partial measurement stays
balanced. Each finished run is kept in `degenerate_finetuning.json` beside
the report, and a rerun skips it; the report and its plot are rewritten
after every run.

    nice -n 15 python benchmarks/degenerate_finetuning.py --seeds=1,2,3,4,5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import harness  # noqa: E402
from core import atomic, extras  # noqa: E402
from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.corpora.pang_lee_polarity import sst2_layout_dir  # noqa: E402

NAME = "degenerate_finetuning"
EPOCHS, RATE, BATCH, LENGTH = 2, 5e-5, 32, 64
CONFIGURATIONS = {
    "original AdamW, default path": [],
    "bias-corrected AdamW, default path": ["--adam_bias_correction"],
    "original AdamW, --jit_compile=false": ["--jit_compile=false"],
    "bias-corrected AdamW, --jit_compile=false": ["--adam_bias_correction",
                                                  "--jit_compile=false"],
}


def fine_tune(model_dir: Path, data_dir: Path, seed: int, extra: list[str]) -> dict:
    """One `run_classifier.py` run: its dev accuracy (%) and wall-clock minutes."""
    with tempfile.TemporaryDirectory() as output:
        command = [sys.executable, str(REPO / "run_classifier.py"), "--task_name=SST-2",
                   f"--data_dir={data_dir}", f"--vocab_file={model_dir / 'vocab.txt'}",
                   f"--bert_config_file={model_dir / 'config.json'}",
                   f"--init_checkpoint={model_dir}", f"--output_dir={output}",
                   "--do_train", "--do_eval", "--export_saved_model=false",
                   f"--num_train_epochs={EPOCHS}", f"--learning_rate={RATE}",
                   f"--train_batch_size={BATCH}", f"--max_seq_length={LENGTH}",
                   f"--random_seed={seed}", "--eval_batch_size=64", "--log_every=100", *extra]
        start = time.monotonic()
        subprocess.run(command, check=True, cwd=REPO)
        minutes = (time.monotonic() - start) / 60
        for line in (Path(output) / "eval_results.txt").read_text().splitlines():
            key, _, value = line.partition(" = ")
            if key == "eval_accuracy":
                return {"dev_accuracy": round(100 * float(value), 2), "minutes": round(minutes, 2)}
    raise RuntimeError("run_classifier.py wrote no eval_accuracy")


def load_runs(path: Path) -> dict[str, dict]:
    return json.loads(path.read_text()) if path.is_file() else {}


def save_runs(runs: dict[str, dict], path: Path) -> None:
    atomic.write_atomically(path, json.dumps(runs, indent=1, sort_keys=True) + "\n")


def run_key(configuration: str, seed: int) -> str:
    return f"{configuration} | seed {seed}"


def accuracies(runs: dict[str, dict], configuration: str, seeds: list[int]) -> dict[int, float]:
    """Seed -> dev accuracy (%) of the configuration's finished runs."""
    return {seed: runs[run_key(configuration, seed)]["dev_accuracy"] for seed in seeds
            if run_key(configuration, seed) in runs}


def summary_rows(runs: dict[str, dict], seeds: list[int]) -> list[list[str]]:
    """Per configuration: runs, mean, std, min-max and the worst seed."""
    rows = []
    for configuration in CONFIGURATIONS:
        done = accuracies(runs, configuration, seeds)
        if not done:
            rows.append([configuration, "0", "", "", "", ""])
            continue
        scores = list(done.values())
        worst = min(done, key=done.get)
        spread = f"{statistics.stdev(scores):.1f}" if len(scores) > 1 else "n/a"
        rows.append([configuration, str(len(scores)), f"{statistics.mean(scores):.1f}", spread,
                     f"{min(scores):.1f} - {max(scores):.1f}", f"{worst} ({done[worst]:.1f})"])
    return rows


def plot(runs: dict[str, dict], seeds: list[int], path: Path) -> None:
    """One point per seed and configuration, with the mean +- std beside each column."""
    with extras.needed("benchmarks"):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for position, configuration in enumerate(CONFIGURATIONS):
        scores = list(accuracies(runs, configuration, seeds).values())
        axes.scatter([position] * len(scores), scores, color="tab:blue", alpha=0.7, zorder=3)
        if len(scores) > 1:
            axes.errorbar(position + 0.15, statistics.mean(scores), statistics.stdev(scores),
                          fmt="o", color="tab:red", capsize=4, zorder=3)
    axes.set_xticks(range(len(CONFIGURATIONS)))
    axes.set_xticklabels([name.replace(", ", "\n") for name in CONFIGURATIONS], fontsize=8)
    axes.set_ylabel("dev accuracy (%)")
    axes.set_title("MiniLM on Pang & Lee polarity (3000 train): seeds (blue), mean +- std (red)",
                   fontsize=9)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def report(runs: dict[str, dict], seeds: list[int], majority: float) -> str:
    finished = sum(run_key(c, s) in runs for c in CONFIGURATIONS for s in seeds)
    per_run = [[configuration, str(seed), f"{runs[key]['dev_accuracy']:.1f}",
                f"{runs[key]['minutes']:.1f}"]
               for seed in seeds for configuration in CONFIGURATIONS
               if (key := run_key(configuration, seed)) in runs]
    return "\n".join([
        "# Degenerate few-sample fine-tuning: original vs bias-corrected AdamW", "",
        __doc__.split("\n\n")[1].strip(), "",
        f"Runs finished: {finished} of {len(CONFIGURATIONS) * len(seeds)} "
        f"(seeds {', '.join(map(str, seeds))}). Majority class of dev: {majority:.1f}%. "
        "A run took the minutes listed below on a machine shared with other work (not a "
        "speed measurement).", "",
        harness.markdown_table(["configuration", "runs", "mean", "std", "min - max",
                                "worst seed"], summary_rows(runs, seeds)), "",
        f"![dev accuracy per seed]({NAME}.png)", "",
        "## Every run", "",
        harness.markdown_table(["configuration", "seed", "dev accuracy (%)", "minutes"],
                               per_run), "",
        "## Command", "", "    " + __doc__.strip().splitlines()[-1].strip(), "",
        "## Machine", "", *(f"- {k}: {v}" for k, v in
                            harness.machine_info(["tensorflow", "keras"]).items())]) + "\n"


def majority_accuracy(data_dir: Path) -> float:
    labels = [line.rsplit("\t", 1)[-1] for line in
              (data_dir / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    return 100 * max(labels.count(label) for label in set(labels)) / len(labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated random seeds")
    parser.add_argument("--report_only", action="store_true",
                        help="rewrite the report from the kept runs, train nothing")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    runs_path = harness.RESULTS_DIR / f"{NAME}.json"
    model_dir, data_dir = minilm_dir(), sst2_layout_dir()
    majority = majority_accuracy(data_dir)
    runs = load_runs(runs_path)
    for seed in seeds:
        for configuration, extra in CONFIGURATIONS.items():
            key = run_key(configuration, seed)
            if key in runs or args.report_only:
                continue
            runs[key] = fine_tune(model_dir, data_dir, seed, extra)
            print(f"{key}: {runs[key]}", flush=True)
            save_runs(runs, runs_path)
            plot(runs, seeds, harness.RESULTS_DIR / f"{NAME}.png")
            harness.write_report(NAME, report(runs, seeds, majority))
    plot(runs, seeds, harness.RESULTS_DIR / f"{NAME}.png")
    harness.write_report(NAME, report(runs, seeds, majority))


if __name__ == "__main__":
    main()
