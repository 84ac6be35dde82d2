"""`paper_tasks.md` and `paper_tasks.png` from the summary `experiments.paper_tasks_report` keeps.

Only the GLUE part of the markdown is drawn here, between two markers; the
rest of the file (the CoNLL-2003 and Table 7 section, the Table 5 section)
is kept as it is, so that those results can be written by their own tools
into the same file.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from core import extras
from core.atomic import atomic_path, write_atomically

with extras.needed("experiments"):
    from matplotlib.figure import Figure

BEGIN, END = "<!-- glue rows: drawn by experiments.paper_tasks_report -->", "<!-- end of glue rows -->"
OTHER_SECTIONS = """
## CoNLL-2003 and Table 7

(To be filled: `run_ner.py` on CoNLL-2003 beside PyTorch, and the feature-based rows.)

## Table 5 on real tasks

(To be filled: the pre-training ablations fine-tuned on MRPC, RTE and SST-2.)
"""
# The paper's metric(s) per task, the first drawn in the plot (Table 1 reports MRPC's F1 and
# STS-B's Spearman), with the names eval_results.txt gives them.
METRICS = {"CoLA": ("matthews_correlation",), "SST-2": ("accuracy",),
           "MRPC": ("f1", "accuracy"), "STS-B": ("spearmanr", "pearson"),
           "RTE": ("accuracy",), "WNLI": ("accuracy",)}
SHOWN = {"matthews_correlation": "Matthews corr.", "accuracy": "accuracy", "f1": "F1",
         "spearmanr": "Spearman", "pearson": "Pearson"}
# BERT-BASE on the GLUE test server (the paper's Table 1), for scale only: a 110M-parameter
# model on the test sets, where these rows are the 22M-parameter MiniLM on dev.
LEGEND = {"ours": "run_classifier.py", "pytorch": "Hugging Face PyTorch"}
PAPER_BASE = {"CoLA": "52.1", "SST-2": "93.5", "MRPC": "88.9 (F1)", "STS-B": "85.8 (Spearman)",
              "RTE": "66.4", "WNLI": "excluded (see notes)"}


def cell_name(cell: dict) -> str:
    optimizer = "bias-corrected Adam" if cell["bias_correction"] else "original optimizer"
    return f"{cell['task']}, {optimizer}"


def seed_scores(side: dict | None, metric: str) -> list[float]:
    """A side's finished seeds' `metric`, in percent."""
    if not side:
        return []
    return [100 * run["scores"][metric] for run in side["runs"]
            if run["status"] == "finished" and metric in run["scores"]]


def mean_std(values: list[float]) -> str:
    if not values:
        return "waiting"
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return f"{statistics.mean(values):.1f} ± {spread:.1f}" + (
        f" ({len(values)} seeds)" if len(values) != 3 else "")


def selected(side: dict | None, metrics: tuple[str, ...]) -> str:
    """The dev-selected restart's metrics, and a mark when it is degenerate."""
    chosen = [run for run in (side or {}).get("runs", []) if run["chosen"]]
    if not side or not side["done"] or not chosen:
        return "waiting"
    run = chosen[0]
    text = " / ".join(f"{100 * run['scores'][m]:.1f}" for m in metrics)
    return f"{text} (seed {side['seed'] + run['restart']})" + (" ⚠" if run["warning"] else "")


def gap(cell: dict, metric: str) -> str:
    """Ours minus PyTorch on the mean, against twice the standard error of that difference."""
    ours, peer = seed_scores(cell.get("ours"), metric), seed_scores(cell.get("pytorch"), metric)
    if len(ours) < 2 or len(peer) < 2:
        return "waiting"
    difference = statistics.mean(ours) - statistics.mean(peer)
    noise = 2 * math.sqrt(statistics.variance(ours) / len(ours)
                          + statistics.variance(peer) / len(peer))
    verdict = "within noise" if abs(difference) <= noise else "**beyond noise**"
    return f"{difference:+.1f} (2 s.e. {noise:.1f}, {verdict})"


