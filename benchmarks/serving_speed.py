"""Serving speed side by side: ours against ONNX Runtime and Hugging Face PyTorch, on CPU.

Three measures, every system in its own process
(`benchmarks/serving_workers.py`), built one after the other, then timed in
interleaved rounds (A B C A B C ...) so that load from other work on the
machine falls on every system alike; each system's median round counts.
(1) Encoder throughput at batch 1 and 32, sequence length 128, on the same
random token ids: the real MiniLM (L6/H384) and a BERT-Base-size model
(L12/H768, random weights). (2) End-to-end latency from one raw sentence to
its label, on the fine-tuned MiniLM sentiment classifiers, over the same
dev-set sentences in every system. (3) Each system's accuracy on that dev
set (Pang & Lee's 1,000 sentences, or with `--glue_dir` GLUE SST-2's 872).

Systems: ours, every way the TensorFlow family can serve the encoder
(`benchmarks/serving_paths.py`): `load_encoder` through one `tf.function`
for any batch and length, traced as served graphs are
(`network.layers.fast_paths.serving`), plain, with XLA (also with XLA's
products on oneDNN, and with XLA's XNNPACK graph fusion) and with oneDNN
off; the numeric SavedModel (`export.numeric`) loaded back, plain and
under XLA; bfloat16 where the CPU has it; LiteRT (`ai_edge_litert`,
XNNPACK) on the product's TFLite conversion; in int8, `model.quantize("int8")`
(oneDNN's int8 kernel; under XLA an int8 dot), the int8 numeric SavedModel
under XLA and LiteRT's dynamic-range int8. A summary column is the best of
its paths and names the one that won. End to end, our SavedModel on strings
as `run_classifier.py` exports it (`export.serving.export_classifier`), which
packs to the fine-tuning's 64 tokens and runs the model at the longest row's
length, and one LiteRT model on strings (tensorflow-text's tokenizer kernel,
then the classifier). ONNX Runtime on the Hugging Face folder exported by
`torch.onnx.export` (eager attention), fused by
`onnxruntime.transformers.optimizer`, in float32 and with
`quantize_dynamic(..., QInt8)`; end to end behind Hugging Face's
`tokenizers`, one sentence at its own length. Hugging Face transformers'
PyTorch `BertModel` / `BertForSequenceClassification` with
`BertTokenizerFast`. With `--glue_dir`, every end-to-end system serves our
MiniLM fine-tuned on GLUE SST-2 (the peers its Hugging Face export);
otherwise ours serves our fine-tuning (`run_classifier.py`) and the peers
Hugging Face PyTorch's, of the same MiniLM with the same recipe on Pang &
Lee's sentences (`benchmarks/sentiment_real_check.py`).

Two threads each: TensorFlow with two intra-op threads and one inter-op
thread (its default, one per core, would run two ops at once); ONNX Runtime
with two intra-op threads and one inter-op thread, with its threads spinning
while they wait (its default) and without (the better counts: on a machine
that other work shares, a spinning thread holds a core that the thread it
waits for needs); PyTorch with `torch.set_num_threads(2)` and
`OMP_WAIT_POLICY=PASSIVE`.

The machine's CPU model and the instruction sets that decide the fastest
path (AVX-512, VNNI, bfloat16, AMX) are recorded with the figures, and the
1-minute load average after every round: on a shared machine, read the
ratios of systems timed in the same rounds.

    make bench   (or: .venv-bench/bin/python benchmarks/serving_speed.py
                  [--models=minilm,base] [--rounds=N] [--parts=encoder,latency,accuracy]
                  [--systems=ours,ort,...] [--batches=1,32] [--baseline=CHECKOUT]
                  [--glue_dir=../shared/data/glue])
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

from benchmarks import harness  # noqa: E402
from benchmarks.serving_workers import is_checkout  # noqa: E402

MODELS = {"minilm": "MiniLM L6/H384", "base": "BERT-Base size L12/H768"}
PARTS = ("encoder", "latency", "accuracy")
BATCHES = (1, 32)
ROUND_SECONDS = 1.5  # a round's length (at least one call)
LATENCY_CALLS = 40  # sentences per latency round


class System(NamedTuple):
    """One row of the measurements: which system, in which precision and setting."""

    label: str
    system: str  # the worker's builder (`serving_workers.BUILDERS`)
    setting: str = ""  # what sets it apart within its summary column (the path that won)
    int8: bool = False
    xla: bool = False
    spin: bool = True  # ONNX Runtime's threads spin while they wait (its default)
    onednn: bool = True  # TensorFlow's oneDNN kernels (TF_ENABLE_ONEDNN_OPTS)
    xla_flags: str = ""  # XLA_FLAGS for its process: how XLA compiles for the CPU


# XLA's CPU compiler sending its products to oneDNN, or whole subgraphs to XNNPACK.
XLA_ONEDNN = "--xla_cpu_use_onednn=true"
XLA_XNNPACK = "--xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY"
# A summary column is the best of its systems.
SYSTEMS = {
    "ours": System("ours float32", "ours", "load_encoder"),
    "ours_xla": System("ours float32 + XLA", "ours", "load_encoder + XLA", xla=True),
    "ours_xla_onednn": System("ours float32 + XLA, oneDNN dots", "ours",
                              "load_encoder + XLA with oneDNN", xla=True,
                              xla_flags=XLA_ONEDNN),
    "ours_xla_xnn": System("ours float32 + XLA, XNNPACK graph fusion", "ours",
                           "load_encoder + XLA with XNNPACK", xla=True, xla_flags=XLA_XNNPACK),
    "ours_eigen": System("ours float32, oneDNN off", "ours", "oneDNN off", onednn=False),
    "ours_saved": System("ours numeric SavedModel", "ours_saved", "numeric SavedModel"),
    "ours_saved_xla": System("ours numeric SavedModel + XLA", "ours_saved",
                             "numeric SavedModel + XLA", xla=True),
    "ours_bf16": System("ours bfloat16", "ours_bf16", "bfloat16"),
    "ours_bf16_xla": System("ours bfloat16 + XLA", "ours_bf16", "bfloat16 + XLA", xla=True),
    "litert": System("LiteRT float32 (XNNPACK)", "litert", "LiteRT"),
    "ours_int8": System("ours int8", "ours", "load_encoder", int8=True),
    "ours_int8_xla": System("ours int8 + XLA", "ours", "load_encoder + XLA", int8=True,
                            xla=True),
    "ours_saved_int8_xla": System("ours numeric SavedModel int8 + XLA", "ours_saved",
                                  "numeric SavedModel + XLA", int8=True, xla=True),
    "litert_int8": System("LiteRT dynamic-range int8 (XNNPACK)", "litert", "LiteRT",
                          int8=True),
    "ort": System("ORT fused", "ort"),
    "ort_nospin": System("ORT fused, no spinning", "ort", "no spinning", spin=False),
    "ort_int8": System("ORT fused + int8", "ort", int8=True),
    "ort_int8_nospin": System("ORT fused + int8, no spinning", "ort", "no spinning", int8=True,
                              spin=False),
    "hf_torch": System("HF PyTorch", "hf_torch"),
    # With --baseline: our float32 encoder from another checkout, in the same rounds.
    "baseline": System("ours float32, baseline checkout", "ours"),
    "baseline_xla": System("ours float32 + XLA, baseline checkout", "ours", "XLA", xla=True),
}
# Our float32 (and bfloat16) paths, then our int8 paths: each summary column's candidates.
OURS_FLOAT = ("ours", "ours_xla", "ours_xla_onednn", "ours_xla_xnn", "ours_eigen", "ours_saved",
              "ours_saved_xla", "ours_bf16", "ours_bf16_xla", "litert")
OURS_INT8 = ("ours_int8", "ours_int8_xla", "ours_saved_int8_xla", "litert_int8")
ENCODER_SYSTEMS = (*OURS_FLOAT, *OURS_INT8, "ort", "ort_nospin", "ort_int8", "ort_int8_nospin",
                   "hf_torch")
COLUMNS = {"ours float32": OURS_FLOAT, "ours int8": OURS_INT8,
           "ORT fused": ("ort", "ort_nospin"), "ORT fused+int8": ("ort_int8", "ort_int8_nospin"),
           "HF PyTorch": ("hf_torch",)}
RATIOS = (("ours float32", "ORT fused"), ("ours int8", "ORT fused+int8"))
TEXT_SYSTEMS = ("ours", "ours_int8", "litert", "litert_int8", "ort", "ort_nospin", "ort_int8",
                "ort_int8_nospin", "hf_torch")
# Systems that differ from another only in how they run: their accuracy is that one's.
ACCURACY_SYSTEMS = ("ours", "ours_int8", "litert", "litert_int8", "ort", "ort_int8", "hf_torch")
UNAVAILABLE = "not available in this build"
# A summary cell with none of its column's systems timed (not asked for, or unavailable).
NOT_MEASURED = "not measured"


# ----------------------------------------------------------------------------- pure logic

def parse_choices(text: str, allowed: Sequence[str], flag: str) -> list[str]:
    """A comma-separated list of some of `allowed`, in the order given; else ValueError."""
    chosen = [item for item in text.split(",") if item]
    unknown = [item for item in chosen if item not in allowed]
    if unknown or not chosen:
        raise ValueError(f"--{flag}: unknown value(s) {', '.join(unknown) or '(none)'}; "
                         f"expected some of {', '.join(allowed)}")
    return chosen


def calls_for(per_call: float, seconds: float = ROUND_SECONDS) -> int:
    """How many calls make a round of about `seconds` (at least one)."""
    return max(1, round(seconds / per_call))


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` in (0, 1]) of the values."""
    if not values or not 0 < share <= 1:
        raise ValueError(f"need values and a share in (0, 1], got {len(values)} values, {share}")
    ordered = sorted(values)
    return ordered[math.ceil(share * len(ordered)) - 1]


