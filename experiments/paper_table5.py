"""The Table 5 page on real GLUE tasks, from the runs of `python -m experiments --table=5`.

    python -m experiments.paper_table5 --table=5 --scale=cpu --glue_dir=../shared/data/glue \\
        --glue_tasks=MRPC,RTE,SST-2 --glue_train_examples=6000 --builtin_tasks=

takes the same flags as the grid that ran (so it finds the same cached
runs; it runs nothing) and writes `paper_tasks_table5.{json,md,png}` and
`paper_tasks_table5_pretraining.png` to `--output_dir`: the grid's table,
what it says about the paper's C2 (bidirectional against left-to-right),
each tool's wall and CPU time, the machine and the data's checksums.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections import defaultdict
from pathlib import Path

from core.atomic import write_atomically
from experiments import __main__ as grid_driver
from experiments import jobs, provenance, report, summary
from experiments.cells import Score

STEM = "paper_tasks_table5"
BIDIRECTIONAL, LEFT_TO_RIGHT, BILSTM = "No NSP", "LTR & No NSP", "+ BiLSTM"
SQUAD_NOTE = ("No SQuAD column: no openly licensed SQuAD-style data is on this machine; the "
              "only real SQuAD examples at hand are the handful in the `allennlp==0.9.0` "
              "wheel's test fixtures, too few to fine-tune or score on.")


def c2_lines(table: summary.TableSummary) -> list[str]:
    """Bidirectional (No NSP) against left-to-right (LTR & No NSP), column by column.

    The two rows differ only in direction (both without NSP), the paper's
    own comparison for C2; a difference counts only beyond the larger of the
    two rows' standard deviations over seeds.
    """
    rows = {row.name: row for row in table.rows}
    lines, verdicts = [], []
    for column in table.columns:
        both = [rows[name].scores.get(column) for name in (BIDIRECTIONAL, LEFT_TO_RIGHT)]
        if not all(isinstance(score, Score) and not math.isnan(score.mean) for score in both):
            lines.append(f"- {column}: not finished yet.")
            continue
        bi, ltr = both
        gap, noise = bi.mean - ltr.mean, max(bi.std, ltr.std)
        verdict = ("bidirectional ahead" if gap > noise else "left-to-right ahead"
                   if -gap > noise else "level within seed noise")
        verdicts.append(verdict)
        paper = rows[BIDIRECTIONAL].paper.get(column), rows[LEFT_TO_RIGHT].paper.get(column)
        paper_text = (f"; the paper: {paper[0] - paper[1]:+.1f}" if None not in paper else "")
        lines.append(f"- {column}: No NSP {bi.mean:.1f} ± {bi.std:.1f}, LTR & No NSP "
                     f"{ltr.mean:.1f} ± {ltr.std:.1f}: {gap:+.1f} points, {verdict} (the "
                     f"larger standard deviation over {bi.count} seeds is {noise:.1f})"
                     f"{paper_text}.")
    if verdicts:
        ahead = verdicts.count("bidirectional ahead")
        lines.append(f"- In all: bidirectional ahead beyond seed noise on {ahead} of "
                     f"{len(verdicts)} task(s), left-to-right on "
                     f"{verdicts.count('left-to-right ahead')}, level on "
                     f"{verdicts.count('level within seed noise')}, at this scale (an L2/H128 "
                     "model pre-trained for 4,900 updates on a few MB of text; the paper's "
                     "claim is for BERT-Base after 1M updates).")
    return lines


def times(results: dict[str, dict], table_jobs: list[jobs.Job]) -> dict[str, tuple]:
    """Wall and CPU seconds summed per tool; CPU time where the cache recorded it (else nan)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for job in table_jobs:
        result = results.get(job.key)
        if result is None:
            continue
        tool = job.tool.split()[-1]
        totals[tool][0] += result.get("seconds", 0.0)
        totals[tool][1] += result.get("cpu_seconds", math.nan)
    return {tool: tuple(values) for tool, values in totals.items()}


def main(argv: list[str]) -> None:
    args = grid_driver.parse_args(argv)
    if args.table != ["5"]:
        raise SystemExit(f"python -m experiments.paper_table5: --table must be 5, got "
                         f"{','.join(args.table)}")
    scale, cache_root, (table,) = grid_driver.build_tables(args)
    cache = jobs.Cache(cache_root)
    table_jobs = grid_driver.schedule.all_jobs(table.jobs)
    results = {job.key: result for job in table_jobs if (result := cache.result(job))}
    # the grid's own command: the page's --output_dir is not one of its settings
    command = "python -m experiments " + shlex.join(
        argument for argument in argv if not argument.startswith("--output_dir"))
    if args.glue_dir:
        command = command.replace(args.glue_dir, "$GLUE_DIR")
    made = summary.summarize(table, results, scale.name, args.seeds, command)
    made.notes.append(SQUAD_NOTE)
    folder = Path(args.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    plots = [folder / f"{STEM}.png", folder / f"{STEM}_pretraining.png"]
    report.save_figure(report.plot(made), plots[0])
    if made.curves:
        report.save_figure(report.plot_pretraining(made), plots[1])
    else:
        plots.pop()
    summary.save(made, folder / f"{STEM}.json")
    glue = Path(args.glue_dir)
    files = [(f"glue/{task}/{name}", provenance.sha256(glue / task / name))
             for task in (args.glue_tasks or "").split(",") if task
             for name in ("train.tsv", "dev.tsv")]
    page = [report.markdown(made, plots).rstrip("\n").replace(
                "# Table 5: Pre-training tasks", "# Table 5 on real tasks: pre-training tasks"),
            "", "## What it shows about C2 (bidirectional vs left-to-right)", "",
            *c2_lines(made), "", "## Time, machine and data", "",
            *provenance.provenance_lines(None, times(results, table_jobs), files,
                                         provenance.machine())]
    write_atomically(folder / f"{STEM}.md", "\n".join(page) + "\n")
    print(f"Wrote {folder / f'{STEM}.md'} ({len(results)} of {len(table_jobs)} runs done)")


if __name__ == "__main__":
    main(sys.argv[1:])
