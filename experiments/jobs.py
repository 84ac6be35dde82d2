"""One run of a project tool, cached under a hash of its settings, so a grid of them resumes.

A job is a command line of one of the project's tools (`data_prep.vocab`,
`data_prep.create_pretraining_data`, `run_pretraining.py`,
`run_classifier.py`, `run_ner.py`): the tools are the stable interface, and
a subprocess per run keeps each run's TensorFlow state, threads and memory
apart. Its cache key hashes what decides the result: the tool, its flag
values, the model shape, the contents of the data files it reads and the
keys of the jobs whose outputs it reads. Paths are left out of the key, so
a cache moved to another folder, or another checkout, is still valid.

Each job works in `<cache>/runs/<key>/`; `result.json` (the numbers the
tool wrote) appears there atomically once the tool has exited 0, so a job
killed at any moment leaves no result and runs again. A killed pre-training
keeps its checkpoints, and `run_pretraining.py` resumes from the newest one.
When a grid's runs start is `schedule`'s.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Union

from core.atomic import write_atomically
from evaluation.results import read_eval_results

REPOSITORY = Path(__file__).resolve().parent.parent
RESULT_FILE = "result.json"
OUTPUT_FOLDER = "output"
_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")
# A progress line of the training loop: "step 250/2000  3.10 steps/s  ...  loss=5.21 ...".
_PROGRESS = re.compile(r"^step (\d+)/\d+ .*?(?<!_)loss=([0-9.eE+-]+)", re.MULTILINE)

# Runs a tool: (arguments after the Python interpreter, log file, environment) -> its CPU
# seconds, or None where not measured.
Runner = Callable[[list[str], Path, Mapping[str, str]], Union[float, None]]


class JobFailed(RuntimeError):
    """A tool exited non-zero; the message names its log."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Files a job reads that no job of the grid makes; keyed by their contents."""

    name: str
    paths: tuple[Path, ...]

    @property
    def value(self) -> str:
        return ",".join(str(path) for path in self.paths)

    @property
    def fingerprint(self) -> str:
        return _fingerprint(tuple(str(path) for path in self.paths))


@dataclasses.dataclass(frozen=True, eq=False)
class Output:
    """A file or folder inside another job's output folder."""

    job: "Job"
    path: str = ""