def main_table(summary: dict) -> list[str]:
    header = ("| task, optimizer | metric | rate (ours, dev) | ours: mean ± s.d. | "
              "ours: dev-selected | PyTorch: mean ± s.d. | PyTorch: dev-selected | "
              "ours − PyTorch | majority class | paper, BERT-BASE test |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for cell in summary["cells"]:
        metrics = METRICS[cell["task"]]
        majority = (cell.get("ours") or {}).get("majority") or cell["sweep"].get("majority")
        rate = ("sweeping" if "rate" not in cell else f"{cell['rate']:g}, fixed"
                if summary.get("fixed_rate") else f"{cell['rate']:g}")
        lines.append("| " + " | ".join([
            cell_name(cell), " / ".join(SHOWN[m] for m in metrics), rate,
            " / ".join(mean_std(seed_scores(cell.get("ours"), m)) for m in metrics),
            selected(cell.get("ours"), metrics),
            " / ".join(mean_std(seed_scores(cell.get("pytorch"), m)) for m in metrics),
            selected(cell.get("pytorch"), metrics), gap(cell, metrics[0]),
            "n/a" if majority is None else f"{100 * majority:.1f} (accuracy)",
            PAPER_BASE[cell["task"]]]) + " |")
    return lines


def cell_details(cell: dict) -> list[str]:
    """A cell's sweep and seeds, one line each, with their commands and times."""
    metrics = METRICS[cell["task"]]
    lines = [f"### {cell_name(cell)}", ""]
    if cell["train_subset"]:
        lines.append(f"Reduced for compute: {cell['train_subset']:,} training sentences sampled "
                     "with seed 12345 (`paper_tasks.subset_folder`); every other setting kept.")
    if cell["max_seq_length"] != 128:
        lines.append(f"`--max_seq_length={cell['max_seq_length']}`: no dev or test example is "
                     "longer, so the model's outputs are those at 128 with less padding "
                     "(truncated training examples are counted below).")
    for label, side in (("sweep (ours, seed 12345)", cell["sweep"]), ("ours", cell.get("ours")),
                        ("PyTorch", cell.get("pytorch"))):
        if side is None:
            continue
        lines += ["", f"**{label}**: `{side['command']}`", ""]
        for run in side["runs"]:
            scores = ", ".join(f"{SHOWN[m]} {100 * run['scores'][m]:.2f}" for m in metrics
                               if m in run["scores"])
            lines.append(f"- lr {run['learning_rate']:g}, seed {side['seed'] + run['restart']}: "
                         f"{scores or run['status']}{' (chosen)' if run['chosen'] else ''}"
                         f"{'; ' + run['warning'] if run['warning'] else ''}")
        if side["done"]:
            lines.append(f"- wall {side['seconds'] / 3600:.2f} h, CPU "
                         f"{(side['cpu_seconds'] or math.nan) / 3600:.2f} h"
                         + (" (the last attempt's: resumed after an interruption)"
                            if side.get("resumed") else "")
                         + "".join(f"; {name}: {count:,} examples, {cut} truncated"
                                   for name, (count, cut) in side.get("examples", {}).items()))
        else:
            lines.append("- not finished yet")
    files = ", ".join(f"`{cell['task']}/{name}` {digest}" for name, digest in cell["data"].items())
    return lines + ["", f"Data (sha256): {files}", ""]


NOTES = """\
- Protocol (the paper's Section 4.1 and Appendix A.3): batch 32, 3 epochs, length 128, AdamW
  (weight decay 0.01, epsilon 1e-6), linear warmup over 10% of the updates and the original's
  linear decay, gradients clipped at norm 1.0, dropout 0.1. The rate is chosen on dev by one
  `run_classifier.py` sweep over {5e-5, 4e-5, 3e-5, 2e-5} with seed 12345; the mean and spread
  are over three fresh seeds (12346-12348) at that rate, so that the sweep's winning run, chosen
  for its dev score, is not among them. PyTorch (`BertForSequenceClassification` from the same
  folder, `experiments.glue_peer`) takes the same rate and seeds, the same examples (read by
  the project's reader) and the same metrics; its optimizer and schedule are written to match
  (`experiments/peers/hf_glue_finetune.py`).
- Dev-selected: of the three seeds, the one with the best dev score (`sweep_results.tsv`'s
  chosen run), as the paper selects restarts; its test predictions are the `--do_predict`
  submission. ⚠ marks a run the runner flagged as degenerate (within a point of the majority
  class, or 3 points below its sweep's best).
- ours − PyTorch compares the means of the first metric; "beyond noise" when the difference
  exceeds twice its standard error over the seeds (3 each, so a rough test). Seeds cannot show
  a small defect; [`glue_step_check.md`](glue_step_check.md) can: from the same start, with
  dropout off, both implementations give the same loss at every update and the same dev logits
  (`python -m experiments.glue_step_check`).
- Metrics are the paper's (Table 1 reports MRPC's F1 and STS-B's Spearman) under the names of
  `eval_results.txt`. The paper's BERT-BASE figures are test-server scores of a model five times
  larger, shown for scale only.
- WNLI: the paper excludes it from its GLUE average (Appendix B.1): the GLUE site notes problems
  in its construction (its dev set reuses training sentences with the opposite label), and every
  system submitted then scored below the 65.1 test accuracy of the majority class, which is what
  BERT submitted (`run_classifier.py --wnli_majority_class`). Compare its row with the majority
  class column.
"""


def times(summary: dict) -> list[str]:
    """Wall and CPU time per side, and training examples per CPU-second of the seeds' jobs."""
    lines = ["| task, optimizer | ours: wall / CPU h (seeds) | ours: examples / CPU s | "
             "PyTorch: wall / CPU h | PyTorch: examples / CPU s | sweep: wall / CPU h |",
             "|---|---|---|---|---|---|"]
    for cell in summary["cells"]:
        ours, peer, sweep = cell.get("ours") or {}, cell.get("pytorch") or {}, cell["sweep"]
        trained = (ours.get("examples") or sweep.get("examples") or {}).get("train", [0])[0] * 9
        lines.append("| " + " | ".join([cell_name(cell), *_time(ours, trained),
                                        *_time(peer, trained), _time(sweep, 0)[0]]) + " |")
    return lines


def _time(side: dict, trained: int) -> tuple[str, str]:
    """'wall / CPU' hours and examples per CPU-second (3 runs x 3 epochs of `trained` / 9)."""
    if not side.get("done") or not side.get("cpu_seconds"):
        return "waiting", "waiting"
    hours = f"{side['seconds'] / 3600:.2f} / {side['cpu_seconds'] / 3600:.2f}"
    rate = f"{trained / side['cpu_seconds']:.1f}" if trained else "n/a"
    if side.get("resumed"):  # the last attempt's time only, so bounds on the whole job's
        return f"at least {hours} (resumed)", f"at most {rate}" if trained else rate
    return hours, rate


def reduction(summary: dict) -> list[str]:
    """What these runs leave out of the protocol below, said before it."""
    if summary.get("fixed_rate") is None:
        return []
    return [f"**Reduced for this machine's budget:** no sweep; every seed ran at "
            f"{summary['fixed_rate']:g}, the rate fixed before any run, so the rate below was "
            "not chosen on dev. Tasks without results were not run.", ""]


def markdown(summary: dict, plot_name: str) -> str:
    machine = summary["machine"]
    lines = [BEGIN, "", "## GLUE dev, all-MiniLM-L6-v2, `run_classifier.py` beside Hugging Face "
             "PyTorch", "", *main_table(summary), "", f"![GLUE rows]({plot_name})", "",
             *reduction(summary), NOTES, "## Time", "", "CPU time is user + system of each job and the processes it "
             "waited for; the machine was shared with other work, at the lowest priority, one "
             "core per run, so wall time says little. Examples per CPU-second count the "
             "training examples of the three seeds' runs (3 epochs each) over the whole job "
             "(start-up, compilation, evaluation and test predictions included).", "",
             *times(summary), "", "## Each cell's runs", ""]
    for cell in summary["cells"]:
        lines += cell_details(cell)
    lines += ["## Machine", "", *(f"- {key}: {value}" for key, value in machine.items()), "", END]
    return "\n".join(lines) + "\n"


def plot(summary: dict) -> Figure:
    """Ours and PyTorch per cell: mean ± s.d. over seeds, each seed a dot, the majority class."""
    figure = Figure(figsize=(11, 4.6))
    axis = figure.subplots()
    names, labelled = [], set()
    for index, cell in enumerate(summary["cells"]):
        metric = METRICS[cell["task"]][0]
        names.append(f"{cell_name(cell)}\n{SHOWN[metric]}")
        for offset, side, color in ((-0.17, "ours", "tab:blue"), (0.17, "pytorch", "tab:orange")):
            values = seed_scores(cell.get(side), metric)
            if not values:
                continue
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            axis.bar(index + offset, statistics.mean(values), 0.32, yerr=spread, capsize=3,
                     color=color, alpha=0.6, label=_once(labelled, LEGEND[side]))
            axis.plot([index + offset] * len(values), values, "k.", markersize=4)
        majority = (cell.get("ours") or {}).get("majority")
        if majority is not None and metric == "accuracy":
            axis.hlines(100 * majority, index - 0.4, index + 0.4, colors="tab:red",
                        linestyles="dashed", label=_once(labelled, "majority class"))
    axis.set_xticks(range(len(names)), names, fontsize=7, rotation=20, ha="right")
    axis.set_ylim(0, 100)
    axis.set_ylabel("dev score (%)")
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=8, loc="lower left")
    axis.set_title("GLUE dev, all-MiniLM-L6-v2: mean ± s.d. over 3 seeds at the rate chosen on "
                   "dev (dots: seeds); y axis from 0", fontsize=10)
    return figure


def _once(labelled: set[str], label: str) -> str | None:
    """`label` the first time it is asked for, then None: one legend entry per kind."""
    if label in labelled:
        return None
    labelled.add(label)
    return label


def render(summary: dict, output: Path, stem: str) -> list[Path]:
    """Writes `<stem>.png` and the GLUE part of `<stem>.md`; returns both paths."""
    output.mkdir(parents=True, exist_ok=True)
    png, page = output / f"{stem}.png", output / f"{stem}.md"
    figure = plot(summary)
    figure.tight_layout()
    with atomic_path(png) as temporary:
        figure.savefig(temporary, format="png", dpi=100)
    drawn = markdown(summary, png.name)
    if page.is_file() and BEGIN in (text := page.read_text(encoding="utf-8")):
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1] if END in rest else ""
        content = before + drawn.rstrip("\n") + after
    else:
        content = ("# The paper's tasks on the paper's data\n\n" + drawn + OTHER_SECTIONS)
    write_atomically(page, content)
    return [page, png]
