"""Pre-training data: our create_pretraining_data against two ports of the original algorithm.

The peers: the TF Model Garden's port (`official/nlp/data/
create_pretraining_data.py` and its tokenizer from `tf-models-official==2.20.0`,
run on TF 2 with `tf-keras`, `sentencepiece` and `six` installed, see
benchmarks/requirements.txt), and the original google-research/bert script
as published on PyPI (`bert-tensorflow==1.0.4`), run under
`tensorflow.compat.v1` standing in for the TF1 it was written for. Their
modules are read out of the packages into a temporary folder at run time
(never committed). All runs are separate processes, one after the other,
on the same corpus with the same flags (max_seq_length=128, max_predictions_per_seq=20,
masked_lm_prob=0.15, dupe_factor=5, short_seq_prob=0.1), timed end to end,
start-up included. The corpus is the built-in Wikipedia and news samples
repeated to about 50 MB ("1x") so that start-up does not dominate; ours
also runs on ten times that ("10x") to show that its memory stays flat.

Memory is the peak resident set: `getrusage(RUSAGE_CHILDREN)` gives the
largest single process (each run happens under its own wrapper process, so
runs do not mix; the wrapper adopts and reaps orphaned descendants such as
our workers' fork server, so they count), and the sum over the process tree, sampled every 0.2 s,
counts our worker processes together. CPU seconds (user and system, all
processes) and the 1-minute load average before each run are given too,
since this machine may be shared with other work. Statistics of both outputs
check that the two write the same kind of data.

    make bench   (or: .venv-bench/bin/python benchmarks/create_pretraining_data_speed.py
                  [--megabytes=50] [--peers=model_garden,original])
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from data_prep.corpora import assets
from data_prep.corpora import builtin_corpus  # noqa: E402

FLAGS = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
         "--dupe_factor=5", "--short_seq_prob=0.1", "--random_seed=12345", "--do_lower_case=true"]
# Runs a command, then prints its wall time and peak memory as JSON (see the module docstring).
MEASURE = r"""
import ctypes, json, os, resource, subprocess, sys, time

def tree_rss(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
        stack += children.get(pid, [])
    return total

# Orphaned descendants (a fork server outlives its parent) become our children, so their
# CPU time and memory count in RUSAGE_CHILDREN once reaped.
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
start = time.perf_counter()
with open(sys.argv[2], "w") as log:
    process = subprocess.Popen(json.loads(sys.argv[1]), stdout=log, stderr=log)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.2)
seconds = time.perf_counter() - start
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"returncode": process.returncode, "seconds": seconds,
                  "cpu_seconds": usage.ru_utime + usage.ru_stime,
                  "max_rss": usage.ru_maxrss * 1024, "tree_rss": peak}))
"""
# How each peer runs: the package its modules come from, the modules, and a program that
# takes the folder they were extracted to, then the flags.
PEERS = {
    "model_garden": {
        "label": "Model Garden port",
        "package": ("tf-models-official", "2.20.0"),
        "members": ("official/__init__.py", "official/nlp/__init__.py",
                    "official/nlp/data/__init__.py", "official/nlp/data/create_pretraining_data.py",
                    "official/nlp/tools/__init__.py", "official/nlp/tools/tokenization.py"),
        "runner": """
import runpy, sys
sys.path.insert(0, sys.argv.pop(1))
runpy.run_module("official.nlp.data.create_pretraining_data", run_name="__main__")
""",
    },
    "original": {
        "label": "original",
        "package": ("bert-tensorflow", "1.0.4"),
        "members": ("bert/__init__.py", "bert/create_pretraining_data.py", "bert/tokenization.py"),
        # TensorFlow's v1 API in place of the TF1 the script imports.
        "runner": """