def best(rates: dict[str, float], systems: Sequence[str]) -> tuple[str, float] | None:
    """The fastest of `systems` among those measured (absent = unavailable)."""
    measured = [(rates[name], name) for name in systems if name in rates]
    if not measured:
        return None
    rate, name = max(measured)
    return name, rate


def summary_rows(rates: dict[tuple[str, int], dict[str, float]],
                 loads: dict[tuple[str, int], list[float]] | None = None) -> list[list[str]]:
    """One row per (model, batch): each column's best rate, then ours / ORT, then the median
    1-minute load average over the rounds (when `loads` is given)."""
    rows = []
    for (model, batch), by_system in rates.items():
        cells, values = [f"{MODELS[model]}, batch {batch}"], {}
        for column, systems in COLUMNS.items():
            found = best(by_system, systems)
            if found is None:
                cells.append(NOT_MEASURED)
                continue
            name, values[column] = found
            suffix = f" ({SYSTEMS[name].setting})" if SYSTEMS[name].setting else ""
            cells.append(f"{values[column]:.1f}{suffix}")
        for ours, peer in RATIOS:
            cells.append(f"{values[ours] / values[peer]:.2f}x"
                         if ours in values and peer in values else "-")
        if loads is not None:
            cells.append(f"{harness.median(loads[model, batch]):.1f}")
        rows.append(cells)
    return rows


