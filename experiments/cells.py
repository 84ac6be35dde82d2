"""A table's cells (one number each, and the runs it needs), rows and tables.

A cell turns the results of its runs into a `Score`: the mean and standard
deviation over seeds at the learning rate chosen the way the paper chooses
it, so that a table's layout (`tables`) and its runs (`grid`) stay apart
from how a number is read out of a run's files.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Mapping, Sequence

from experiments.jobs import Job


@dataclasses.dataclass(frozen=True)
class Score:
    """A cell: mean and standard deviation over seeds (as printed), and how it was chosen.

    `values` are the seeds' own scores, kept so that a committed table can be
    checked and redrawn without the cache that produced it.
    """
    mean: float
    std: float
    count: int
    detail: str = ""
    values: tuple[float, ...] = ()


class Cell:
    """One number of a table and the jobs it needs."""
    jobs: list[Job]

    def score(self, results: Mapping[str, dict]) -> Score:
        raise NotImplementedError


class SweepCell(Cell):
    """`run_classifier.py` sweep: the rate with the best mean dev score, its restarts' spread."""
    def __init__(self, job: Job):
        self.jobs = [job]

    def score(self, results: Mapping[str, dict]) -> Score:
        by_rate: dict[float, list[float]] = {}
        for rate, _, value in results[self.jobs[0].key]["sweep"]:
            if not math.isnan(value):
                by_rate.setdefault(rate, []).append(100 * value)
        if not by_rate:
            return Score(math.nan, math.nan, 0, "every run diverged")
        rate = max(by_rate, key=lambda r: statistics.mean(by_rate[r]))
        return _summary(by_rate[rate], f"lr {rate:g}")


class SeedsCell(Cell):
    """Separate runs per (rate, seed): rate chosen on `select`, `report` of its seeds shown."""
    def __init__(self, runs: Mapping[float, Sequence[Job]], select: str, report: str,
                 factor: float = 100):
        self.runs, self.select, self.report, self.factor = runs, select, report, factor
        self.jobs = [job for jobs in runs.values() for job in jobs]

    def score(self, results: Mapping[str, dict]) -> Score:
        def values(jobs, key):
            return [self.factor * results[job.key]["eval_results"][key] for job in jobs]

        rate = max(self.runs, key=lambda r: statistics.mean(values(self.runs[r], self.select)))
        return _summary(values(self.runs[rate], self.report), f"lr {rate:g}")


class MetricCell(Cell):
    """One number from a pre-training evaluation (perplexity, masked-LM accuracy)."""
    def __init__(self, job: Job, metrics: Sequence[str], percent: bool = False):
        self.jobs, self.metrics, self.percent = [job], metrics, percent

    def score(self, results: Mapping[str, dict]) -> Score:
        found = results[self.jobs[0].key]["eval_results"]
        metric = next(name for name in self.metrics if name in found)
        value = found[metric] * (100 if self.percent else 1)
        return Score(value, math.nan, 1, metric, (value,))


def _summary(values: list[float], detail: str) -> Score:
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return Score(statistics.mean(values), spread, len(values), detail, tuple(values))


@dataclasses.dataclass
class Row:
    name: str
    cells: dict[str, Cell | None]  # None: not applicable (the reason is in the table's notes)
    paper: dict[str, float] = dataclasses.field(default_factory=dict)
    series: str = ""  # the figure's line and x value
    step: int = 0
    pretraining: Job | None = None  # whose training curve stands for the row


@dataclasses.dataclass
class Table:
    name: str
    title: str
    columns: list[str]
    rows: list[Row]
    paper_columns: dict[str, str]  # our column -> the paper's column shown beside it
    notes: list[str]
    figure: bool = False
    x_label: str = "pre-training steps"  # the figure's x axis (each row's `step`)

    @property
    def jobs(self) -> list[Job]:
        return [job for row in self.rows for cell in row.cells.values() if cell
                for job in cell.jobs]
