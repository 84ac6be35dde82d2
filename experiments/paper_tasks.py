"""The paper's GLUE tasks fine-tuned by `run_classifier.py` and by Hugging Face PyTorch.

    python -m experiments.paper_tasks --glue_dir=../shared/data/glue --yes
    python -m experiments.paper_tasks_report --glue_dir=../shared/data/glue

For each task, and on MRPC and RTE for both optimizers (the original, no
bias correction; and `--adam_bias_correction=true`), the paper's protocol
(Section 4.1: batch 32, 3 epochs, length 128, warmup 10%): one
`run_classifier.py` sweep over {5e-5, 4e-5, 3e-5, 2e-5} with seed 12345
chooses the rate on dev; then three fresh seeds (12346-12348, `--num_restarts=3`)
at that rate, ours and Hugging Face PyTorch's (`experiments.glue_peer`), give
the mean, the spread and the dev-selected restart, whose test predictions are
written. Fresh seeds keep the sweep's winning run, chosen for its dev score,
out of the mean. Every run is a cached job (`experiments.jobs`): a killed
queue started again skips what finished, and resumes a killed sweep from its
runs' checkpoints. Runs go one per core at the lowest priority, the most
informative cells first (`CELLS`' order). `experiments.paper_tasks_report`
draws the results file `experiments/results/paper_tasks.md` and its plot from
whatever the cache holds, also while the queue runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Iterator, Sequence

from core.atomic import write_atomically
from data_prep.corpora.assets import cache_dir, minilm_dir
from experiments import jobs
from experiments.jobs import Cache, Dataset, Job

PROGRAM = "python -m experiments.paper_tasks"
RATES = (5e-5, 4e-5, 3e-5, 2e-5)
SEED = 12345  # the sweep's; the seeds at the chosen rate are SEED + 1 + restart
SEEDS = 3


@dataclasses.dataclass(frozen=True)
class Cell:
    """One task with one optimizer: its sweep, then ours and PyTorch's seeds at the chosen rate.

    `max_seq_length` below 128 only where no example of the task is longer
    (the same model outputs, less padding); `train_subset` samples that many
    training examples where the full set does not fit the budget.
    """

    task: str
    bias_correction: bool = False
    max_seq_length: int = 128
    train_subset: int | None = None


CELLS = (Cell("MRPC"), Cell("RTE"), Cell("MRPC", True), Cell("RTE", True), Cell("STS-B"),
         Cell("CoLA", max_seq_length=64), Cell("WNLI"),
         Cell("SST-2", max_seq_length=64, train_subset=6735))


def settings(cell: Cell, rates: Sequence[float], restarts: int, seed: int,
             predict: bool) -> dict:
    """The flags both implementations share (`run_classifier.py`'s names)."""
    return {"task_name": cell.task, "learning_rates": ",".join(f"{r:g}" for r in rates),
            "num_restarts": restarts, "random_seed": seed, "do_predict": predict,
            "adam_bias_correction": cell.bias_correction, "max_seq_length": cell.max_seq_length,
            "train_batch_size": 32, "num_train_epochs": 3.0, "warmup_proportion": 0.1}


class Plan:
    """The jobs of every cell, given the task folders and the model."""

    def __init__(self, glue_dir: Path, model_dir: Path, cache: Cache,
                 fixed_rate: float | None = None, tasks: Sequence[str] | None = None):
        self.glue_dir, self.cache, self.fixed_rate = glue_dir, cache, fixed_rate
        self.model = Dataset("init_checkpoint", (model_dir,))
        self.cells = tuple(cell for cell in CELLS if tasks is None or cell.task in tasks)

    def rate(self, cell: Cell) -> float | None:
        """The rate the seeds run at: `fixed_rate` (a stated reduction: no sweep), or the one
        the cell's sweep chose; None while the sweep runs."""
        if self.fixed_rate is not None:
            return self.fixed_rate
        result = self.cache.result(self.sweep(cell))
        return None if result is None else chosen_rate(result)

    def data(self, cell: Cell) -> Dataset:
        folder = self.glue_dir / cell.task
        if cell.train_subset:
            folder = subset_folder(folder, cell.train_subset, self.cache.root / "data")
        return Dataset("data_dir", (folder,))

    def ours(self, cell: Cell, rates: Sequence[float], restarts: int, seed: int,
             predict: bool) -> Job:
        return Job("run_classifier.py", {
            **settings(cell, rates, restarts, seed, predict), "do_train": True, "do_eval": True,
            "eval_batch_size": 64, "predict_batch_size": 64, "export_saved_model": False,
            "log_every": 20},
            {"data_dir": self.data(cell), "init_checkpoint": self.model}, resumable=True,
            keep=("eval_results.txt", "sweep_results.tsv", "submission", "logs"), save_every=50)

    def sweep(self, cell: Cell) -> Job:
        return self.ours(cell, RATES, 1, SEED, predict=False)

    def seeds(self, cell: Cell, rate: float) -> tuple[Job, Job]:
        """Ours and PyTorch's three seeds at `rate`."""
        ours = self.ours(cell, (rate,), SEEDS, SEED + 1, predict=True)
        peer = Job("-m experiments.glue_peer", settings(cell, (rate,), SEEDS, SEED + 1, True),
                   {"data_dir": self.data(cell), "init_checkpoint": self.model},
                   resumable=True)
        return ours, peer

    def ready(self) -> Iterator[Job]:
        """Jobs not yet done whose settings are known, the most informative first."""
        for cell in self.cells:
            rate = self.rate(cell)
            if rate is None:
                yield self.sweep(cell)
                continue
            for job in self.seeds(cell, rate):
                if self.cache.result(job) is None:
                    yield job


def chosen_rate(result: dict) -> float:
    """The rate of the sweep's chosen run (its first best dev score, as the runner chooses)."""
    finished = [(score, -index, rate) for index, (rate, _, score) in enumerate(result["sweep"])
                if score == score]
    if not finished:
        raise ValueError("every run of the sweep diverged")
    return max(finished)[2]


def subset_folder(folder: Path, size: int, root: Path) -> Path:
    """`folder`'s task with `size` training rows sampled with a fixed seed (order kept), written
    once under `root` beside copies of its other files."""
    target = root / f"{folder.name}-train{size}"
    if (target / "train.tsv").is_file():
        return target
    lines = (folder / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    if size >= len(lines) - 1:
        raise ValueError(f"{folder / 'train.tsv'}: {len(lines) - 1} rows, no fewer than the "
                         f"{size} to sample")
    rows = sorted(random.Random(SEED).sample(range(1, len(lines)), size))
    for name in sorted(os.listdir(folder)):
        if name != "train.tsv":
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, target / name)
    write_atomically(target / "train.tsv", "".join([lines[0], *(lines[i] for i in rows)]))
    return target


def runner(arguments: list[str], log: Path, environment: dict) -> float:
    """Every run at the lowest priority: the machine is shared."""
    return jobs.subprocess_runner(arguments, log, environment, niceness=19)


def run_queue(plan: Plan, workers: int) -> None:
    """Runs ready jobs `workers` at a time, one core each, until none is left."""
    running: dict[Future, Job] = {}
    with ThreadPoolExecutor(workers) as pool:
        while True:
            busy = {job.key for job in running.values()}
            for job in plan.ready():
                if len(running) >= workers:
                    break
                if job.key not in busy:
                    print(f"starting {job.tool} {job.settings['task_name']} ({job.key})",
                          flush=True)
                    running[pool.submit(jobs.run_job, job, plan.cache, runner, 1)] = job
                    busy.add(job.key)
            if not running:
                return
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                future.result()  # a failed run stops the queue, naming its log
                print(f"finished {job.tool} {job.settings['task_name']} ({job.key})", flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue_dir", default=os.environ.get("GLUE_DIR"),
                        help="Folder of the GLUE download (CoLA/, MRPC/, ...; default: $GLUE_DIR).")
    parser.add_argument("--cache_dir", default=None,
                        help="Runs and their results (default: <BERT_CACHE_DIR>/experiments).")
    parser.add_argument("--workers", type=int, default=2, help="Runs side by side.")
    parser.add_argument("--yes", action="store_true", help="Start without asking.")
    add_reduction_flags(parser)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be positive, got {args.workers}")
    if not args.glue_dir:
        parser.error("--glue_dir (or $GLUE_DIR) is required to run")
    check_reduction_flags(parser, args)
    return args


def add_reduction_flags(parser: argparse.ArgumentParser) -> None:
    """The reductions a short budget may state: one rate instead of the sweep, fewer tasks."""
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="Run the seeds at this rate with no sweep (a reduction the "
                             "results file states); default: the paper's sweep.")
    parser.add_argument("--tasks", default=None,
                        help="Comma-separated tasks to run (default: every task).")