import sys
import tensorflow.compat.v1 as tf
sys.modules["tensorflow"] = tf
sys.path.insert(0, sys.argv.pop(1))
from bert import create_pretraining_data
tf.app.run(create_pretraining_data.main)
""",
    },
}


def build_corpus(path: Path, megabytes: float) -> None:
    """The built-in corpora, concatenated and repeated to about `megabytes` MB."""
    sources = [builtin_corpus.wikipedia_sample_path().read_bytes().strip(),
               builtin_corpus.news_sample_path().read_bytes().strip()]
    block = b"\n\n".join(sources)
    repeats = max(1, round(megabytes * 2**20 / len(block)))
    path.write_bytes(b"\n\n".join([block] * repeats) + b"\n")


def extract_peer(peer: dict, folder: Path) -> Path:
    """A peer's modules out of its package's wheel, under `folder` with their package paths."""
    wheel = assets.fetch_package_archive(*peer["package"])
    with zipfile.ZipFile(wheel) as archive:
        for member in peer["members"]:
            target = folder / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
    return folder


def measure(label: str, command: list[str], output: Path, log: Path) -> dict:
    """Runs `command` under the MEASURE wrapper; adds the instances written to its figures."""
    print(f"running {label} ...", flush=True)
    os.sync()  # the corpora and earlier outputs (GBs) would otherwise be written back during it
    load_before = os.getloadavg()[0]
    completed = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(command), str(log)],
                               capture_output=True, text=True, check=True, cwd=ROOT)
    figures = json.loads(completed.stdout)
    figures["load_before"] = load_before
    if figures["returncode"] != 0:
        raise RuntimeError(f"{label} failed:\n{log.read_text()[-3000:]}")
    figures["instances"] = count_records(output)
    figures["rate"] = figures["instances"] / figures["seconds"]
    print(f"  {figures['instances']} instances in {figures['seconds']:.1f} s = "
          f"{figures['rate']:.0f}/s; peak RSS {figures['max_rss'] / 2**20:.0f} MiB "
          f"(tree {figures['tree_rss'] / 2**20:.0f} MiB)", flush=True)
    return figures


def count_records(path: Path) -> int:
    """Records in a TFRecord file, by walking its length headers."""
    count = 0
    with open(path, "rb") as records:
        while header := records.read(12):
            records.seek(int.from_bytes(header[:8], "little") + 4, os.SEEK_CUR)
            count += 1
    return count


def statistics(path: Path, dupe_factor: int) -> dict[str, float]:
    """Shape of the data, over all records of `path`."""
    spec = {name: tf.io.FixedLenFeature([size], dtype) for name, size, dtype in [
        ("input_ids", 128, tf.int64), ("input_mask", 128, tf.int64),
        ("masked_lm_positions", 20, tf.int64), ("masked_lm_ids", 20, tf.int64),
        ("masked_lm_weights", 20, tf.float32), ("next_sentence_labels", 1, tf.int64)]}
    sums = collections.Counter()
    for batch in (tf.data.TFRecordDataset(str(path)).batch(8192)
                  .map(lambda records: tf.io.parse_example(records, spec))):
        batch = {name: value.numpy() for name, value in batch.items()}
        used = batch["masked_lm_weights"] > 0
        at_positions = np.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], 1)
        is_mask = (at_positions == 103)[used]  # [MASK] in the uncased vocabulary
        is_same = (at_positions == batch["masked_lm_ids"])[used]
        lengths = batch["input_mask"].sum(axis=1)
        sums.update({"instances": len(lengths), "predictions": used.sum(),
                     "mask": is_mask.sum(), "same": is_same.sum(),
                     "random next": batch["next_sentence_labels"].sum(),
                     "tokens": lengths.sum(), "full": (lengths == 128).sum(),
                     "short": (lengths < 64).sum()})
    instances, predictions = sums["instances"], sums["predictions"]
    return {"instances per dupe pass": instances / dupe_factor,
            "masked positions per instance": predictions / instances,
            "share [MASK]": sums["mask"] / predictions,
            "share unchanged": sums["same"] / predictions,
            "share random": 1 - (sums["mask"] + sums["same"]) / predictions,
            "share random next (NSP label 1)": sums["random next"] / instances,
            "mean tokens per instance": sums["tokens"] / instances,
            "share of full-length instances": sums["full"] / instances,
            "share under 64 tokens": sums["short"] / instances}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=50.0, help="size of the 1x corpus")
    parser.add_argument("--peers", default="model_garden,original",
                        help=f"comma list out of {', '.join(PEERS)}; the first carries the target")
    args = parser.parse_args()
    peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown or not peers:
        parser.error(f"--peers: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(PEERS)}")
    vocab = str(assets.minilm_dir() / "vocab.txt")
    with tempfile.TemporaryDirectory(prefix="cpd-bench-") as scratch:
        scratch = Path(scratch)
        corpora = {"1x": scratch / "corpus_1x.txt", "10x": scratch / "corpus_10x.txt"}
        build_corpus(corpora["1x"], args.megabytes)
        build_corpus(corpora["10x"], 10 * args.megabytes)
        runs = {}

        def ours(label: str, corpus: Path, workers: int) -> None:
            output = scratch / f"ours-{corpus.stem}-{workers}.tfrecord"  # no commas: a name list
            runs[label] = measure(label, [sys.executable, "-m", "data_prep.create_pretraining_data",
                                          f"--input_file={corpus}", f"--output_file={output}",
                                          f"--vocab_file={vocab}", f"--num_workers={workers}",
                                          *FLAGS], output, output.with_suffix(".log"))
            runs[label]["output"] = output

        ours("ours, 1x, 2 workers", corpora["1x"], 2)
        ours("ours, 1x, 1 worker", corpora["1x"], 1)
        ours("ours, 10x, 2 workers", corpora["10x"], 2)
        runs["ours, 10x, 2 workers"]["output"].unlink()  # about 5 GB
        for name in peers:
            peer, label = PEERS[name], f"{PEERS[name]['label']}, 1x"
            folder = extract_peer(peer, scratch / name)
            output = scratch / f"{name}.tfrecord"
            runs[label] = measure(label, [sys.executable, "-c", peer["runner"], str(folder),
                                          f"--input_file={corpora['1x']}",
                                          f"--output_file={output}", f"--vocab_file={vocab}",
                                          *FLAGS], output, scratch / f"{name}.log")
            runs[label]["output"] = output
        compared = {label: statistics(run["output"], 5) for label, run in runs.items()
                    if label not in ("ours, 1x, 1 worker", "ours, 10x, 2 workers")}
        sizes = {label: path.stat().st_size / 2**20 for label, path in corpora.items()}
    write_report(runs, [f"{PEERS[name]['label']}, 1x" for name in peers], compared, sizes)


def write_report(runs: dict[str, dict], peer_labels: list[str], compared: dict[str, dict],
                 sizes: dict[str, float]) -> None:
    results = {label: harness.Result(label, run["instances"], (run["seconds"],))
               for label, run in runs.items()}
    per_cpu = {label: harness.Result(f"{label}, per CPU second", run["instances"],
                                     (run["cpu_seconds"],)) for label, run in runs.items()}
    comparisons = []
    for rank, peer in enumerate(peer_labels):
        name = peer.removesuffix(", 1x")
        comparisons += [
            harness.Comparison(f"1x corpus, 2 cores, against the {name}",
                               results["ours, 1x, 2 workers"], results[peer],
                               target=20.0 if rank == 0 else None),
            harness.Comparison(f"1x corpus, ours on 1 worker, against the {name}",
                               results["ours, 1x, 1 worker"], results[peer]),
            harness.Comparison(f"ours on 10x against the {name} on 1x, 2 cores",
                               results["ours, 10x, 2 workers"], results[peer]),
            harness.Comparison(f"1x corpus, per CPU second, against the {name}",
                               per_cpu["ours, 1x, 2 workers"], per_cpu[peer])]
    memory = harness.markdown_table(
        ["run", "load before", "instances", "seconds", "CPU seconds", "cores used",
         "instances per CPU second", "peak RSS, largest process (MiB)",
         "peak RSS, all processes (MiB)"],
        [[label, f"{run['load_before']:.1f}", str(run["instances"]), f"{run['seconds']:.1f}",
          f"{run['cpu_seconds']:.1f}", f"{run['cpu_seconds'] / run['seconds']:.2f}",
          f"{run['instances'] / run['cpu_seconds']:.0f}",
          f"{run['max_rss'] / 2**20:.0f}", f"{run['tree_rss'] / 2**20:.0f}"]
         for label, run in runs.items()])
    names = list(next(iter(compared.values())))
    agreement = harness.markdown_table(
        ["statistic", *compared], [[name, *(f"{stats[name]:.4g}" for stats in compared.values())]
                                   for name in names])
    description = (__doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0] +
                   f"\n\nCorpus sizes: 1x = {sizes['1x']:.1f} MiB, 10x = {sizes['10x']:.1f} MiB.")
    report = harness.render_report(
        "create_pretraining_data: ours vs ports of the original", description,
        harness.machine_info(["tensorflow", "tensorflow-text", "numpy", "tf-keras"]),
        list(results.values()), comparisons, "instances",
        notes=["One run per row (the peers take minutes); timings are end to end, "
               "start-up (TensorFlow imports, tokenizer set-up) included.",
               "Ours draws random-next segments within chunks of 256 documents and shuffles "
               "within a chunk; the peers over the whole corpus.",
               "Where other jobs load the machine ('load before' above 0), a run gets fewer "
               "cores than it asks for ('cores used' = CPU seconds / seconds); instances per "
               "CPU second compare the programs independently of that."])
    report += ("\n## Time and memory\n\n" + memory + "\n\n## Same kind of data (all records "
               "of the 1x runs)\n\n" + agreement + "\n")
    harness.write_report("create_pretraining_data", report)


if __name__ == "__main__":
    main()
