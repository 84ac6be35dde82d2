"""Where one served encoder call's time goes, by TensorFlow op type, at small batches.

Builds our encoder as `benchmarks/serving_speed.py` times it (one
`tf.function` for any shape, traced as served graphs are, two intra-op
threads and one inter-op thread; `serving_workers.ours_encoder`), on the
same random [batch, 128] token ids, warms it up, times calls untraced,
then records a trace of a few calls with `tf.profiler.experimental` and
sums the op events of the trace (`profile_training_step.read_trace`) by op
type. Op times are summed over threads, so with two threads their sum can
exceed the wall time; the wall time that no op accounts for is the
executor's own: scheduling and launching one kernel after another, which a
batch of one sequence pays as much as a batch of 32.

`--checkout` profiles another checkout's model code (e.g. the commit
before a change) with this script, as `serving_speed.py --baseline` times
it. Results go to `benchmarks/results/serving_profile.md`, one section per
`--label`, keeping the file's other sections.

    .venv-bench/bin/python benchmarks/profile_serving.py --label=after
        [--models=minilm,base] [--batches=1] [--int8] [--calls=N] [--checkout=ROOT]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "serving_profile.md"
TOP = 12  # op types listed per profile


def profile(case: dict) -> dict:
    """Untraced wall time per call, and traced op milliseconds and op counts per call by type.

    Runs in the worker process (`--case`), whose model code is the one on
    its PYTHONPATH.
    """
    import serving_workers
    import tensorflow as tf
    from benchmarks.profile_training_step import read_trace

    call, _ = serving_workers.ours_encoder({"folder": case["folder"], "int8": case["int8"]})
    inputs = serving_workers.encoder_inputs(case["batch"])
    calls = case["calls"]
    for _ in range(3):
        call(inputs)
    start = time.perf_counter()
    for _ in range(calls):
        call(inputs)
    wall = (time.perf_counter() - start) / calls
    with tempfile.TemporaryDirectory(prefix="profile-") as log_dir:
        tf.profiler.experimental.start(log_dir)
        for _ in range(calls):
            call(inputs)
        tf.profiler.experimental.stop()
        totals = read_trace(log_dir)
    milliseconds, counts = collections.Counter(), collections.Counter()
    for (_, op_type), seconds in totals.items():
        milliseconds[op_type] += seconds * 1e3 / calls
        counts[op_type] += 1  # one name per op of the graph
    return {"wall": wall * 1e3, "ms": milliseconds, "counts": counts}


def run_case(case: dict, checkout: str) -> dict:
    """`profile(case)` in a process of its own, with `checkout`'s code first on its path."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [checkout, os.environ.get("PYTHONPATH")])))
    finished = subprocess.run([sys.executable, __file__, f"--case={json.dumps(case)}"],
                              env=environment, cwd=ROOT, stdout=subprocess.PIPE, check=True,
                              text=True)
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["ms"] = collections.Counter(result["ms"])
    return result


def section(label: str, results: dict[str, dict], checkout: str) -> str:
    """One labelled markdown section: wall time, op time and the heaviest op types."""
    from benchmarks import harness

    lines = [f"## {label}", "",
             f"Model code: {'another checkout' if checkout else 'this checkout'}. "
             f"Machine: {harness.machine_info()['cpu']}, {harness.machine_info()['cores']} "
             f"cores. Load average before: "
             f"{', '.join(f'{value:.2f}' for value in os.getloadavg())}.", ""]
    rows = []
    for key, result in results.items():
        ops = sum(result["counts"].values())
        rows.append([key, f"{result['wall']:.1f}", f"{sum(result['ms'].values()):.1f}",
                     str(ops)])
    lines += [harness.markdown_table(["case", "wall ms per call (untraced)",
                                      "sum of op ms per call", "ops per call"], rows), ""]
    for key, result in results.items():
        lines.append(f"- {key}: " + "; ".join(
            f"{op_type} {value:.1f} ms ({result['counts'][op_type]})"
            for op_type, value in result["ms"].most_common(TOP)))
    return "\n".join(lines) + "\n"


def write_section(label: str, text: str, path: Path = RESULTS) -> None:
    """Puts `text` in the results file under `label`, replacing that label's old section."""
    from benchmarks import harness

    intro = "\n\n".join([*(part.strip() for part in __doc__.split("\n\n")[1:3]),
                          "Per op type: milliseconds per call (ops of that type per call)."])
    harness.write_section(path, "Where a served encoder call's time goes", intro, label, text)
    print(path.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", help="section title, e.g. before / after")
    parser.add_argument("--models", default="minilm", help="comma-separated: minilm, base")
    parser.add_argument("--batches", default="1", help="comma-separated batch sizes")
    parser.add_argument("--int8", action="store_true", help="also profile the int8 model")
    parser.add_argument("--calls", type=int, default=20, help="calls timed and traced")
    parser.add_argument("--checkout", default="",
                        help="root of another checkout whose model code is profiled")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # a worker process's one profile
    args = parser.parse_args()
    if args.case:
        print(json.dumps(profile(json.loads(args.case))))
        return
    if not args.label:
        parser.error("--label is required")
    models = [name for name in args.models.split(",") if name]
    if not models or set(models) - {"minilm", "base"}:
        parser.error(f"--models: expected some of minilm, base, got {args.models!r}")
    try:
        batches = [int(value) for value in args.batches.split(",") if value]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        parser.error(f"--batches: expected positive integers, got {args.batches!r}")
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, got {args.calls}")
    sys.path.insert(0, str(ROOT))
    from benchmarks import serving_models
    from benchmarks.serving_workers import is_checkout

    if args.checkout and not is_checkout(Path(args.checkout)):
        parser.error(f"--checkout: {args.checkout} is not a checkout of this project")

    folders = {"minilm": serving_models.minilm_dir, "base": serving_models.bert_base}
    checkout = os.path.abspath(args.checkout) if args.checkout else str(ROOT)
    results = {}
    for model in models:
        for int8 in (False, True) if args.int8 else (False,):
            for batch in batches:
                key = f"{model}, {'int8' if int8 else 'float32'}, batch {batch}"
                print(f"profiling {key} ...", flush=True)
                results[key] = run_case({"folder": str(folders[model]()), "int8": int8,
                                         "batch": batch, "calls": args.calls}, checkout)
    write_section(args.label, section(args.label, results, args.checkout))


if __name__ == "__main__":
    main()
