"""A table's results as committed: all a report needs, without the cache that produced it.

The cache holds every run's files, but it stays on the machine that ran the
grid. `<stem>.json`, written beside each table's markdown, keeps the table's
layout, the paper's numbers, per row and column the score (mean, standard
deviation, the seeds' own values, how it was chosen) and the pre-training
loss curves. Reports are drawn from it alone, so `--report_only` redraws on
a fresh clone exactly what the grid's run wrote, and says which cells have
no result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Mapping

from core.atomic import write_atomically
from experiments.cells import Score, Table
from experiments.jobs import Job, Output

FORMAT = 1  # bumped when the file's fields change meaning


@dataclasses.dataclass
class RowSummary:
    """One row; a column missing from `scores` has no result, a None score does not apply."""
    name: str
    scores: dict[str, Score | None]
    paper: dict[str, float] = dataclasses.field(default_factory=dict)
    series: str = ""
    step: int = 0


@dataclasses.dataclass
class TableSummary:
    """A table as run: its layout and notes (from `grid`), scores and loss curves."""
    name: str
    title: str
    scale: str
    seeds: int
    command: str
    columns: list[str]
    paper_columns: dict[str, str]
    notes: list[str]
    rows: list[RowSummary]
    figure: bool = False
    x_label: str = "pre-training steps"
    curves: dict[str, list[list[float]]] = dataclasses.field(default_factory=dict)

    @property
    def stem(self) -> str:
        return file_stem(self.name, self.scale)

    @property
    def heading(self) -> str:
        return heading(self.name)

    def missing(self) -> list[tuple[str, str]]:
        """(row, column) of every applicable cell that has no result."""
        return [(row.name, column) for row in self.rows for column in self.columns
                if column not in row.scores]


def heading(name: str) -> str:
    """"Table 5", "Figure 5" or "GPT Figure 2"."""
    return {"fig5": "Figure 5", "gpt_layers": "GPT Figure 2"}.get(name, f"Table {name}")


def file_stem(name: str, scale: str) -> str:
    """`table5_cpu`, `fig5_cpu`: the name of a table's files."""
    prefix = f"table{name}" if name.isdigit() else name
    return f"{prefix}_{scale}"


def summarize(table: Table, results: Mapping[str, dict], scale: str, seeds: int,
              command: str) -> TableSummary:
    """The table's scores from the cache's results; cells whose runs have none are left out."""
    rows = []
    for row in table.rows:
        scores: dict[str, Score | None] = {}
        for column in table.columns:
            cell = row.cells.get(column)
            if cell is None:
                scores[column] = None
            elif all(job.key in results for job in cell.jobs):
                scores[column] = cell.score(results)
        rows.append(RowSummary(row.name, scores, dict(row.paper), row.series, row.step))
    curves, drawn = {}, set()
    for row in table.rows:
        job = row.pretraining
        if job is not None and job.key not in drawn and results.get(job.key, {}).get(
                "train_loss"):
            curves[row.series or row.name] = whole_curve(job, results)
            drawn.add(job.key)
    return TableSummary(table.name, table.title, scale, seeds, command, list(table.columns),
                        dict(table.paper_columns), list(table.notes), rows, table.figure,
                        table.x_label, curves)


def whole_curve(job: Job, results: Mapping[str, dict]) -> list[list[float]]:
    """[step, loss] over every phase: a run started from another run's output folder
    continues that run's curve, its steps counted on from where that one stopped."""
    source = job.inputs.get("init_checkpoint")
    earlier, offset = [], 0
    if isinstance(source, Output) and not source.path and source.job.tool == job.tool:
        earlier = whole_curve(source.job, results)
        offset = int(source.job.settings["num_train_steps"])
    own = results.get(job.key, {}).get("train_loss", [])
    return earlier + [[step + offset, loss] for step, loss in own]


def save(summary: TableSummary, path: str | os.PathLike) -> None:
    """Writes the summary as JSON (NaN as null, which strict JSON readers accept)."""
    data = {"format": FORMAT, **dataclasses.asdict(summary)}
    for row in data["rows"]:
        for column, score in row["scores"].items():
            if score is not None:
                row["scores"][column] = {key: _finite(value) for key, value in score.items()}
    write_atomically(Path(path), json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def load(path: str | os.PathLike) -> TableSummary:
    """Reads a summary that `save` wrote; a file that is not one is an error naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.pop("format") != FORMAT:
            raise ValueError(f"format is not {FORMAT}")
        rows = [RowSummary(**{**row, "scores": {
            column: None if score is None else _score(score)
            for column, score in row["scores"].items()}}) for row in data.pop("rows")]
        return TableSummary(**data, rows=rows)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: not a results summary of `python -m experiments` "
                         f"({type(error).__name__}: {error})") from None


def _finite(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _score(fields: dict) -> Score:
    number = {key: math.nan if fields[key] is None else float(fields[key])
              for key in ("mean", "std")}
    return Score(number["mean"], number["std"], int(fields["count"]), fields.get("detail", ""),
                 tuple(float(value) for value in fields.get("values", ())))
