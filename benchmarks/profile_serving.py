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

`--overhead` instead splits one call's time into what a batch of one pays
whatever the model's size: each way of calling the same encoder is timed in
interleaved rounds in one process (`overhead`), beside the same graph at a
negligible width (the executor's cost of launching its ops) and an empty
function (the cost of one call of a concrete function); `--inter_op=2`
gives the graph a second thread to run independent ops on.

`--checkout` profiles another checkout's model code (e.g. the commit
before a change) with this script, as `serving_speed.py --baseline` times
it. Results go to `benchmarks/results/serving_profile.md`, one section per
`--label`, keeping the file's other sections.

    .venv-bench/bin/python benchmarks/profile_serving.py --label=after
        [--models=minilm,base] [--batches=1] [--int8] [--calls=N] [--checkout=ROOT]
        [--overhead [--inter_op=2]]
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


def overhead_calls(case: dict) -> dict:
    """Zero-argument calls of the encoder at `case["batch"]`, each one way of calling it.

    Runs in the worker process: TensorFlow is set to 2 intra-op threads and
    `inter_op` inter-op threads before anything is built.
    """
    import dataclasses
    import serving_workers

    tf = serving_workers._tensorflow(case.get("inter_op", 1))
    from modeling import BertEncoder, load_encoder
    try:
        from export.numeric import save_numeric
    except ImportError:  # a checkout from before exports had a package of their own
        from tasks.numeric_export import save_numeric

    encoder = load_encoder(case["folder"])
    config = encoder.config
    # The same layers, heads and ops at 4 units a head: what remains is the executor's.
    narrow = BertEncoder(dataclasses.replace(config, hidden_size=4 * config.num_attention_heads,
                                             intermediate_size=16 * config.num_attention_heads))
    arrays = serving_workers.encoder_inputs(case["batch"])
    tensors = [tf.constant(arrays[name], tf.int32) for name in serving_workers.ONNX_INPUTS]
    narrow(dict(zip(("input_ids", "input_mask", "segment_ids"), tensors)), training=False)
    concrete = serving_workers.served_function(encoder)
    xla = serving_workers.served_function(encoder, xla=True)
    narrow_concrete = serving_workers.served_function(narrow)
    polymorphic = tf.function(lambda *inputs: concrete(*inputs), reduce_retracing=True)
    spec = tf.TensorSpec([None, None], tf.int32)
    empty = tf.function(lambda *inputs: inputs, input_signature=[spec] * 3).get_concrete_function()
    with tempfile.TemporaryDirectory(prefix="overhead-") as folder:
        save_numeric(encoder, folder)
        loaded = tf.saved_model.load(folder)
    signature = loaded.signatures["serving_default"]
    names = ("input_ids", "input_mask", "segment_ids")

    def read(outputs) -> None:
        for output in (outputs.values() if isinstance(outputs, dict) else outputs):
            output.numpy()

    return {
        "as served: int64 arrays converted, concrete function, outputs read": lambda: read(
            concrete(*(tf.constant(arrays[name], tf.int32)
                       for name in serving_workers.ONNX_INPUTS))),
        "int32 tensors given": lambda: read(concrete(*tensors)),
        "int32 tensors given, outputs not read": lambda: concrete(*tensors),
        "tf.function(reduce_retracing=True) instead of the concrete function":
            lambda: read(polymorphic(*tensors)),
        "numeric SavedModel signature (keyword inputs, dict outputs)":
            lambda: read(signature(**dict(zip(names, tensors)))),
        "XLA (jit_compile=True)": lambda: read(xla(*tensors)),
        "same graph at 4 units a head (the executor's launches)":
            lambda: read(narrow_concrete(*tensors)),
        "empty concrete function, 3 inputs": lambda: read(empty(*tensors)),
        "3 x tf.constant(int64 array -> int32) alone": lambda: [
            tf.constant(arrays[name], tf.int32) for name in serving_workers.ONNX_INPUTS],
    }, loaded


