"""Where our training step spends its time, by class of op, from a TensorFlow profiler trace.

Builds the pre-training (MLM + NSP) and fine-tuning (2-class classifier)
steps exactly as `benchmarks/training_speed.py` times them (the runners'
`training.loop.TrainingLoop` with the original AdamW, one CPU device, float32),
warms them up, then records a trace of a few steps with
`tf.profiler.experimental` and reads the op events out of the trace's XSpace
protobuf. Each TensorFlow op's time goes to one class:

- optimizer update: everything under the optimizer's name scope (moments, the
  step, assignments, global-norm clipping);
- softmax / LayerNorm: softmax ops and everything in a LayerNorm layer;
- gathers: embedding lookups, `take_along_axis`, their gradients (scatters,
  segment sums) and dense conversions of IndexedSlices;
- attention: ops of the attention layer other than its 2-D projections
  (score and context batch-matmuls, transposes, the mask);
- matmuls: the remaining matrix products (projections, feed-forward, heads and
  their gradients);
- XLA fusions: loops XLA fused (with `--jit_compile`: element-wise work,
  softmax, LayerNorm, dropout's random numbers and the optimizer update, not
  told apart; without it: the compiled GELU and per-variable optimizer
  update); XLA's matrix products, gathers and scatters still count as
  matmuls and gathers, its other instructions (copies, concatenations,
  reductions) as everything else;
- XLA-compiled code: XLA computations whose instructions were not traced;
- everything else (element-wise, reductions, casts, copies).

Times are summed over the ops (ops running at the same time on different
threads both count), per step. Results go to `benchmarks/results/training_step_profile.md`,
one section per `--label` (e.g. "before" and "after" a change), keeping the
file's other sections.

    .venv/bin/python benchmarks/profile_training_step.py --label=after
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Trace events per HLO instruction inside XLA computations.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_cpu_enable_xprof_traceme=true").strip()
ROOT = Path(__file__).resolve().parents[1]
# This checkout's code, not the one installed in the environment: profiling a
# "before" checkout beside the installed one must time the "before" code.
sys.path.insert(0, str(ROOT))

from benchmarks import harness, training_speed  # noqa: E402

CLASSES = ("matmuls", "attention", "softmax / LayerNorm", "optimizer update", "gathers",
           "XLA fusions", "XLA-compiled code", "everything else")
# Op types by the class they count in (scopes decide the optimizer and attention).
_OP_TYPES = {
    "matmul": re.compile(r"MatMul|Einsum|Conv"),
    "gather": re.compile(r"Gather|Scatter|SegmentSum|Unique|IndexedSlices|TakeAlong"),
    "softmax": re.compile(r"Softmax"),
}
# An op event is "scope/name:OpType"; executor and host events in the same
# trace lines are not ops.
_OP_EVENT = re.compile(r"^[\w./-]+:\w+$")
_HLO_EVENT = re.compile(r"^[\w.-]+$")
# A call instruction's event encloses its callee's, which are counted.
_HLO_CALL = re.compile(r"^call(\.\d+)?$")
_NOT_OPS = {"Process", "Start", "Done"}
_OPTIMIZER = re.compile(r"(^|/)(bert_adam_w|lamb|global_norm|clip_by_global_norm)(_\d+)?/")
_ATTENTION = re.compile(r"/attention(_\d+)?/")
RESULTS = harness.RESULTS_DIR / "training_step_profile.md"


def op_class(name: str, op_type: str) -> str:
    """The class of one TensorFlow op, from its full name (scopes) and type."""
    lowered = name.lower()
    if op_type == "XLA":
        return "XLA-compiled code"
    if op_type == "HLO":
        if lowered.startswith(("matmul", "dot", "convolution")):
            return "matmuls"
        if "gather" in lowered or "scatter" in lowered:
            return "gathers"
        return "XLA fusions" if "fusion" in lowered else "everything else"
    if _OPTIMIZER.search(lowered):
        return "optimizer update"
    if _OP_TYPES["softmax"].search(op_type) or "layernorm" in lowered:
        return "softmax / LayerNorm"
    if _OP_TYPES["gather"].search(op_type):
        return "gathers"
    in_attention = bool(_ATTENTION.search(lowered))
    if _OP_TYPES["matmul"].search(op_type) and not (in_attention and "Batch" in op_type):
        return "matmuls" if not (in_attention and "einsum" in op_type.lower()) else "attention"
    if in_attention:
        return "attention"
    return "everything else"


def read_trace(log_dir: str) -> collections.Counter:
    """Seconds per (op name, op type) summed over the trace's op events.

    TensorFlow ops are "scope/name:OpType" events. XLA computations are one
    "CpuExecutable" event each, and with `--xla_cpu_enable_xprof_traceme`
    (set by `main`) also one event per HLO instruction on the worker threads
    (type "HLO"); where those are present they replace the enclosing event.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals: collections.Counter = collections.Counter()
    executables = 0.0
    for path in glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb")):
        space = xplane_pb2.XSpace()
        space.ParseFromString(Path(path).read_bytes())
        for plane in space.planes:
            names = {key: value.name for key, value in plane.event_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    name = names.get(event.metadata_id, "")
                    seconds = event.duration_ps * 1e-12
                    if name.startswith("CpuExecutable"):
                        executables += seconds
                    elif "Eigen" in line.name and _HLO_EVENT.match(name) \
                            and not _HLO_CALL.match(name):
                        totals[(name, "HLO")] += seconds
                    elif _OP_EVENT.match(name) and name.rpartition(":")[2] not in _NOT_OPS:
                        op_name, _, op_type = name.rpartition(":")
                        totals[(op_name, op_type)] += seconds
    if executables and not any(op_type == "HLO" for _, op_type in totals):
        totals[("CpuExecutable", "XLA")] += executables
    return totals


def profile(case_name: str, jit_compile: bool, steps: int, precision: str = "float32") -> dict:
    """Per-class op seconds per step and the traced steps' wall time per step."""
    import tensorflow as tf

    run = training_speed.ours(training_speed.CASES[case_name], precision, jit_compile)
    run(1)
    run(steps)  # warm-up: tracing, compilation, allocations
    start = time.perf_counter()
    run(steps)
    untraced = (time.perf_counter() - start) / steps
    with tempfile.TemporaryDirectory(prefix="profile-") as log_dir:
        tf.profiler.experimental.start(log_dir)
        run(steps)
        tf.profiler.experimental.stop()
        totals = read_trace(log_dir)
    classes = collections.Counter()
    for (name, op_type), seconds in totals.items():
        classes[op_class(name, op_type)] += seconds / steps
    by_type = collections.Counter()
    for (name, op_type), seconds in totals.items():
        by_type[re.sub(r"\.\d+$", "", name) if op_type == "HLO" else op_type] += seconds / steps
    heaviest = by_type.most_common(10)
    return {"classes": classes, "wall": untraced, "heaviest": heaviest}


def section(label: str, results: dict[str, dict]) -> str:
    """One labelled markdown section: per-class milliseconds per step for every profile."""
    header = ["op class"] + list(results)
    rows = []
    for name in CLASSES:
        row = [name]
        for result in results.values():
            total = sum(result["classes"].values())
            value = result["classes"].get(name, 0.0)
            row.append(f"{value * 1e3:.0f} ms ({value / total:.0%})" if total else "-")
        rows.append(row)
    rows.append(["sum of op times"] + [f"{sum(r['classes'].values()) * 1e3:.0f} ms"
                                       if r["classes"] else "-" for r in results.values()])
    rows.append(["step wall time (untraced)"] + [f"{r['wall'] * 1e3:.0f} ms"
                                                 for r in results.values()])
    machine = harness.machine_info()
    lines = [f"## {label}", "", f"Machine: {machine['cpu']}, {machine['cores']} cores. "
             f"Load average before: "
             f"{', '.join(f'{value:.2f}' for value in os.getloadavg())}.", "",
             harness.markdown_table(header, rows), "", "Heaviest op types (XLA: instruction kinds) per step:", ""]
    for key, result in results.items():
        if result["classes"]:
            lines.append(f"- {key}: " + "; ".join(f"{name} {seconds * 1e3:.0f} ms"
                                                   for name, seconds in result["heaviest"]))
    return "\n".join(lines) + "\n"


def write_section(label: str, text: str, path: Path = RESULTS) -> None:
    """Puts `text` in the results file under `label`, replacing that label's old section."""
    harness.write_section(path, "Where the training step's time goes",
                          "\n\n".join(part.strip() for part in __doc__.split("\n\n")[1:4]),
                          label, text)
    print(path.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="section title, e.g. before / after")
    parser.add_argument("--cases", default="pretrain_small,finetune_minilm_64",
                        help="comma-separated cases of benchmarks/training_speed.py")
    parser.add_argument("--steps", type=int, default=3, help="steps traced per profile")
    parser.add_argument("--precision", choices=training_speed.PRECISIONS, default="float32",
                        help="the step's compute precision")
    parser.add_argument("--xla", choices=("both", "no", "yes"), default="both",
                        help="profile without XLA, with it, or both")
    args = parser.parse_args()
    cases = [name for name in args.cases.split(",") if name]
    unknown = [name for name in cases if name not in training_speed.CASES]
    if unknown or not cases:
        parser.error(f"--cases: unknown case(s) {', '.join(unknown) or '(none)'}")
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    modes = {"both": (False, True), "no": (False,), "yes": (True,)}[args.xla]
    results = {}
    for case_name in cases:
        for jit_compile in modes:
            key = f"{case_name}, {'XLA' if jit_compile else 'no XLA'}"
            if args.precision != "float32":
                key += f", {args.precision}"
            print(f"profiling {key} ...", flush=True)
            results[key] = profile(case_name, jit_compile, args.steps, args.precision)
    write_section(args.label, section(args.label, results))


if __name__ == "__main__":
    main()