def summary_table(rates: dict[tuple[str, int], dict[str, float]],
                  loads: dict[tuple[str, int], list[float]] | None = None) -> str:
    header = ["model, batch", *COLUMNS, *(f"{ours} / {peer}" for ours, peer in RATIOS)]
    if loads is not None:
        header.append("load average (1 min)")
    return harness.markdown_table(header, summary_rows(rates, loads))


def latency_table(latencies: dict[str, list[float] | None]) -> str:
    """Median and 90th percentile of each system's per-sentence latency, in ms."""
    rows = []
    for name, seconds in latencies.items():
        if seconds is None:
            rows.append([SYSTEMS[name].label, UNAVAILABLE, "-", "-"])
            continue
        rows.append([SYSTEMS[name].label, f"{harness.median(seconds) * 1e3:.2f}",
                     f"{percentile(seconds, 0.9) * 1e3:.2f}", str(len(seconds))])
    return harness.markdown_table(["system", "median ms", "90th percentile ms", "sentences"],
                                  rows)


def accuracy_table(accuracies: dict[str, float | None], reported: dict[str, float],
                   peer_trainer: str = "Hugging Face PyTorch") -> str:
    """Dev accuracy as each system serves it, beside what its fine-tuning reported.

    `reported` holds "ours" and "hf_torch", the fine-tuning the peers serve
    (`peer_trainer` names it)."""
    from benchmarks.serving_workers import PEERS

    rows = []
    for name, accuracy in accuracies.items():
        trained_by = "hf_torch" if SYSTEMS[name].system in PEERS else "ours"
        served = UNAVAILABLE if accuracy is None else f"{100 * accuracy:.1f}"
        rows.append([SYSTEMS[name].label, "ours" if trained_by == "ours" else peer_trainer,
                     served, f"{100 * reported[trained_by]:.1f}"])
    return harness.markdown_table(["system", "fine-tuned by", "dev accuracy (%)",
                                   "fine-tuning's own dev accuracy (%)"], rows)