def check_reduction_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.learning_rate is not None and not 0 < args.learning_rate < 1:
        parser.error(f"--learning_rate must lie between 0 and 1, got {args.learning_rate:g}")
    if args.tasks is not None:
        args.tasks = [task.strip() for task in args.tasks.split(",") if task.strip()]
        known = sorted({cell.task for cell in CELLS})
        unknown = [task for task in args.tasks if task not in known]
        if unknown or not args.tasks:
            parser.error(f"--tasks: unknown task(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(known)}")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    glue_dir = Path(args.glue_dir)
    missing = [cell.task for cell in CELLS if not (glue_dir / cell.task / "train.tsv").is_file()
               and (args.tasks is None or cell.task in args.tasks)]
    if missing:
        sys.exit(f"{PROGRAM}: error: --glue_dir={glue_dir} lacks {', '.join(missing)} "
                 "(expected the GLUE download's layout: <glue_dir>/<TASK>/train.tsv)")
    try:
        plan = Plan(glue_dir, minilm_dir(), cache_for(args.cache_dir), args.learning_rate,
                    args.tasks)
        waiting = list(plan.ready())
        print(f"{len(waiting)} runs can start now (more once each sweep has chosen its rate); "
              f"cache {plan.cache.root}", flush=True)
        if waiting and not args.yes and not _confirmed():
            sys.exit(f"{PROGRAM}: not confirmed, nothing was started (pass --yes to run "
                     "without asking)")
        run_queue(plan, args.workers)
    except (ValueError, OSError, jobs.JobFailed) as error:
        sys.exit(f"{PROGRAM}: error: {error}")
    print("Every run is done; draw the results with python -m experiments.paper_tasks_report",
          flush=True)


def _confirmed() -> bool:
    try:
        return input("Proceed? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def cache_for(folder: str | None) -> Cache:
    """The experiments' cache: `folder`, or the default under BERT_CACHE_DIR."""
    return Cache(Path(folder) if folder else cache_dir() / "experiments")


if __name__ == "__main__":
    main()
