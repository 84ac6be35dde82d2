"""The plan shown before a grid runs: its runs, how many are cached, how long the rest take.

A table at `cpu` scale is hours of work, so the driver says what it is
about to start and waits for a yes. The time of each run still to do comes
from the runs of the same kind already in the cache, which record their
wall time (`seconds` in `result.json`); a kind no cached run has measured
falls back on a constant of the scale (`RUN_SECONDS`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, Sequence

from experiments.jobs import Cache, Job

# Seconds per unit of `_work` (a pre-training's training step, or one whole
# run) on a 2-core CPU, by scale. Rough, and on the high side: `make demo`
# pre-trains the cpu scale's L2/H128 model for 4,900 steps and fine-tunes it
# 24 times in 817 s of CPU time on an idle machine, while the committed cpu
# tables took a few hours each on a shared one. They tell minutes from hours;
# each finished run records its own time, and the plan uses those instead as
# soon as the cache holds a run of the kind. The gpu scale has no constants:
# nothing here measured it, so its plan gives no estimate until runs have.
RUN_SECONDS = {
    "cpu": {"data_prep.vocab": 120, "data_prep.create_pretraining_data": 180,
            "run_pretraining.py (training)": 0.3, "run_pretraining.py (evaluation)": 60,
            "run_classifier.py": 600, "run_ner.py": 180, "run_ner.py (feature-based)": 240,
            "run_squad.py": 1800},
}


class Declined(RuntimeError):
    """The plan was not confirmed; nothing was started."""


@dataclasses.dataclass
class Plan:
    """The grid's runs, those the cache already holds, and the estimated time of the others."""
    total: int
    cached: int
    kinds: dict[str, int]  # runs still to do, by kind
    seconds: dict[str, float | None]  # each kind's estimated seconds (None: no estimate)
    measured: set[str]  # kinds whose estimate comes from cached runs' recorded times

    @property
    def to_run(self) -> int:
        return self.total - self.cached

    def describe(self, scale: str) -> str:
        lines = [f"{self.total} runs: {self.cached} cached, {self.to_run} to run"]
        for kind, count in self.kinds.items():
            seconds = self.seconds[kind]
            source = "recorded by cached runs" if kind in self.measured else \
                f"the {scale} scale's constant"
            estimate = "no estimate" if seconds is None else \
                f"~{_duration(seconds)} in all ({source})"
            lines.append(f"  {count:4d} x {kind}: {estimate}")
        known = [seconds for seconds in self.seconds.values() if seconds is not None]
        if known:
            unknown = " (some kinds have no estimate)" if len(known) < len(self.seconds) else ""
            lines.append(f"Estimated time: about {_duration(sum(known))} of runs one after "
                         f"another on a 2-core CPU{unknown}")
        return "\n".join(lines)


def kind(job: Job) -> str:
    """What decides a run's time besides its size: the tool, and its mode where that matters."""
    tool = job.tool.removeprefix("-m ")
    if tool == "run_pretraining.py":
        return f"{tool} ({'training' if job.settings.get('do_train') else 'evaluation'})"
    if tool == "run_ner.py" and job.settings.get("mode") == "feature_based":
        return f"{tool} (feature-based)"
    return tool


def _work(job: Job) -> float:
    """Units of `RUN_SECONDS`: training steps for a pre-training, else one run."""
    if kind(job) == "run_pretraining.py (training)":
        return float(job.settings["num_train_steps"])
    return 1.0


def make_plan(every: Sequence[Job], cache: Cache, scale: str) -> Plan:
    """The plan of `every` run of a grid (`schedule.all_jobs`), estimated for `scale`."""
    pending: list[Job] = []
    recorded: dict[str, list[tuple[float, float]]] = {}
    for job in every:
        result = cache.result(job)
        if result is None:
            pending.append(job)
        elif "seconds" in result:
            recorded.setdefault(kind(job), []).append((result["seconds"], _work(job)))
    constants = RUN_SECONDS.get(scale, {})
    kinds = dict(Counter(kind(job) for job in pending))
    seconds: dict[str, float | None] = {}
    for name in kinds:
        work = sum(_work(job) for job in pending if kind(job) == name)
        if name in recorded:
            rate = sum(time for time, _ in recorded[name]) / sum(
                units for _, units in recorded[name])
        else:
            rate = constants.get(name)
        seconds[name] = None if rate is None else rate * work
    return Plan(len(every), len(every) - len(pending), kinds, seconds,
                set(recorded) & set(kinds))


def confirm(ask: Callable[[str], str]) -> None:
    """Asks `Proceed? [y/N]`; raises Declined unless the answer is yes."""
    try:
        answer = ask("Proceed? [y/N] ")
    except EOFError:
        print(flush=True)  # end the prompt's line before the error
        raise Declined("no answer (standard input ended: not a terminal?); pass --yes to run "
                       "the plan without asking. Nothing was started.") from None
    if answer.strip().lower() not in ("y", "yes"):
        raise Declined("not confirmed, nothing was started (answer y, or pass --yes)")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{max(1, round(seconds / 60))} min"