@dataclasses.dataclass(frozen=True, eq=False)
class Job:
    """One tool run. `output_flag` gets the output folder, or `output_name` inside it.

    `model` is a BERT config (without vocab_size, taken from the `vocab_file`
    input) written beside the output and passed as `--bert_config_file`.
    `resumable` keeps a killed run's output for the tool to continue from;
    `keep` (glob patterns) prunes the output to what later reading needs once
    the run has succeeded, so a grid of fine-tunings keeps scores, not weights.
    `save_every` overrides a resumable run's `--save_checkpoints_steps` and is
    not part of the key: a run resumed from any checkpoint ends with the same
    weights, so how often it saves changes only what a kill costs.
    """

    tool: str
    settings: Mapping[str, object]
    inputs: Mapping[str, Union[Output, Dataset]] = dataclasses.field(default_factory=dict)
    model: Mapping[str, object] | None = None
    output_flag: str = "output_dir"
    output_name: str | None = None
    resumable: bool = False
    keep: tuple[str, ...] | None = None
    save_every: int | None = None

    @functools.cached_property
    def key(self) -> str:
        inputs = {flag: (["job", source.job.key, source.path] if isinstance(source, Output)
                         else ["data", source.fingerprint])
                  for flag, source in self.inputs.items()}
        described = {"tool": self.tool, "settings": {k: _text(v) for k, v in self.settings.items()},
                     "inputs": inputs, "model": self.model, "output_name": self.output_name}
        encoded = json.dumps(described, sort_keys=True).encode("utf-8")
        return hashlib.sha256(encoded).hexdigest()[:20]

    @property
    def dependencies(self) -> list["Job"]:
        return [source.job for source in self.inputs.values() if isinstance(source, Output)]


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@functools.lru_cache(maxsize=None)
def _fingerprint(paths: tuple[str, ...]) -> str:
    """SHA-256 over the relative names and bytes of every file under `paths`."""
    digest = hashlib.sha256()
    for root in paths:
        base = Path(root)
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        digest.update(b"\0root")
        for path in files:
            if not path.is_file():
                raise OSError(f"data file {path} is missing")
            relative = path.relative_to(base).as_posix() if base.is_dir() else ""
            digest.update(relative.encode("utf-8") + b"\0")
            with open(path, "rb") as reader:
                for block in iter(lambda: reader.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def subprocess_runner(arguments: list[str], log: Path, environment: Mapping[str, str],
                      niceness: int = 0) -> float:
    """Runs a tool with this interpreter from the repository root, its output to `log`.

    A positive `niceness` lowers its priority (`nice`, where the system has it).
    Returns the CPU seconds (user and system) of the tool and the processes it
    waited for, which a shared machine's wall time does not tell.
    """
    nice = ["nice", "-n", str(niceness)] if niceness and shutil.which("nice") else []
    with open(log, "w", encoding="utf-8") as output:
        process = subprocess.Popen([*nice, sys.executable, *arguments], stdout=output,
                                   stderr=subprocess.STDOUT, env=dict(environment),
                                   cwd=REPOSITORY)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
        last = lines[-1].strip() if lines else "no output"
        tool = " ".join(arguments[:2]) if arguments[0] == "-m" else arguments[0]
        raise JobFailed(f"{tool} exited with status {process.returncode} "
                        f"({last}); its log is {log}")
    return usage.ru_utime + usage.ru_stime


class Cache:
    """Job folders under `<root>/runs/<key>`."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def folder(self, job: Job) -> Path:
        return self.root / "runs" / job.key

    def output(self, job: Job) -> Path:
        return self.folder(job) / OUTPUT_FOLDER

    def result(self, job: Job) -> dict | None:
        path = self.folder(job) / RESULT_FILE
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def resolve(self, source: Union[Output, Dataset]) -> str:
        if isinstance(source, Dataset):
            return source.value
        return str(self.output(source.job) / source.path) if source.path else \
            str(self.output(source.job))

    def command(self, job: Job) -> list[str]:
        """The tool's arguments (after `python`), with this cache's paths filled in."""
        arguments = job.tool.split()
        values = {flag: _text(value) for flag, value in job.settings.items()}
        values.update({flag: self.resolve(source) for flag, source in job.inputs.items()})
        output = self.output(job)
        values[job.output_flag] = str(output / job.output_name) if job.output_name else \
            str(output)
        if job.model is not None:
            values["bert_config_file"] = str(self.folder(job) / "bert_config.json")
        if job.save_every is not None:
            values["save_checkpoints_steps"] = str(job.save_every)
        return arguments + [f"--{flag}={value}" for flag, value in values.items()]


def collect_results(output: Path) -> dict:
    """The numbers a tool left in its output folder, in one JSON-ready dict."""
    result: dict = {}
    if (output / "eval_results.txt").is_file():
        result["eval_results"] = read_eval_results(output / "eval_results.txt")
    if (output / "sweep_results.tsv").is_file():
        with open(output / "sweep_results.tsv", encoding="utf-8") as reader:
            rows = list(csv.DictReader(reader, delimiter="\t"))
        result["sweep"] = [[float(row["learning_rate"]), int(row["restart"]),
                            float(row["dev_score"])] for row in rows]
        result["sweep_rows"] = rows  # every column as written: scores, status, warning, chosen
    steps = sorted(int(match.group(1)) for name in
                   (os.listdir(output) if output.is_dir() else [])
                   if (match := _CHECKPOINT.fullmatch(name)))
    if steps:
        result["checkpoints"] = steps
    if (output / "vocab.txt").is_file():
        result["vocab_size"] = len((output / "vocab.txt").read_text(encoding="utf-8")
                                   .splitlines())
    return result


def training_curve(log: Path) -> list[list[float]]:
    """[step, loss] from the progress lines of a training run's log (empty when there are none)."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [[int(step), float(loss)] for step, loss in _PROGRESS.findall(text)]


def run_job(job: Job, cache: Cache, runner: Runner, threads: int | None = None) -> dict:
    """The job's cached result, running the tool first if there is none."""
    cached = cache.result(job)
    if cached is not None:
        return cached
    folder, output = cache.folder(job), cache.output(job)
    if output.exists() and not job.resumable:
        shutil.rmtree(output)  # what a killed run left: start it afresh
    # Continued from what a killed run left: the times below are this attempt's only.
    resumed = output.is_dir() and any(output.iterdir())
    output.mkdir(parents=True, exist_ok=True)
    if job.model is not None:
        vocab = Path(cache.resolve(job.inputs["vocab_file"]))
        vocab_size = len(vocab.read_text(encoding="utf-8").splitlines())
        write_atomically(folder / "bert_config.json",
                         json.dumps({**job.model, "vocab_size": vocab_size}, indent=2) + "\n")
    arguments = cache.command(job)
    write_atomically(folder / "command.txt", shlex.join(["python", *arguments]) + "\n")
    # Unbuffered: the log shows each progress line as it is printed.
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    if threads:
        environment.update(TF_NUM_INTRAOP_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    print(f"$ python {shlex.join(arguments)}", flush=True)
    started = time.monotonic()
    cpu_seconds = runner(arguments, folder / "log.txt", environment)
    result = collect_results(output)
    if cpu_seconds is not None:
        result["cpu_seconds"] = round(cpu_seconds, 1)
    curve = training_curve(folder / "log.txt")
    if curve:
        result["train_loss"] = curve
    result["seconds"] = round(time.monotonic() - started, 1)
    if resumed:
        result["resumed"] = True
    if job.keep is not None:
        _prune(output, job.keep)
    write_atomically(folder / RESULT_FILE, json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result


def _prune(output: Path, keep: tuple[str, ...]) -> None:
    kept = {path for pattern in keep for path in output.glob(pattern)}
    for path in list(output.iterdir()):
        if path in kept:
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
