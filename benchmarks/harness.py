"""A small side-by-side benchmark harness: time ours and a peer in one process.

Timings taken in separate runs drift with whatever else the machine is doing,
so each benchmark script measures both systems in the same process, right
after one another, repeats every measurement and keeps the median (robust to
the odd slow repeat caused by a background task or a garbage collection).
Results go to `benchmarks/results/<name>.md` as markdown tables, together
with the machine and library versions they were taken on, since a ratio
means little without knowing the CPU that produced it.

Only the standard library is used here, so the harness can be tested without
TensorFlow or any peer installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class Result:
    """Repeated timings of one system on one case.

    `work` is how many units (tokens, sequences) one call processes and
    `seconds` the time of one call in each repeat.
    """

    label: str
    work: float
    seconds: tuple[float, ...]

    def __post_init__(self):
        if not self.seconds:
            raise ValueError(f"{self.label}: no timings recorded")
        if self.work <= 0:
            raise ValueError(f"{self.label}: work per call must be positive, got {self.work}")
        if any(value <= 0 for value in self.seconds):
            raise ValueError(f"{self.label}: timings must be positive, got {self.seconds}")

    @property
    def median_seconds(self) -> float:
        return median(self.seconds)

    @property
    def throughput(self) -> float:
        """Units per second at the median call time."""
        return self.work / self.median_seconds

    @property
    def throughput_range(self) -> tuple[float, float]:
        """Slowest and fastest repeat, in units per second."""
        return self.work / max(self.seconds), self.work / min(self.seconds)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Ours against a peer on one case; `target` is the ratio ours/peer we aim for."""

    case: str
    ours: Result
    peer: Result
    target: float | None = None

    @property
    def ratio(self) -> float:
        return self.ours.throughput / self.peer.throughput

    @property
    def meets_target(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target


def median(values: Iterable[float]) -> float:
    """Median of the values (mean of the middle two for an even count)."""
    values = list(values)
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def measure(label: str, function: Callable[[], object], work: float, repeats: int = 5,
            warmup: int = 1, number: int = 1,
            timer: Callable[[], float] = time.perf_counter) -> Result:
    """Calls `function` `warmup` times untimed, then times `repeats` rounds of `number` calls.

    Warm-up calls absorb one-off costs (tracing, XLA compilation, caches) that
    a long-running job pays once. Each round's time is divided by `number`, so
    `Result.seconds` always holds seconds per call.
    """
    if repeats < 1 or number < 1 or warmup < 0:
        raise ValueError(f"{label}: need repeats >= 1, number >= 1, warmup >= 0; got "
                         f"repeats={repeats}, number={number}, warmup={warmup}")
    for _ in range(warmup):
        function()
    seconds = []
    for _ in range(repeats):
        start = timer()
        for _ in range(number):
            function()
        seconds.append((timer() - start) / number)
    result = Result(label, work, tuple(seconds))
    print(f"  {label}: {format_rate(result.throughput)}/s "
          f"(median of {repeats}, {result.median_seconds * 1e3:.1f} ms per call)", flush=True)
    return result


def format_rate(value: float) -> str:
    """A throughput with three significant digits and an SI suffix: 1.23M, 456k, 7.89."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table; every row must have as many cells as the header."""
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"table row {list(row)} has {len(row)} cells, header has "
                             f"{len(header)}")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def results_table(results: Sequence[Result], unit: str) -> str:
    """One row per measurement: median throughput, its spread, median time per call."""
    rows = []
    for result in results:
        slowest, fastest = result.throughput_range
        rows.append([result.label, format_rate(result.throughput),
                     f"{format_rate(slowest)} - {format_rate(fastest)}",
                     f"{result.median_seconds * 1e3:.1f}", str(len(result.seconds))])
    return markdown_table(
        ["measurement", f"{unit}/s (median)", "range over repeats", "ms per call", "repeats"],
        rows)


