"""Runs that take only the CPU time the others leave: a grid's background lane.

A small model keeps one core busy far better than two, so a run at full
speed leaves idle CPU time beside it. Runs that wait on nothing of it (the
demo's fine-tunings from random weights, beside its pre-training) can fill
that time one at a time at the lowest priority, and what is left of them
runs with the rest of the grid afterwards. Each finished run is in the
cache as usual, so the grid that follows counts it as done.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Generic, Mapping, Sequence, TypeVar

from experiments.jobs import Cache, Job, Runner, run_job, subprocess_runner

Item = TypeVar("Item")
LOWEST_PRIORITY = 19


def idle_runner(arguments: list[str], log: Path, environment: Mapping[str, str]) -> None:
    """`subprocess_runner` at the lowest priority: the run takes only what the others leave."""
    subprocess_runner(arguments, log, environment, niceness=LOWEST_PRIORITY)


class IdleTimeRunner(Generic[Item]):
    """Runs items one at a time with `run`, in a thread, until `stop()`.

    `stop()` waits for the item in hand, which then runs at full speed,
    before the full-priority work starts: put the long items first, so that
    the one in hand at the end is a short one.
    """

    def __init__(self, items: Sequence[Item], run: Callable[[Item], object]):
        self.waiting = list(items)
        self.run = run
        self.lock = threading.Lock()
        self.stopping = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _work(self) -> None:
        while True:
            with self.lock:
                if self.stopping or not self.waiting:
                    return
                item = self.waiting.pop(0)
            try:
                self.run(item)
            except BaseException as error:  # raised again by stop(), in the main thread
                self.error = error
                return

    def stop(self) -> list[Item]:
        """Starts nothing more, waits for the item in hand; returns the items not started."""
        with self.lock:
            self.stopping = True
            left = self.waiting
        self.thread.join()
        if self.error is not None:
            raise self.error
        return left


def run_in_idle_time(background: Sequence[Job], cache: Cache,
                     runner: Runner = idle_runner) -> IdleTimeRunner[Job]:
    """Starts the runs of `background` not yet cached, one thread each, at the lowest priority.

    Their inputs must be ready: a run made by another job needs that job's
    result in the cache first (run it with `run_grid`).
    """
    for job in background:
        missing = [dependency for dependency in job.dependencies
                   if cache.result(dependency) is None]
        if missing:
            raise ValueError(f"{job.tool} reads the output of {missing[0].tool}, which has not "
                             "run yet: run it before the runs that fill idle time")
    return IdleTimeRunner([job for job in background if cache.result(job) is None],
                          lambda job: run_job(job, cache, runner, threads=1))
