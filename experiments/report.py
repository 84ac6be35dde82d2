"""A table's summary as markdown (ours beside the paper's) and PNG plots.

Plots are drawn with matplotlib's non-interactive Agg backend, so a report
is written the same on a machine without a display. Every score axis starts
at 0: our small models score far below the paper's, and an axis cut just
below our own points would make a gap of one standard deviation look like
a result. Error bars are the standard deviation over seeds (restarts); the
paper's numbers, where its table has the row, are red diamonds.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

from core import extras
from core.atomic import atomic_path, write_atomically

# Figures are drawn without pyplot, so no display backend or global figure state is involved.
with extras.needed("experiments"):
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
from experiments.cells import Score, Table
from experiments.summary import TableSummary, save, summarize

NO_RESULT = "no result"
# Columns whose score is an accuracy; the others are F1 or a task's own dev metric.
ACCURACY_COLUMNS = ("sentiment", "SST-2", "MNLI", "QNLI", "RTE", "WNLI", "LM accuracy")
PAPER_STYLE = {"marker": "D", "color": "tab:red", "linestyle": "none", "markersize": 6}


@dataclasses.dataclass
class Rendering:
    """What `render` wrote, and an older loss plot it linked without drawing it again."""
    markdown: Path
    drawn: list[Path]
    kept: list[Path]


def format_score(score: Score | None) -> str:
    if score is None:
        return "n/a"
    if math.isnan(score.mean):
        return f"- ({score.detail})"
    if score.count > 1 and not math.isnan(score.std):
        return f"{score.mean:.1f} ± {score.std:.1f}"
    return f"{score.mean:.2f}"


def markdown(summary: TableSummary, plots: list[Path]) -> str:
    """The report: title, command, the table with the paper's numbers beside ours, notes."""
    header = ["variant"]
    for column in summary.columns:
        header.append(f"{column} (ours)")
        if column in summary.paper_columns:
            header.append(f"paper: {summary.paper_columns[column]}")
    lines = [f"# {summary.heading}: {summary.title} ({summary.scale} scale)", "",
             "Produced by:", "", "```bash", summary.command, "```", "",
             f"Mean ± standard deviation over {summary.seeds} seed(s) in percent (perplexity "
             "as is); `lr` is the fine-tuning rate chosen (sentiment and GLUE: best mean dev "
             "score; tagging: best mean validation F1, test F1 reported).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary.rows:
        cells = [row.name]
        for column in summary.columns:
            if column not in row.scores:
                cells.append(NO_RESULT)
            else:
                score = row.scores[column]
                text = format_score(score)
                if score is not None and score.detail.startswith("lr "):
                    text += f" ({score.detail})"
                cells.append(text)
            if column in summary.paper_columns:
                paper = row.paper.get(column)
                cells.append("-" if paper is None else f"{paper:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    notes = list(summary.notes)
    missing = summary.missing()
    if missing:
        notes.append(f"{len(missing)} cell(s) have no result (`{NO_RESULT}`): their runs "
                     "had not finished when this table was written.")
    lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    if plots:
        lines += [""] + [f"![{plot.stem}]({plot.name})" for plot in plots]
    return "\n".join(lines) + "\n"


def y_label(column: str) -> str:
    """The score axis' quantity and unit (scores are in percent, perplexity as is)."""
    if column == "perplexity":
        return "masked-LM perplexity (lower is better)"
    if column == "LM accuracy":
        return "LM accuracy on the records (%)"
    if column.startswith("tagging"):
        return "test F1 (%)"
    if column == "SQuAD":
        return "dev F1 (%)"
    if column in ACCURACY_COLUMNS:
        return "dev accuracy (%)"
    return "dev score (x 100)"


def plot(summary: TableSummary) -> Figure:
    """Score against steps per series (figures), or our rows beside the paper's (tables)."""
    columns = summary.columns
    figure = Figure(figsize=(max(5.0, 4.4 * len(columns)), 4.2))
    axes = figure.subplots(1, len(columns), squeeze=False)[0]
    for axis, column in zip(axes, columns):
        axis.set_title(column, fontsize=10)
        if summary.figure:
            _draw_series(axis, summary, column)
        else:
            _draw_rows(axis, summary, column)
        axis.set_ylabel(y_label(column))
        _score_range(axis, column)
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=7, loc="lower right")
    figure.suptitle(f"{summary.heading}: {summary.title} ({summary.scale} scale)\n"
                    f"mean ± s.d. over {summary.seeds} seed(s); every y axis starts at 0",
                    fontsize=10)
    return figure


def _draw_series(axis: Axes, summary: TableSummary, column: str) -> None:
    for series in dict.fromkeys(row.series for row in summary.rows):
        points = [(row.step, row.scores[column]) for row in summary.rows
                  if row.series == series and _drawable(row.scores.get(column))]
        if points:
            steps, scores = zip(*points)
            axis.errorbar(steps, [score.mean for score in scores],
                          yerr=[_spread(score) for score in scores], marker="o", capsize=3,
                          label=f"{series} (ours)")
    axis.set_xlabel(summary.x_label)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and blocks are whole


def _draw_rows(axis: Axes, summary: TableSummary, column: str) -> None:
    names, ours, paper = [], [], []
    for index, row in enumerate(summary.rows):
        score = row.scores.get(column)
        names.append(row.name if column in row.scores else f"{row.name} ({NO_RESULT})")
        if _drawable(score):
            ours.append((index, score.mean, _spread(score)))
        if column in row.paper:
            paper.append((index, row.paper[column]))
    if ours:
        positions, means, spreads = zip(*ours)
        seeded = any(row.scores.get(column) and row.scores[column].count > 1
                     for row in summary.rows)
        axis.errorbar(positions, means, yerr=spreads, fmt="o", capsize=4,
                      label="ours (mean ± s.d.)" if seeded else "ours (one run each)")
    if paper:
        axis.plot(*zip(*paper), **PAPER_STYLE,
                  label=f"paper: {summary.paper_columns.get(column, column)}")
    if not paper:
        axis.set_title(f"{column}\n(the paper has no numbers for these rows)", fontsize=10)
    axis.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    axis.set_xlim(-0.5, len(names) - 0.5)


def _score_range(axis: Axes, column: str) -> None:
    """From 0 to a little above the highest point or error bar (at most 100 for a percentage)."""
    top = 1.06 * axis.get_ylim()[1]
    axis.set_ylim(0.0, top if column == "perplexity" else min(100.0, top))


def _drawable(score: Score | None) -> bool:
    return score is not None and not math.isnan(score.mean)


def _spread(score: Score) -> float:
    return 0.0 if math.isnan(score.std) else score.std


def plot_pretraining(summary: TableSummary) -> Figure:
    """Training loss against steps, one line per pre-training (one run each: no spread)."""
    figure = Figure(figsize=(6.4, 4.2))
    axis = figure.subplots()
    for label, curve in summary.curves.items():
        axis.plot(*zip(*curve), label=label)
    axis.set_xlabel("pre-training steps")
    axis.set_ylabel("training loss (nats per target, each objective's own)")
    axis.set_ylim(0.0, axis.get_ylim()[1])
    axis.set_title(f"{summary.heading}: pre-training loss ({summary.scale} scale)\n"
                   "one run per model, so no error bars; y axis starts at 0", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return figure


def save_figure(figure: Figure, path: Path) -> None:
    """Writes the figure as a PNG under a temporary name, then renames it into place."""
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", dpi=100)


def render(summary: TableSummary, output_dir: str | os.PathLike) -> Rendering:
    """Writes `<stem>.md`, `<stem>.png` and, when the curves are kept, `<stem>_pretraining.png`.

    A summary without curves (written before they were kept) links the loss
    plot already in the folder, which it cannot draw again.
    """
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    scores = folder / f"{summary.stem}.png"
    save_figure(plot(summary), scores)
    drawn, kept = [scores], []
    curves = folder / f"{summary.stem}_pretraining.png"
    if summary.curves:
        save_figure(plot_pretraining(summary), curves)
        drawn.append(curves)
    elif curves.is_file():
        kept.append(curves)
    path = folder / f"{summary.stem}.md"
    write_atomically(path, markdown(summary, drawn + kept))
    return Rendering(path, drawn, kept)


def write_report(table: Table, results: dict, output_dir: str | os.PathLike, scale: str,
                 seeds: int, command: str) -> Path:
    """Writes the table's summary (`<stem>.json`) and its report; returns the markdown path."""
    summary = summarize(table, results, scale, seeds, command)
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    save(summary, Path(output_dir) / f"{summary.stem}.json")
    return render(summary, output_dir).markdown
