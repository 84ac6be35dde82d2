"""A finished grid as a markdown table (ours beside the paper's) and PNG plots.

Plots are drawn with matplotlib's non-interactive Agg backend, so a report
is written the same on a machine without a display.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping

# Figures are drawn without pyplot, so no display backend or global figure state is involved.
from matplotlib.figure import Figure

from core.atomic import atomic_path, write_atomically
from experiments.grid import Score, Table
from experiments.jobs import Job, Output


def format_score(score: Score | None) -> str:
    if score is None:
        return "n/a"
    if math.isnan(score.mean):
        return f"- ({score.detail})"
    if score.count > 1 and not math.isnan(score.std):
        return f"{score.mean:.1f} ± {score.std:.1f}"
    return f"{score.mean:.2f}"


def scores(table: Table, results: Mapping[str, dict]) -> list[dict[str, Score | None]]:
    """Per row, each column's score (None where not applicable)."""
    return [{column: (row.cells[column].score(results) if row.cells.get(column) else None)
             for column in table.columns} for row in table.rows]


def markdown(table: Table, results: Mapping[str, dict], scale: str, seeds: int,
             command: str, plots: list[str]) -> str:
    """The report: title, command, the table with the paper's numbers beside ours, notes."""
    header = ["variant"]
    for column in table.columns:
        header.append(f"{column} (ours)")
        if column in table.paper_columns:
            header.append(f"paper: {table.paper_columns[column]}")
    lines = [f"# {heading(table)}: {table.title} ({scale} scale)", "",
             "Produced by:", "", "```bash", command, "```", "",
             f"Mean ± standard deviation over {seeds} seed(s) in percent (perplexity as is); "
             "`lr` is the fine-tuning rate chosen (sentiment and GLUE: best mean dev score; "
             "tagging: best mean validation F1, test F1 reported).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row, row_scores in zip(table.rows, scores(table, results)):
        cells = [row.name]
        for column in table.columns:
            score = row_scores[column]
            text = format_score(score)
            if score is not None and score.detail.startswith("lr "):
                text += f" ({score.detail})"
            cells.append(text)
            if column in table.paper_columns:
                paper = row.paper.get(column)
                cells.append("-" if paper is None else f"{paper:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Notes:", ""] + [f"- {note}" for note in table.notes]
    if plots:
        lines += [""] + [f"![{Path(plot).stem}]({Path(plot).name})" for plot in plots]
    return "\n".join(lines) + "\n"


def plot(table: Table, results: Mapping[str, dict], path: Path) -> None:
    """The figure's curves (score against steps per objective), or one bar chart per column."""
    row_scores = scores(table, results)
    columns = table.columns
    figure = Figure(figsize=(4.2 * len(columns), 3.4))
    axes = figure.subplots(1, len(columns), squeeze=False)
    for axis, column in zip(axes[0], columns):
        if table.figure:
            for series in dict.fromkeys(row.series for row in table.rows):
                points = [(row.step, score[column].mean) for row, score in
                          zip(table.rows, row_scores) if row.series == series and score[column]]
                if points:
                    axis.plot(*zip(*points), marker="o", label=series)
            axis.set_xlabel(table.x_label)
            axis.legend()
        else:
            names, means, spreads = [], [], []
            for row, score in zip(table.rows, row_scores):
                if score[column] is not None and not math.isnan(score[column].mean):
                    names.append(row.name)
                    means.append(score[column].mean)
                    spreads.append(0.0 if math.isnan(score[column].std) else score[column].std)
            axis.bar(range(len(names)), means, yerr=spreads, capsize=3)
            axis.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        axis.set_title(column)
    _save(figure, path)


def whole_curve(job: Job, results: Mapping[str, dict]) -> list[list[float]]:
    """[step, loss] over every phase: a run started from another run's output folder
    continues that run's curve, its steps counted on from where that one stopped."""
    source = job.inputs.get("init_checkpoint")
    earlier, offset = [], 0
    if isinstance(source, Output) and not source.path and source.job.tool == job.tool:
        earlier = whole_curve(source.job, results)
        offset = int(source.job.settings["num_train_steps"])
    own = results[job.key].get("train_loss", [])
    return earlier + [[step + offset, loss] for step, loss in own]


def plot_pretraining(table: Table, results: Mapping[str, dict], path: Path) -> bool:
    """Training loss against steps, one line per pre-training; False when no run logged any."""
    curves = {}
    for row in table.rows:
        job = row.pretraining
        if job is not None and job.key not in curves and results[job.key].get("train_loss"):
            curves[job.key] = (row.series or row.name, whole_curve(job, results))
    if not curves:
        return False
    figure = Figure(figsize=(6, 3.8))
    axis = figure.subplots()
    for label, curve in curves.values():
        axis.plot(*zip(*curve), label=label)
    axis.set_xlabel("pre-training steps")
    axis.set_ylabel("training loss (each objective's own)")
    axis.legend(fontsize=8)
    _save(figure, path)
    return True


def _save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", dpi=100)


def heading(table: Table) -> str:
    """"Table 5", "Figure 5" or "GPT Figure 2"."""
    return {"fig5": "Figure 5", "gpt_layers": "GPT Figure 2"}.get(table.name,
                                                                f"Table {table.name}")


def write_report(table: Table, results: Mapping[str, dict], output_dir: str | os.PathLike,
                 scale: str, seeds: int, command: str) -> Path:
    """Writes `table<N>_<scale>.md` and its PNGs into `output_dir`; returns the markdown path."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"table{table.name}_{scale}" if table.name.isdigit() else f"{table.name}_{scale}"
    png = folder / f"{stem}.png"
    plot(table, results, png)
    plots = [str(png)]
    curves = folder / f"{stem}_pretraining.png"
    if plot_pretraining(table, results, curves):
        plots.append(str(curves))
    text = markdown(table, results, scale, seeds, command, plots)
    path = folder / f"{stem}.md"
    write_atomically(path, text)
    return path