def measurements_table(seconds: dict[tuple[str, int, str], list[float]],
                       cpu_seconds: dict[tuple[str, int, str], list[float]]) -> str:
    """Every encoder timing: median, range over rounds, ms per call on the clock and in CPU."""
    rows = []
    for key, values in seconds.items():
        model, batch, name = key
        result = harness.Result(SYSTEMS[name].label, batch, tuple(values))
        slowest, fastest = result.throughput_range
        rows.append([f"{MODELS[model]}, batch {batch}", result.label,
                     f"{result.throughput:.1f}", f"{slowest:.1f} - {fastest:.1f}",
                     f"{result.median_seconds * 1e3:.1f}",
                     f"{harness.median(cpu_seconds[key]) * 1e3:.1f}", str(len(values))])
    return harness.markdown_table(["model, batch", "system", "sequences/s (median)",
                                   "range over rounds", "ms per call", "CPU ms per call",
                                   "rounds"], rows)


def baseline_table(rates: dict[tuple[str, int], dict[str, float]]) -> str:
    """This checkout's float32 encoder against the baseline checkout's, each at its better of
    plain and XLA."""
    rows = []
    for (model, batch), by_system in rates.items():
        ours, before = best(by_system, ("ours", "ours_xla")), best(
            by_system, ("baseline", "baseline_xla"))
        if ours is None or before is None:
            continue
        rows.append([f"{MODELS[model]}, batch {batch}", f"{before[1]:.1f}", f"{ours[1]:.1f}",
                     f"{ours[1] / before[1]:.2f}x"])
    return harness.markdown_table(["model, batch", "baseline checkout", "this checkout",
                                   "this / baseline"], rows)


def rates_from(seconds: dict[tuple[str, int, str], list[float]]
               ) -> dict[tuple[str, int], dict[str, float]]:
    """Sequences per second at each system's median round, by (model, batch)."""
    rates: dict[tuple[str, int], dict[str, float]] = {}
    for (model, batch, name), values in seconds.items():
        rates.setdefault((model, batch), {})[name] = batch / harness.median(values)
    return rates


def command_line(argv: Sequence[str], executable: str, root: Path = ROOT) -> str:
    """The command as run, with no machine paths: paths inside the repository relative to
    it, a flag's folder outside it as a variable named after the flag (`--glue_dir=$GLUE_DIR`).
    """
    def shown(path: str) -> str:
        absolute = os.path.abspath(path)
        inside = absolute.startswith(str(root) + os.sep)
        return os.path.relpath(absolute, root) if inside else Path(path).name

    def flag(word: str) -> str:
        name, _, value = word.partition("=")
        if not (name.startswith("--") and os.path.isabs(value)):
            return shlex.quote(word)
        if os.path.abspath(value).startswith(str(root) + os.sep):
            return shlex.quote(f"{name}={shown(value)}")
        return f"{shlex.quote(name)}=${name[2:].upper()}"

    words = [shlex.quote(shown(executable)), shlex.quote(shown(argv[0])),
             *map(flag, argv[1:])]
    return " ".join(words)


# ----------------------------------------------------------------------------- workers

class Worker(harness.WorkerProcess):
    """One system's process (ours: `benchmarks/serving_paths.py`, the peers:
    `benchmarks/serving_workers.py`); `ask` sends one request."""

    def __init__(self, name: str, spec: dict, log_dir: Path):
        from benchmarks import serving_models
        from benchmarks.serving_workers import PEERS

        setup = SYSTEMS[name]
        spec = dict(spec, system=setup.system, int8=setup.int8, xla=setup.xla,
                    spin=setup.spin)
        script = serving_models.WORKERS if setup.system in PEERS else serving_models.OUR_WORKERS
        if setup.system not in PEERS:
            python = Path(sys.executable)
            # This checkout's code (or the baseline's), whatever the environment has installed.
            root = spec.pop("root", str(ROOT))
            environment = dict(os.environ, OMP_WAIT_POLICY="PASSIVE",
                               TF_ENABLE_ONEDNN_OPTS="1" if setup.onednn else "0",
                               XLA_FLAGS=" ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                                setup.xla_flags])),
                               PYTHONPATH=os.pathsep.join(
                                   filter(None, [root, os.environ.get("PYTHONPATH")])))
        else:
            python, environment = serving_models.ref_python(), serving_models.ref_environment()
        super().__init__(name, [str(python), str(script), f"--worker={json.dumps(spec)}"],
                         log_dir / f"{spec['kind']}-{name}.log", environment, ROOT)
        self.ready = self.receive()
        print(f"  {setup.label}: " + ("ready" if self.ready["available"]
                                      else f"{UNAVAILABLE} ({self.ready['note']})"), flush=True)

    def ask(self, request: dict) -> dict:
        return self.request(json.dumps(request))


