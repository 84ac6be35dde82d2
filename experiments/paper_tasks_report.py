"""The paper-tasks results file, from the runs `experiments.paper_tasks` left in its cache.

    python -m experiments.paper_tasks_report --glue_dir=../shared/data/glue
    python -m experiments.paper_tasks_report --from_json   # redraw, no cache needed

Reads what the cache holds (also while the queue still runs: a cell without
its runs is listed as waiting), writes `paper_tasks.json`, everything the
results file is drawn from (each seed's scores, times, commands, data
checksums), then `paper_tasks.md` and `paper_tasks.png`
(`experiments.paper_tasks_render`). Commands are written with `$GLUE_DIR`,
`$MINILM_DIR` and `OUT` in place of this machine's folders.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Sequence

from core.atomic import write_atomically
from data_prep.corpora.assets import minilm_dir
from experiments import glue_peer, paper_tasks, paper_tasks_render, provenance
from experiments.jobs import Cache, Job

STEM = "paper_tasks"
# "train: 3667 examples, 0 of them truncated to 128 tokens" (run_classifier.py's log).
_CONVERTED = re.compile(r"\] (\S+): (\d+) examples, (\d+) of them truncated to (\d+) tokens")


def command_text(cache: Cache, job: Job, placeholders: dict[str, str]) -> str:
    """The job's command line with this machine's folders replaced by names."""
    words = ["python", *cache.command(job)]
    output = str(cache.output(job))
    text = shlex.join(words).replace(output, "OUT")
    for folder, name in sorted(placeholders.items(), key=lambda item: -len(item[0])):
        text = text.replace(folder, name)
    return text


def _runs(result: dict | None) -> list[dict]:
    """Each run of a sweep's table: rate, seed offset, every score, warning, chosen."""
    if result is None:
        return []
    rows = []
    for row in result.get("sweep_rows", []):
        scores = {key.removeprefix("eval_"): float(value) for key, value in row.items()
                  if key.startswith("eval_")}
        rows.append({"learning_rate": float(row["learning_rate"]), "restart": int(row["restart"]),
                     "scores": scores, "status": row["status"], "warning": row["warning"],
                     "chosen": row["chosen"] == "*"})
    return rows


def _converted(log: Path) -> dict[str, list[int]]:
    """Examples and truncated examples per split, from a run's log."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return {name: [int(count), int(truncated)]
            for name, count, truncated, _ in _CONVERTED.findall(text)}


def job_summary(cache: Cache, job: Job, placeholders: dict[str, str]) -> dict:
    """A job's runs, times and command; `done` false while it has no result."""
    result = cache.result(job)
    summary = {"command": command_text(cache, job, placeholders), "done": result is not None,
               "runs": _runs(result), "seed": job.settings["random_seed"]}
    if result is not None:
        summary.update(seconds=result.get("seconds"), cpu_seconds=result.get("cpu_seconds"),
                       resumed=result.get("resumed", False),
                       majority=result["eval_results"].get("eval_majority_class_accuracy"),
                       examples=_converted(cache.folder(job) / "log.txt"))
    return summary


def collect(plan: paper_tasks.Plan, glue_dir: Path, torch_python: str) -> dict:
    """Everything the results file shows, for every cell of `paper_tasks.CELLS`."""
    placeholders = {str(glue_dir): "$GLUE_DIR", str(plan.model.paths[0]): "$MINILM_DIR",
                    str(plan.cache.root / "data"): "$GLUE_DIR"}
    cells = []
    for cell in plan.cells:
        folder = glue_dir / cell.task
        entry = {"task": cell.task, "bias_correction": cell.bias_correction,
                 "max_seq_length": cell.max_seq_length, "train_subset": cell.train_subset,
                 "data": {name: provenance.sha256(folder / name) for name in sorted(os.listdir(folder))
                          if name.endswith(".tsv")}}
        sweep = plan.sweep(cell)
        entry["sweep"] = job_summary(plan.cache, sweep, placeholders)
        rate = plan.rate(cell)
        if rate is not None:
            entry["rate"] = rate
            ours, peer = plan.seeds(cell, entry["rate"])
            entry["ours"] = job_summary(plan.cache, ours, placeholders)
            entry["pytorch"] = job_summary(plan.cache, peer, placeholders)
        cells.append(entry)
    return {"cells": cells, "machine": provenance.machine(torch_python), "rates": list(paper_tasks.RATES),
            "fixed_rate": plan.fixed_rate,
            "sweep_seed": paper_tasks.SEED, "seeds": paper_tasks.SEEDS}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.paper_tasks_report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue_dir", default=os.environ.get("GLUE_DIR"),
                        help="The GLUE folder the runs read (default: $GLUE_DIR).")
    parser.add_argument("--cache_dir", default=None,
                        help="The runs' cache (default: <BERT_CACHE_DIR>/experiments).")
    parser.add_argument("--output_dir", default="experiments/results",
                        help="Where paper_tasks.json, .md and .png go.")
    parser.add_argument("--torch_python", default=glue_peer.TORCH_PYTHON,
                        help="The torch environment the reference ran in (for its versions).")
    parser.add_argument("--from_json", action="store_true",
                        help="Read nothing but <output_dir>/paper_tasks.json and redraw.")
    paper_tasks.add_reduction_flags(parser)
    args = parser.parse_args(argv)
    paper_tasks.check_reduction_flags(parser, args)
    if not args.from_json and not args.glue_dir:
        parser.error("--glue_dir (or $GLUE_DIR) is required, or --from_json")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    output = Path(args.output_dir)
    try:
        if args.from_json:
            summary = json.loads((output / f"{STEM}.json").read_text(encoding="utf-8"))
        else:
            glue_dir = Path(args.glue_dir).resolve()
            plan = paper_tasks.Plan(glue_dir, minilm_dir(), paper_tasks.cache_for(args.cache_dir),
                                    args.learning_rate, args.tasks)
            summary = collect(plan, glue_dir, args.torch_python)
            write_atomically(output / f"{STEM}.json", json.dumps(summary, indent=1) + "\n")
    except (ValueError, OSError) as error:
        sys.exit(f"python -m experiments.paper_tasks_report: error: {error}")
    for path in paper_tasks_render.render(summary, output, STEM):
        print(f"Wrote {path}")


if __name__ == "__main__":
    main()
