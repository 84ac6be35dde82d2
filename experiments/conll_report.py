"""The CoNLL-2003 and Table 7 page, from `experiments.conll`'s summary of its runs.

    python -m experiments.conll_report --data_dir=../shared/data/conll2003
    python -m experiments.conll_report --report_only   # redraw from the committed .json

writes `paper_tasks_conll.json` (every run's scores and times, the recipe,
the data's checksums, the machine), `.md` and `.png` to `--output_dir`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from core import extras

with extras.needed("experiments"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

from core.atomic import write_atomically  # noqa: E402
from experiments import provenance  # noqa: E402
from experiments.conll import TABLE7_ROWS  # noqa: E402

STEM = "paper_tasks_conll"
# Table 7 (BERT-Base, dev F1), and the fine-tuned BERT-Base of the same table.
PAPER = {"fine_tune": 96.4, "embeddings": 91.0, "second_to_last": 95.6, "last": 94.9,
         "sum_last_four": 95.9, "concat_last_four": 96.1, "sum_all": 95.5}
NAMES = {"fine_tune": "Fine-tuning, ours (run_ner.py)", "pytorch": "Fine-tuning, Hugging Face "
         "PyTorch", "embeddings": "Embeddings", "second_to_last": "Second-to-last hidden",
         "last": "Last hidden", "sum_last_four": "Sum of last four hidden",
         "concat_last_four": "Concat last four hidden", "sum_all": "Sum of all 6 blocks"}


def f1s(summary: dict, row: str) -> list[float]:
    return [100 * run["eval_f1"] for run in sorted(
        (run for run in summary["runs"].values() if run["row"] == row), key=lambda r: r["seed"])]


def spread(values: list[float]) -> str:
    if not values:
        return "not run yet"
    if len(values) == 1:
        return f"{values[0]:.2f} (1 seed)"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} seeds)"


def selected(summary: dict, row: str) -> dict | None:
    """The run of `row` with the best validation F1: the one that predicts the test file."""
    runs = [run for run in summary["runs"].values() if run["row"] == row]
    return max(runs, key=lambda run: run["eval_f1"]) if runs else None


def fine_tuning_table(summary: dict) -> list[str]:
    lines = ["| fine-tuning | valid entity F1 per seed | mean ± std | selected on valid |",
             "|---|---|---|---|"]
    for row in ("fine_tune", "pytorch"):
        values, best = f1s(summary, row), selected(summary, row)
        seeds = ", ".join(f"{value:.2f}" for value in values) or "-"
        chosen = f"seed {best['seed']}: {100 * best['eval_f1']:.2f}" if best else "-"
        lines.append(f"| {NAMES[row]} | {seeds} | {spread(values)} | {chosen} |")
    ours, peer = f1s(summary, "fine_tune"), f1s(summary, "pytorch")
    if ours and peer:
        noise = max(statistics.stdev(v) if len(v) > 1 else 0.0 for v in (ours, peer))
        gap = statistics.mean(ours) - statistics.mean(peer)
        lines += ["", f"Ours minus PyTorch: {gap:+.2f} F1 (the larger seed standard deviation "
                      f"is {noise:.2f})."]
    return lines


def table7(summary: dict) -> list[str]:
    lines = ["| Table 7 row | ours, valid entity F1 | paper (BERT-Base), dev F1 |",
             "|---|---|---|", f"| Fine-tuning (above) | {spread(f1s(summary, 'fine_tune'))} | "
                              f"{PAPER['fine_tune']} |"]
    lines += [f"| {NAMES[row]} (feature-based) | {spread(f1s(summary, row))} | {PAPER[row]} |"
              for row in TABLE7_ROWS]
    return lines


def notes(recipe: dict) -> list[str]:
    """What the page's figures are, and where they differ from the paper's protocol and why."""
    return [
        "The real all-MiniLM-L6-v2 (uncased, L6/H384) fine-tuned on CoNLL-2003 `train.txt` "
        "(14,041 sentences) and scored on `valid.txt` (3,250 sentences) with the project's "
        "conlleval (seqeval's entity reading), by `run_ner.py` and by Hugging Face PyTorch "
        "`BertForTokenClassification` from the same folder "
        "(`experiments/peers/hf_ner_finetune.py`), with the same recipe and seeds: each "
        "word's label on its first sub-token, the original schedule (linear warmup, then "
        "linear decay counted from update 0), the same optimizer, batch order (reshuffled "
        "passes cut into whole batches) and loss. Every figure is entity F1 in percent.",
        "",
        "Reduced from the paper's protocol (batch 32, 3-4 epochs, rate chosen on dev from "
        "{5e-5, 4e-5, 3e-5, 2e-5}) because the machine is 2 CPU cores shared with other "
        f"work, where one epoch of fine-tuning takes about an hour: {recipe['num_train_epochs']:g} "
        f"epoch(s), one rate ({recipe['learning_rate']:g}, the sweep's largest, as fits a "
        f"short run; not chosen on dev), windows of {recipe['max_seq_length']} sub-tokens (99% "
        "of the sentences fit in 62; the 38 training and 25 validation sentences that do not "
        "are read by run_ner.py in overlapping windows). The Hugging Face side truncates "
        "those 38 training sentences, as its token-classification examples do, and reads "
        "every validation sentence whole.",
        "",
        "The shared copy of the data has no `-DOCSTART-` lines, so the paper's \"maximal "
        "document context\" (`--document_context`) cannot be used here: the whole file would "
        "be one document. The feature-based rows (Table 7) train the paper's two-layer BiLSTM "
        f"at {recipe['lstm_units']} units per direction (the paper's 768 units sit on a "
        "768-wide BERT-Base; MiniLM is 384 wide, and a 384-unit BiLSTM is again too slow "
        "here) on the frozen encoder's activations, Adam at "
        f"{recipe['feature_learning_rate']:g} for {recipe['feature_epochs']} epoch(s); MiniLM "
        "has 6 blocks, so \"all layers\" is 6, not 12, and the sums are unweighted "
        "(`modeling/feature_tagger.py`).",
        "",
        "The test split is held out of this machine's data on purpose. The fine-tuned run "
        "selected on valid.txt keeps its model; whoever holds `test.txt` (or `eng.testb`) "
        "writes its CoNLL-format predictions and test F1 with `python run_ner.py "
        "--do_predict --data_dir=<folder with train.txt and test.txt> --init_checkpoint=<the "
        "selected run's output folder> --output_dir=<new folder> --max_seq_length="
        f"{recipe['max_seq_length']}` (`test_predictions.txt`: TOKEN GOLD PRED lines).",
    ]


def markdown(summary: dict) -> str:
    recipe = summary["recipe"]
    seconds = {f"{NAMES[run['row']]}, seed {run['seed']}": (run["wall_seconds"],
                                                            run["cpu_seconds"])
               for _, run in sorted(summary["runs"].items())}
    lines = ["# CoNLL-2003 and Table 7", "", *notes(recipe), "",
             f"Recipe: batch {recipe['train_batch_size']}, learning rate "
             f"{recipe['learning_rate']:g}, {recipe['num_train_epochs']:g} epoch(s), warmup "
             f"{recipe['warmup_proportion']:g}, {recipe['max_seq_length']} sub-tokens per window, "
             f"Adam bias correction {str(recipe['adam_bias_correction']).lower()}; feature-based: "
             f"BiLSTM 2 x {recipe['lstm_units']} units per direction, Adam "
             f"{recipe['feature_learning_rate']:g}, {recipe['feature_epochs']} epoch(s).", "",
             *fine_tuning_table(summary), "", *table7(summary), "", f"![{STEM}]({STEM}.png)", ""]
    lines += provenance.provenance_lines(summary["command"], seconds, summary["data"].items(),
                                         summary["machine"])
    return "\n".join(lines) + "\n"


def plot(summary: dict):
    rows = ["fine_tune", "pytorch", *TABLE7_ROWS]
    figure, axes = plt.subplots(figsize=(10, 4.5))
    for index, row in enumerate(rows):
        values = f1s(summary, row)
        if values:
            deviation = statistics.stdev(values) if len(values) > 1 else 0.0
            axes.bar(index, statistics.mean(values), yerr=deviation, capsize=4,
                     color="tab:orange" if row == "pytorch" else "tab:blue")
            axes.text(index, statistics.mean(values) / 2, f"{statistics.mean(values):.1f}",
                      ha="center", color="white", fontsize=8)
        axes.scatter([index], [PAPER.get(row, PAPER["fine_tune"])], color="red", marker="D",
                     zorder=3, label="paper (BERT-Base)" if index == 0 else None)
    axes.set_xticks(range(len(rows)), [NAMES[row].replace(", ", "\n", 1) for row in rows],
                    rotation=30, ha="right", fontsize=8)
    axes.set(ylim=(0, 100), ylabel="valid entity F1 (%)",
             title="CoNLL-2003: MiniLM fine-tuned (ours, PyTorch) and feature-based (Table 7)")
    axes.legend(loc="lower right")
    figure.tight_layout()
    return figure


def render(summary: dict, output_dir: Path) -> None:
    figure = plot(summary)
    staging = output_dir / f".{STEM}.png.tmp.png"
    figure.savefig(staging, dpi=110)
    plt.close(figure)
    staging.replace(output_dir / f"{STEM}.png")
    write_atomically(output_dir / f"{STEM}.md", markdown(summary))


def collect(cache_dir: Path, data_dir: str, command: str) -> dict:
    summary = json.loads((cache_dir / "summary.json").read_text(encoding="utf-8"))
    for run in summary["runs"].values():
        run.pop("folder", None)  # this machine's paths stay out of the page
        run.pop("train_loss", None)
    summary.update(command=command, machine=provenance.machine(),
                   data={f"conll2003/{name}": provenance.sha256(os.path.join(data_dir, name))
                         for name in ("train.txt", "valid.txt")})
    return summary


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.conll_report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", help="The CoNLL-2003 folder the runs read.")
    parser.add_argument("--cache_dir", default=os.path.join(
        os.environ.get("BERT_CACHE_DIR", os.path.expanduser("~/.cache/bert_tf2")),
        "experiments", "conll"))
    parser.add_argument("--output_dir", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--command", default="python -m experiments.conll "
                                              "--data_dir=$CONLL_DIR", help="What made the runs.")
    parser.add_argument("--report_only", action="store_true",
                        help="Redraw from the committed paper_tasks_conll.json.")
    arguments = parser.parse_args(argv)
    output = Path(arguments.output_dir)
    if arguments.report_only:
        summary = json.loads((output / f"{STEM}.json").read_text(encoding="utf-8"))
    else:
        if not arguments.data_dir:
            parser.error("--data_dir is required unless --report_only")
        summary = collect(Path(arguments.cache_dir), arguments.data_dir, arguments.command)
        write_atomically(output / f"{STEM}.json", json.dumps(summary, indent=1) + "\n")
    render(summary, output)


if __name__ == "__main__":
    main(sys.argv[1:])