def start_workers(names: Sequence[str], spec: dict, log_dir: Path,
                  notes: dict[str, str]) -> dict[str, Worker]:
    """Starts the systems one after another (building in parallel would slow each);
    those unavailable in this build are noted and closed. `spec["baseline"]` is the
    baseline checkout's root, for the baseline systems."""
    workers = {}
    for name in names:
        own = dict(spec)
        baseline = own.pop("baseline", None)
        if name.startswith("baseline"):
            own["root"] = baseline
        worker = Worker(name, own, log_dir)
        if worker.ready["note"]:
            notes[f"{SYSTEMS[name].label} ({spec['kind']})"] = worker.ready["note"]
        if worker.ready["available"]:
            workers[name] = worker
        else:
            worker.close()
    return workers


def measure_encoders(model: str, folder: Path, onnx: Path, rounds: int, log_dir: Path,
                     notes: dict[str, str], baseline: str | None = None,
                     systems: Sequence[str] = ENCODER_SYSTEMS, batches: Sequence[int] = BATCHES
                     ) -> tuple[dict[tuple[str, int, str], list[float]],
                                dict[tuple[str, int, str], list[float]],
                                dict[tuple[str, int], list[float]]]:
    """Seconds per call of every available system at each batch, one entry per round, on
    the clock and in CPU time; and the 1-minute load average after each round."""
    print(f"{MODELS[model]}: encoder throughput", flush=True)
    names = tuple(systems) + (tuple(name for name in ("baseline", "baseline_xla")
                                    if name.replace("baseline", "ours") in systems)
                              if baseline else ())
    workers = start_workers(names, {"kind": "encoder", "folder": str(folder),
                                    "onnx": str(onnx), "baseline": baseline}, log_dir, notes)
    seconds: dict[tuple[str, int, str], list[float]] = {}
    cpu_seconds: dict[tuple[str, int, str], list[float]] = {}
    loads: dict[tuple[str, int], list[float]] = {}
    try:
        for index in range(rounds):
            for batch in batches:
                for name, worker in workers.items():
                    calls = calls_for(worker.ready["per_call"][str(batch)])
                    answer = worker.ask({"batch": batch, "calls": calls})
                    seconds.setdefault((model, batch, name), []).append(
                        answer["seconds"] / calls)
                    cpu_seconds.setdefault((model, batch, name), []).append(
                        answer["cpu_seconds"] / calls)
                loads.setdefault((model, batch), []).append(os.getloadavg()[0])
                print(f"  round {index + 1}/{rounds}, batch {batch}: " + ", ".join(
                    f"{name} {batch / seconds[model, batch, name][-1]:.1f}/s"
                    for name in workers), flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return seconds, cpu_seconds, loads


def measure_text(parts: Sequence[str], rounds: int, log_dir: Path, notes: dict[str, str],
                 baseline: str | None = None, glue_dir: Path | None = None) -> tuple:
    """Per-sentence latencies (interleaved rounds) and dev accuracy of every text system,
    the models served (`serving_models.TextModels`) and the 1-minute load at each round."""
    from benchmarks import serving_models
    from benchmarks.sentiment_real_check import LENGTH
    from benchmarks.serving_workers import PEERS

    models = serving_models.text_models(glue_dir)
    print("fine-tuned MiniLM sentiment classifiers: latency and accuracy", flush=True)
    names = TEXT_SYSTEMS + (("baseline",) if baseline else ())
    latencies: dict[str, list[float] | None] = {name: None for name in names}
    accuracies: dict[str, float | None] = {name: None for name in ACCURACY_SYSTEMS}
    workers, loads = {}, []
    try:
        for name in names:
            folder = models.peers if SYSTEMS[name].system in PEERS else models.ours
            workers.update(start_workers([name], {
                "kind": "text", "folder": str(folder), "onnx": str(models.onnx),
                "length": LENGTH, "dev": str(models.dev), "baseline": baseline}, log_dir, notes))
        if "latency" in parts:
            for index in range(rounds):
                for name, worker in workers.items():
                    answer = worker.ask({"op": "latency", "start": index * LATENCY_CALLS,
                                         "calls": LATENCY_CALLS})
                    latencies[name] = (latencies[name] or []) + answer["seconds"]
                loads.append(os.getloadavg()[0])
                print(f"  round {index + 1}/{rounds}: " + ", ".join(
                    f"{name} {harness.median(latencies[name]) * 1e3:.1f} ms"
                    for name in workers), flush=True)
        if "accuracy" in parts:
            for name, worker in workers.items():
                if name not in ACCURACY_SYSTEMS:
                    continue
                accuracies[name] = worker.ask({"op": "accuracy"})["accuracy"]
                print(f"  {name}: dev accuracy {accuracies[name]:.4f}", flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return latencies, accuracies, models, loads


# ----------------------------------------------------------------------------- report

def versions() -> dict[str, str]:
    """Our libraries here, the peers' in the torch environment."""
    from benchmarks import serving_models

    info = {key: value for key, value in harness.machine_info(
        ["tensorflow", "tensorflow-text", "keras"]).items()}
    packages = ("torch", "transformers", "onnxruntime", "onnx", "tokenizers")
    script = ("import json; from importlib import metadata; print(json.dumps("
              f"{{p: metadata.version(p) for p in {packages!r}}}))")
    try:
        found = json.loads(subprocess.run([str(serving_models.ref_python()), "-c", script],
                                          capture_output=True, text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError):
        found = {package: "not installed" for package in packages}
    info.update({f"{package} (torch environment)": version for package, version in found.items()})
    return info


def report(results: dict, info: dict[str, str]) -> str:
    """The markdown results file."""
    paragraphs = __doc__.split("\n\n")
    parts = ["# Serving speed on CPU: ours, ONNX Runtime, Hugging Face PyTorch", "",
             *(paragraph.strip() + "\n" for paragraph in paragraphs[1:5]), "## Machine", ""]
    parts += [f"- {key}: {value}" for key, value in info.items()]
    if results.get("encoder"):
        parts += ["", "## Encoder throughput (sequences/s, sequence length 128)", "",
                  "The best of each column's systems (the path that won in brackets); the "
                  "ratios divide ours by ONNX Runtime in the same precision; the load "
                  "average is the median over the rounds, read after each.", "",
                  summary_table(rates_from(results["encoder"]), results.get("encoder_load"))]
    if results.get("latency"):
        parts += ["", "## End-to-end latency: one raw sentence to its label (batch 1)", "",
                  latency_table(results["latency"])]
        if results.get("latency_load"):
            loads = results["latency_load"]
            parts += ["", f"Load average (1 min) over the rounds: median "
                      f"{harness.median(loads):.1f}, {min(loads):.1f} - {max(loads):.1f}."]
        if results.get("baseline"):
            parts += ["", f"The baseline checkout ({results['baseline']}) exports the "
                      "classifier with its own code."]
    if results.get("accuracy"):
        parts += ["", f"## Accuracy on {results.get('dev', 'the dev set')}", "",
                  accuracy_table(results["accuracy"], results["reported"],
                                 results.get("peer_trainer", "Hugging Face PyTorch"))]
    if results.get("baseline") and results.get("encoder"):
        parts += ["", "## This checkout against the baseline checkout", "",
                  f"Our float32 encoder from {results['baseline']}, in the same rounds "
                  "(sequences/s, the better of plain and XLA).", "",
                  baseline_table(rates_from(results["encoder"]))]
    if results.get("encoder"):
        parts += ["", "## Every encoder measurement", "",
                  "CPU ms per call counts every thread of the system's process, so a thread "
                  "that spins while it waits counts too.", "",
                  measurements_table(results["encoder"], results["encoder_cpu"])]
    if results.get("notes"):
        parts += ["", "## Notes", ""] + [f"- {key}: {value}"
                                         for key, value in results["notes"].items()]
    return "\n".join(parts) + "\n"


def _measure_encoder_part(results: dict, models: list[str], args: argparse.Namespace,
                          logs: Path, systems: list[str], batches: list[int]) -> None:
    """The encoder part: every system on each model, beside ONNX Runtime, into `results`."""
    from benchmarks import serving_models
    from data_prep.corpora.assets import minilm_dir

    results["encoder"], results["encoder_cpu"] = {}, {}
    for model in models:
        folder = minilm_dir() if model == "minilm" else serving_models.bert_base()
        onnx = serving_models.onnx_models(folder, f"{model}_encoder")
        fusion = json.loads((onnx / "fusion.json").read_text())
        results["notes"][f"ORT fusion, {MODELS[model]}"] = ", ".join(
            f"{key} {value}" for key, value in fusion.items())
        seconds, cpu_seconds, loads = measure_encoders(
            model, folder, onnx, args.rounds, logs, results["notes"],
            args.baseline, systems, batches)
        results["encoder"].update(seconds)
        results["encoder_cpu"].update(cpu_seconds)
        results.setdefault("encoder_load", {}).update(loads)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, from {', '.join(PARTS)}")
    parser.add_argument("--systems", default=",".join(ENCODER_SYSTEMS),
                        help="comma-separated encoder systems, from "
                             f"{', '.join(ENCODER_SYSTEMS)} (with --baseline, the baseline "
                             "checkout's ours and ours_xla follow these)")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)),
                        help=f"comma-separated encoder batch sizes, from "
                             f"{', '.join(map(str, BATCHES))}")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--name", default="serving_speed", help="results file stem")
    parser.add_argument("--baseline", help="root of another checkout (e.g. the commit "
                        "before a change) whose float32 encoder is timed in the same rounds")
    parser.add_argument("--glue_dir", type=Path,
                        help="GLUE data (the download script's layout): the latency and "
                        "accuracy parts serve MiniLM fine-tuned on its SST-2, every system "
                        "the same weights (default: Pang & Lee's sentences, each side's own "
                        "fine-tuning)")
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    try:
        models = parse_choices(args.models, tuple(MODELS), "models")
        parts = parse_choices(args.parts, PARTS, "parts")
        systems = parse_choices(args.systems, ENCODER_SYSTEMS, "systems")
        batches = [int(batch) for batch in parse_choices(
            args.batches, tuple(map(str, BATCHES)), "batches")]
    except ValueError as error:
        parser.error(str(error))
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.glue_dir and not (args.glue_dir / "SST-2" / "dev.tsv").is_file():
        parser.error(f"--glue_dir: {args.glue_dir} has no SST-2/dev.tsv")
    if args.baseline and not is_checkout(Path(args.baseline)):
        parser.error(f"--baseline: {args.baseline} is not a checkout of this project "
                     "(no network/encoder.py or modeling/encoder.py)")

    command = command_line(sys.argv, sys.executable)
    load_before = os.getloadavg()
    results: dict = {"notes": {}}
    with tempfile.TemporaryDirectory(prefix="serving-speed-logs-") as logs:
        if args.baseline:
            results["baseline"] = f"`{os.path.basename(os.path.abspath(args.baseline))}`"
        if "encoder" in parts:
            _measure_encoder_part(results, models, args, Path(logs), systems, batches)
        if "latency" in parts or "accuracy" in parts:
            (results["latency"], results["accuracy"], served,
             results["latency_load"]) = measure_text(parts, args.rounds, Path(logs),
                                                     results["notes"], args.baseline,
                                                     args.glue_dir)
            if "latency" not in parts:
                del results["latency"]
            if "accuracy" not in parts:
                del results["accuracy"]
            results["reported"], results["peer_trainer"] = served.reported, served.peer_trainer
            results["dev"] = (f"`{served.dev.parent.name}/{served.dev.name}` (sha256 "
                              f"{hashlib.sha256(served.dev.read_bytes()).hexdigest()[:16]}...)")
    info = versions()
    info["threads per system"] = "2"
    info["load average (1, 5, 15 min) before"] = ", ".join(f"{v:.2f}" for v in load_before)
    info["load average (1, 5, 15 min) after"] = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    info["command"] = f"`{command}`"
    harness.write_report(args.name, report(results, info))


if __name__ == "__main__":
    main()
