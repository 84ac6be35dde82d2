"""When a grid's runs start: side by side as soon as their inputs are ready, or in idle time.

A small model keeps one core busy far better than two, so on a small
machine separate runs side by side finish sooner than one after another
(`run_grid`), and a run at full speed leaves idle CPU time beside it. Runs
that wait on nothing of it (the demo's fine-tunings from random weights,
beside its pre-training) can fill that time one at a time at the lowest
priority (`run_in_idle_time`); what is left of them runs with the rest of
the grid afterwards. Every finished run is in the cache, whichever way it
ran, so a later grid counts it as done.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Generic, Iterable, Mapping, Sequence, TypeVar

from experiments import jobs
from experiments.jobs import Cache, Job, Runner, subprocess_runner

Item = TypeVar("Item")
LOWEST_PRIORITY = 19


def all_jobs(runs: Iterable[Job]) -> list[Job]:
    """`runs` and everything they read from, once per key, dependencies first."""
    ordered: dict[str, Job] = {}

    def visit(job: Job) -> None:
        if job.key in ordered:
            return
        for dependency in job.dependencies:
            visit(dependency)
        ordered[job.key] = job

    for job in runs:
        visit(job)
    return list(ordered.values())


def _waiting_on(pending: list[Job]) -> dict[str, int]:
    """How many runs wait on each pending run, directly or through others: those that more
    runs wait on start first (a pre-training before the fine-tunings of other models), so
    that the longest chain starts early."""
    waiting = {job.key: 0 for job in pending}
    for job in reversed(pending):  # a job's dependents come after it
        for dependency in job.dependencies:
            if dependency.key in waiting:
                waiting[dependency.key] += 1 + waiting[job.key]
    return waiting


def run_grid(runs: Iterable[Job], cache: Cache, runner: Runner = subprocess_runner,
             workers: int = 1,
             progress: Callable[[Mapping[str, dict]], None] | None = None,
             rank: Callable[[Job], int] | None = None) -> dict[str, dict]:
    """Results by job key; a job starts as soon as its inputs are ready and a worker is free.

    Each run side by side gets its share of the cores, except a run that
    starts with nothing beside it and nothing else ready, which gets them
    all. When a run fails, the runs already started finish and nothing more
    starts. Among the ready runs, those of the lowest `rank` start first
    (e.g. the first table asked for), and among those the ones that more
    runs wait on. `progress` is called with the results so far, before the
    first run and after each.
    """
    pending = all_jobs(runs)
    results: dict[str, dict] = {}
    total, started = len(pending), time.monotonic()
    for job in pending:
        cached = cache.result(job)
        if cached is not None:
            results[job.key] = cached
    pending = [job for job in pending if job.key not in results]
    print(f"{total} runs: {total - len(pending)} cached, {len(pending)} to run", flush=True)
    if progress:
        progress(results)
    waiting = _waiting_on(pending)
    share = max(1, (os.cpu_count() or 1) // workers)
    running: dict[Future, Job] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(workers) as pool:
        while pending or running:
            ready = sorted((job for job in pending
                            if all(dependency.key in results for dependency in job.dependencies)),
                           key=lambda job: (rank(job) if rank else 0, -waiting[job.key]))
            while failure is None and ready and len(running) < workers:
                job = ready.pop(0)
                alone = not running and not ready
                threads = None if workers == 1 or alone else share
                running[pool.submit(jobs.run_job, job, cache, runner, threads)] = job
                pending.remove(job)
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                try:
                    results[job.key] = future.result()
                except BaseException as error:  # let the runs beside it finish first
                    failure = failure or error
                else:
                    if progress:
                        progress(results)
            print(f"{len(results)}/{total} runs done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    if failure is not None:
        raise failure
    return results


def idle_runner(arguments: list[str], log: Path, environment: Mapping[str, str]) -> float:
    """`subprocess_runner` at the lowest priority: the run takes only what the others leave."""
    return subprocess_runner(arguments, log, environment, niceness=LOWEST_PRIORITY)


class IdleTimeRunner(Generic[Item]):
    """Runs items one at a time with `run`, in a thread, until `stop()`.

    `stop()` waits for the item in hand, which then runs at full speed,
    before the full-priority work starts: put the long items first, so that
    the one in hand at the end is a short one.
    """

    def __init__(self, items: Sequence[Item], run: Callable[[Item], object]):
        self.items = list(items)
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
    """Starts the runs of `background` not yet cached, one at a time at the lowest priority.

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
                          lambda job: jobs.run_job(job, cache, runner, threads=1))