def comparison_table(comparisons: Sequence[Comparison], unit: str) -> str:
    """One row per comparison: both throughputs and ours/peer, with the target if set."""
    rows = []
    for item in comparisons:
        verdict = "-" if item.target is None else (
            f">= {item.target:g}: {'met' if item.meets_target else 'NOT met'}")
        rows.append([item.case, f"{item.ours.label}: {format_rate(item.ours.throughput)}",
                     f"{item.peer.label}: {format_rate(item.peer.throughput)}",
                     f"{item.ratio:.2f}x", verdict])
    return markdown_table(["case", f"ours ({unit}/s)", f"peer ({unit}/s)", "ours/peer",
                           "target"], rows)


# The instruction sets that decide which inference path is fastest on an x86 CPU.
SPEED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile",
               "amx_int8", "amx_bf16")


def machine_info(packages: Iterable[str] = ()) -> dict[str, str]:
    """CPU model and flags, usable cores, Python and the installed versions of `packages`."""
    flags = cpu_flags()
    info = {"cpu": _cpu_model(),
            "cpu flags": (", ".join(flag for flag in SPEED_FLAGS if flag in flags) or "none")
            + "; absent: " + (", ".join(flag for flag in SPEED_FLAGS if flag not in flags)
                              or "none"),
            "cores": str(usable_cores()),
            "python": platform.python_version(), "platform": platform.platform()}
    for package in packages:
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = "not installed"
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as reader:
            for line in reader:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> set[str]:
    """The flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as reader:
            for line in reader:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def render_report(title: str, description: str, info: dict[str, str],
                  results: Sequence[Result], comparisons: Sequence[Comparison], unit: str,
                  notes: Sequence[str] = ()) -> str:
    """The whole markdown report: what was run, where, every timing and the ratios."""
    parts = [f"# {title}", "", description.strip(), "", "## Machine", ""]
    parts += [f"- {key}: {value}" for key, value in info.items()]
    parts += ["", "## Ratios", "", comparison_table(comparisons, unit), "",
              "## Measurements", "", results_table(results, unit)]
    if notes:
        parts += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"


class WorkerProcess:
    """A benchmarked system in a process of its own, which answers each request line with one
    JSON line on its stdout.

    Its stderr goes to `log_path`; a worker that exits before answering
    raises with the log's tail, so a crash in another environment reads as
    what it was.
    """

    def __init__(self, name: str, command: Sequence[str], log_path: Path, environment: dict,
                 cwd: Path):
        self.name = name
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, env=environment, cwd=cwd)

    def receive(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.log.flush()
            tail = Path(self.log.name).read_text()[-3000:]
            raise RuntimeError(f"{self.name} worker exited ({self.process.returncode}):\n{tail}")
        return json.loads(line)

    def request(self, line: str) -> dict:
        """Sends one request line and returns the answer."""
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it has exited: `receive` says how
        return self.receive()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=120)
        self.log.close()


def write_report(name: str, report: str, results_dir: Path = RESULTS_DIR) -> Path:
    """Writes `report` to `<results_dir>/<name>.md`, prints it and returns the path."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"report name {name!r} must be a plain file stem")
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.md"
    path.write_text(report, encoding="utf-8")
    print(report)
    print(f"written to {path}")
    return path


def write_section(path: Path, title: str, intro: str, label: str, text: str) -> None:
    """Puts `text` in the results file `path` under the heading `## <label>`, replacing that
    label's old section and keeping the others (e.g. a profile "before" and "after" a change).

    The file is `# <title>`, then `intro`, then the sections; it is replaced whole.
    """
    sections = {}
    if path.exists():
        for part in path.read_text(encoding="utf-8").split("\n## ")[1:]:
            sections[part.split("\n", 1)[0].strip()] = "## " + part.rstrip() + "\n"
    sections[label] = text
    content = "\n".join([f"# {title}", "", intro.strip(), ""] + list(sections.values()))
    temporary = path.with_suffix(path.suffix + ".partial")
    temporary.write_text(content, encoding="utf-8")
    temporary.replace(path)
