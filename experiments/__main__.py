"""Runs one of the paper's ablations at small scale and writes its table and plot.

    python -m experiments --table=5 --scale=cpu
    python -m experiments --table=5,7,8,fig5 --scale=cpu   # one grid; shared runs run once
    python -m experiments --report_only                    # redraw the committed results

Every pre-training and fine-tuning is a run of the project's own tools,
cached under a hash of its settings in `--cache_dir`: an interrupted grid
continues where it stopped, and a finished one re-prints at once. Before
starting any run the driver prints the plan and asks (`--yes` does not).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from data_prep.corpora.assets import cache_dir
from experiments import grid, jobs, plan, report, scales, schedule, summary, tables
from experiments.cells import Table

PROGRAM = "python -m experiments"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=_tables,
                        help="The paper's Table 5, 6, 7, 8, the training-steps figure (fig5), "
                             "or GPT's layers-transferred curve (gpt_layers); several, "
                             "comma-separated, run as one grid. Required, except with "
                             "--report_only (default: all).")
    parser.add_argument("--report_only", action="store_true",
                        help="Run nothing: redraw each table's markdown and plots in "
                             "--output_dir from its committed results (<table>_<scale>.json).")
    parser.add_argument("--yes", action="store_true",
                        help="Start the plan's runs without asking for confirmation.")
    parser.add_argument("--scale", default="cpu", choices=sorted(scales.SCALES),
                        help="Preset sizes: cpu (a few hours per table on 2 cores) or gpu.")
    parser.add_argument("--output_dir", default="experiments/results",
                        help="Where each table<N>_<scale>.md, its PNGs and its results "
                             "(.json, which --report_only reads) go.")
    parser.add_argument("--cache_dir", default=None,
                        help="Runs and their results (default: <BERT_CACHE_DIR>/experiments).")
    parser.add_argument("--seeds", type=int, default=3,
                        help="Fine-tuning seeds (restarts) per learning rate.")
    parser.add_argument("--glue_dir", default=None,
                        help="Folder of GLUE task folders (MRPC/, SST-2/, ...): each becomes "
                             "a column, fine-tuned with run_classifier.py --task_name.")
    parser.add_argument("--glue_tasks", default="",
                        help="Comma-separated GLUE tasks of --glue_dir (default: all found).")
    parser.add_argument("--glue_train_examples", type=int, default=None,
                        help="Fine-tune each GLUE task on at most the first N training "
                             "examples (SST-2's 67k are hours per run on a CPU; default: all).")
    parser.add_argument("--builtin_tasks", default="sentiment,tagging", type=_builtin_tasks,
                        help="The built-in stand-in columns to keep (comma-separated of "
                             "sentiment, tagging; empty for none, e.g. with --glue_dir).")
    parser.add_argument("--squad_dir", default=None,
                        help="Folder with SQuAD v1.1's train-v1.1.json and dev-v1.1.json: "
                             "adds a SQuAD column (run_squad.py).")
    parser.add_argument("--workers", type=int, default=2,
                        help="Runs side by side when their inputs are ready.")
    args = parser.parse_args(argv)
    if args.table is None:
        if not args.report_only:
            parser.error("the following arguments are required: --table")
        args.table = list(tables.TABLES)
    if args.seeds < 1:
        parser.error(f"--seeds must be positive, got {args.seeds}")
    if args.workers < 1:
        parser.error(f"--workers must be positive, got {args.workers}")
    if args.glue_train_examples is not None and args.glue_train_examples < 1:
        parser.error(f"--glue_train_examples must be positive, got {args.glue_train_examples}")
    if not args.builtin_tasks and not (args.glue_dir or args.squad_dir or args.report_only):
        parser.error("--builtin_tasks is empty and no --glue_dir or --squad_dir is given: "
                     "the tables would have no column")
    return args


def _builtin_tasks(text: str) -> tuple[str, ...]:
    names = tuple(name for name in text.split(",") if name)
    unknown = sorted(set(names) - {"sentiment", "tagging"})
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; expected sentiment, "
                                         "tagging or nothing")
    return names


def _tables(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in tables.TABLES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {(unknown or [text])[0]!r} (choose from {', '.join(tables.TABLES)})")
    return list(dict.fromkeys(names))


def report_only(args: argparse.Namespace) -> list[Path]:
    """Redraws each asked table from `<output_dir>/<stem>.json`; returns the markdown paths.

    A table without a summary is named and skipped; it is an error only when
    none of the tables asked for has one.
    """
    written = []
    for name in args.table:
        path = Path(args.output_dir) / f"{summary.file_stem(name, args.scale)}.json"
        if not path.is_file():
            print(f"{summary.heading(name)} ({args.scale}): no committed results, "
                  f"{path} does not exist; nothing drawn", flush=True)
            continue
        table = summary.load(path)
        rendering = report.render(table, args.output_dir)
        print(rendering.markdown.read_text(encoding="utf-8"))
        print("Wrote " + ", ".join(str(file) for file in (rendering.markdown, *rendering.drawn)))
        for kept in rendering.kept:
            print(f"Kept {kept} as committed: {path.name} holds no loss curves to redraw it")
        missing = table.missing()
        print(f"{table.heading}: {len(missing)} cell(s) without a result"
              + "".join(f"\n  no result: {row} / {column}" for row, column in missing),
              flush=True)
        written.append(rendering.markdown)
    if not written:
        raise ValueError(f"{args.output_dir} holds no results of --table="
                         f"{','.join(args.table)} at --scale={args.scale}")
    return written


def build_tables(args: argparse.Namespace, scale: scales.Scale | None = None,
                 datasets: scales.Datasets | None = None
                 ) -> tuple[scales.Scale, Path, list[Table]]:
    """The scale, the cache folder and the tables the arguments ask for (nothing is run)."""
    scale = scale or dataclasses.replace(scales.SCALES[args.scale], tasks=args.builtin_tasks)
    cache_root = Path(args.cache_dir) if args.cache_dir else cache_dir() / "experiments"
    tasks = [task for task in args.glue_tasks.split(",") if task]
    datasets = datasets or scales.default_datasets(scale, cache_root, args.glue_dir, tasks,
                                                 args.squad_dir, args.glue_train_examples)
    builder = grid.GridBuilder(scale, datasets, args.seeds)
    return scale, cache_root, [tables.table(name, builder) for name in args.table]


def run(args: argparse.Namespace, command: str,
        runner: jobs.Runner = jobs.subprocess_runner, scale: scales.Scale | None = None,
        datasets: scales.Datasets | None = None, ask: Callable[[str], str] = input) -> Path:
    """Builds, runs and reports the tables; `scale` and `datasets` replace the presets (tests).

    Before the first run starts, the plan is printed and `ask` must answer
    yes, unless `--yes` is given or every run is cached.

    The tables' runs form one grid, so a run two tables share (Table 8's
    80/10/10 row is Table 5's BERT) runs once, and runs of different tables
    fill the workers together. The tables' runs start in the order the tables
    are asked for, and each table is written as soon as its own runs are
    done, not when the whole grid is. Returns the last table's path.
    """
    scale, cache_root, built = build_tables(args, scale, datasets)
    written: dict[str, Path] = {}

    def write_finished(results: Mapping[str, dict]) -> None:
        for table in built:
            if table.name in written or any(job.key not in results
                                            for job in schedule.all_jobs(table.jobs)):
                continue
            path = report.write_report(table, results, args.output_dir, scale.name,
                                       args.seeds, command)
            print(path.read_text(encoding="utf-8"))
            print(f"Wrote {path}", flush=True)
            written[table.name] = path

    first_table = {}  # tables are finished in the order asked for
    for index, table in enumerate(built):
        for job in schedule.all_jobs(table.jobs):
            first_table.setdefault(job.key, index)
    every = [job for table in built for job in table.jobs]
    cache = jobs.Cache(cache_root)
    to_do = plan.make_plan(schedule.all_jobs(every), cache, scale.name)
    print(f"Plan: {', '.join(summary.heading(table.name) for table in built)} at "
          f"{scale.name} scale, "
          f"{args.seeds} seed(s), cache {cache_root}\n{to_do.describe(scale.name)}", flush=True)
    if to_do.to_run and not args.yes:
        plan.confirm(ask)
    schedule.run_grid(every, cache, runner, args.workers, write_finished,
                  lambda job: first_table[job.key])
    return written[built[-1].name]


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    try:
        if args.report_only:
            report_only(args)
        else:
            # --yes changes no result, so the command a table names leaves it out.
            run(args, shlex.join([*PROGRAM.split(), *(a for a in argv if a != "--yes")]))
    except (ValueError, OSError, jobs.JobFailed, plan.Declined) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