def overhead(case: dict) -> dict:
    """Median milliseconds per call of each `overhead_calls` variant over interleaved rounds,
    on the clock and in CPU time (every thread of the process; on a busy machine the clock
    also counts the waits for a core)."""
    calls, keep_alive = overhead_calls(case)  # noqa: F841  (the SavedModel's variables)
    for call in calls.values():  # traces and compiles
        call()
        call()
    milliseconds = {name: ([], []) for name in calls}
    for _ in range(case["rounds"]):
        for name, call in calls.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(case["calls"]):
                call()
            for values, begun, now in zip(milliseconds[name], (start, cpu_start),
                                          (time.perf_counter(), time.process_time())):
                values.append((now - begun) * 1e3 / case["calls"])
    return {name: [sorted(values)[len(values) // 2] for values in pair]
            for name, pair in milliseconds.items()}


def overhead_section(label: str, results: dict[str, dict[str, float]]) -> str:
    """One labelled markdown section: each way of calling, its ms per call, its difference."""
    from benchmarks import harness

    info = harness.machine_info()
    lines = [f"## {label}", "", f"Machine: {info['cpu']} ({info['cpu flags']}), "
             f"{info['cores']} cores. Load average after: "
             f"{', '.join(f'{value:.2f}' for value in os.getloadavg())}.", ""]
    for key, result in results.items():
        served = next(iter(result.values()))
        lines += [f"{key}:", "", harness.markdown_table(
            ["way of calling", "ms per call (median)", "minus as served", "CPU ms per call",
             "minus as served"],
            [[name, f"{wall:.2f}", f"{wall - served[0]:+.2f}", f"{cpu:.2f}",
              f"{cpu - served[1]:+.2f}"] for name, (wall, cpu) in result.items()]), ""]
    return "\n".join(lines)


def run_case(case: dict, checkout: str) -> dict:
    """`profile(case)` in a process of its own, with `checkout`'s code first on its path."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [checkout, os.environ.get("PYTHONPATH")])))
    finished = subprocess.run([sys.executable, __file__, f"--case={json.dumps(case)}"],
                              env=environment, cwd=ROOT, stdout=subprocess.PIPE, check=True,
                              text=True)
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    if "ms" in result:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", help="section title, e.g. before / after")
    parser.add_argument("--models", default="minilm", help="comma-separated: minilm, base")
    parser.add_argument("--batches", default="1", help="comma-separated batch sizes")
    parser.add_argument("--int8", action="store_true", help="also profile the int8 model")
    parser.add_argument("--calls", type=int, default=20, help="calls timed and traced")
    parser.add_argument("--checkout", default="",
                        help="root of another checkout whose model code is profiled")
    parser.add_argument("--overhead", action="store_true",
                        help="time the ways of calling the encoder instead (see above)")
    parser.add_argument("--inter_op", type=int, default=1,
                        help="--overhead: threads that run the graph's independent ops")
    parser.add_argument("--rounds", type=int, default=7, help="--overhead: interleaved rounds")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # a worker process's one profile
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.case:
        case = json.loads(args.case)
        print(json.dumps(overhead(case) if case.get("overhead") else profile(case)))
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
    if args.inter_op < 1 or args.rounds < 1:
        parser.error(f"--inter_op and --rounds must be at least 1, got {args.inter_op} and "
                     f"{args.rounds}")
    sys.path.insert(0, str(ROOT))
    from benchmarks import serving_models
    from benchmarks.serving_workers import is_checkout

    if args.checkout and not is_checkout(Path(args.checkout)):
        parser.error(f"--checkout: {args.checkout} is not a checkout of this project")

    folders = {"minilm": serving_models.minilm_dir, "base": serving_models.bert_base}
    checkout = os.path.abspath(args.checkout) if args.checkout else str(ROOT)
    results = {}
    if args.overhead:
        for model in models:
            for batch in batches:
                key = f"{model}, float32, batch {batch}, {args.inter_op} inter-op thread(s)"
                print(f"timing the ways of calling {key} ...", flush=True)
                results[key] = run_case({"folder": str(folders[model]()), "batch": batch,
                                         "calls": args.calls, "rounds": args.rounds,
                                         "inter_op": args.inter_op, "overhead": True}, checkout)
        write_section(args.label, overhead_section(args.label, results))
        return
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
