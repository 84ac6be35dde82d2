"""Where each GLUE task keeps its text, labels and ids, file by file.

The GLUE distribution (`download_glue_data.py`, one folder per task) is not
uniform: CoLA's train and dev files have no header and fixed columns
`[source, label, original mark, sentence]` while its test file has a header;
MRPC names its label column `Quality`; QQP's test ids are in `id` rather than
`index`; MNLI has two dev and two test files; the diagnostic set (AX) sits
in its own folder and is predicted by an MNLI model. Rather than one class
per task, as the original repository had (and only for four tasks), the
layouts are data: one `SplitFile` per file, naming its columns by header
name, or by 0-based position for headerless files, and `parse_rows` below
interprets it. `data_prep.datasets.glue` builds the processors on top.

Rows are split on tabs with no quoting at all, which is what the original's
`csv.reader(..., quotechar=None)` did: GLUE texts hold unbalanced `"`
characters (MRPC's `" the witness "`, MNLI's parses), and a reader that
honours quotes swallows the following lines into one field and silently
loses examples. One physical line is one row, so every error names its
`file:line`. Plain `str.split` agrees with the csv module's QUOTE_NONE
reader on every row except one holding a lone carriage return, which csv
refuses and we keep as text. Files are strict UTF-8
(`text_files.read_utf8_lines`, which also drops Windows line ends), and a
leading byte-order mark (MRPC's files, converted from Microsoft's, may
start with one) is dropped. Columns are taken by header name or position,
so extra columns are ignored; a row with too few is an error, or skipped
where the task allows it (QQP's training file).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from typing import Iterator

from text.text_files import read_utf8_lines

Column = str | int  # a header name, or a 0-based position


@dataclasses.dataclass
class InputExample:
    """One text or text pair; `label` is a label string, a float (STS-B), a tuple of label
    strings (a multi-label task's label set, maybe empty), or None (test sets)."""

    guid: str
    text_a: str
    text_b: str | None
    label: str | float | tuple[str, ...] | None


@dataclasses.dataclass(frozen=True)
class SplitFile:
    """One file of a task: candidate paths (relative to `data_dir`, first found wins) and columns.

    `label` is None for unlabelled test files; `guid` names the column kept as
    each example's guid (GLUE's `index`, which the submission must repeat),
    or None to number rows `<split>-<n>` from 0. `optional` files are
    skipped when absent instead of being an error. A `label_delimiter`
    makes the label column a label set: labels separated by it, an empty
    cell the empty set.
    """

    paths: tuple[str, ...]
    text_a: Column
    text_b: Column | None
    label: Column | None
    has_header: bool = True
    guid: Column | None = None
    optional: bool = False
    label_delimiter: str | None = None


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task's canonical name, label list (None: regression) and files by split."""

    name: str
    labels: tuple[str, ...] | None
    train: SplitFile
    dev: dict[str, SplitFile]
    test: dict[str, SplitFile]  # keyed by GLUE submission file stem
    skip_short_train_rows: bool = False


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")
# The original MnliProcessor's order; checkpoints fine-tuned with it expect it.
MNLI_LABELS = ("contradiction", "entailment", "neutral")

# The diagnostic set is read next to MNLI's files or from GLUE's own folder.
DIAGNOSTIC_PATHS = ("diagnostic.tsv", "AX.tsv", "../diagnostic/diagnostic.tsv",
                    "diagnostic/diagnostic.tsv")


def _standard(name: str, labels: tuple[str, ...] | None, text_a: str, text_b: str | None,
              label: str, test_stem: str, test_guid: str = "index",
              skip_short_train_rows: bool = False) -> TaskSpec:
    """A task whose train.tsv, dev.tsv and test.tsv share headers (test lacking the label)."""
    labelled = SplitFile(("train.tsv",), text_a, text_b, label)
    return TaskSpec(
        name=name, labels=labels, train=labelled,
        dev={"dev": dataclasses.replace(labelled, paths=("dev.tsv",))},
        test={test_stem: SplitFile(("test.tsv",), text_a, text_b, None, guid=test_guid)},
        skip_short_train_rows=skip_short_train_rows)


def _cola() -> TaskSpec:
    headerless = SplitFile(("train.tsv",), text_a=3, text_b=None, label=1, has_header=False)
    return TaskSpec(
        name="CoLA", labels=BINARY, train=headerless,
        dev={"dev": dataclasses.replace(headerless, paths=("dev.tsv",))},
        test={"CoLA": SplitFile(("test.tsv",), "sentence", None, None, guid="index")})


def _mnli(name: str, diagnostic_optional: bool) -> TaskSpec:
    """MNLI (tests: matched, mismatched, AX when found), or AX (MNLI's data, AX the only test)."""
    labelled = SplitFile(("train.tsv",), "sentence1", "sentence2", "gold_label")
    unlabelled = SplitFile(("test_matched.tsv",), "sentence1", "sentence2", None, guid="index")
    diagnostic = SplitFile(DIAGNOSTIC_PATHS, "sentence1", "sentence2", None, guid="index",
                           optional=diagnostic_optional)
    test = {"AX": diagnostic}
    if diagnostic_optional:
        test = {"MNLI-m": unlabelled,
                "MNLI-mm": dataclasses.replace(unlabelled, paths=("test_mismatched.tsv",)),
                **test}
    return TaskSpec(
        name=name, labels=MNLI_LABELS, train=labelled,
        dev={"dev_matched": dataclasses.replace(labelled, paths=("dev_matched.tsv",)),
             "dev_mismatched": dataclasses.replace(labelled, paths=("dev_mismatched.tsv",))},
        test=test)


TASKS: dict[str, TaskSpec] = {
    "cola": _cola(),
    "sst-2": _standard("SST-2", BINARY, "sentence", None, "label", "SST-2"),
    "mrpc": _standard("MRPC", BINARY, "#1 String", "#2 String", "Quality", "MRPC"),
    "sts-b": _standard("STS-B", None, "sentence1", "sentence2", "score", "STS-B"),
    # A few QQP training rows are broken across lines; other tools skip them too.
    "qqp": _standard("QQP", BINARY, "question1", "question2", "is_duplicate", "QQP",
                     test_guid="id", skip_short_train_rows=True),
    "mnli": _mnli("MNLI", diagnostic_optional=True),
    "qnli": _standard("QNLI", ENTAILMENT, "question", "sentence", "label", "QNLI"),
    "rte": _standard("RTE", ENTAILMENT, "sentence1", "sentence2", "label", "RTE"),
    "wnli": _standard("WNLI", BINARY, "sentence1", "sentence2", "label", "WNLI"),
    "ax": _mnli("AX", diagnostic_optional=False),
}

def layout_description(spec: TaskSpec) -> str:
    """The files a task's data folder must hold, for error messages."""
    files = [spec.train, *spec.dev.values(), *spec.test.values()]
    names = []
    for split_file in files:
        alternatives = " or ".join(split_file.paths)
        names.append(f"{alternatives} (optional)" if split_file.optional else alternatives)
    return f"the GLUE layout for {spec.name}: <data_dir>/{{{', '.join(names)}}}"


def join_path(data_dir: str, relative: str) -> str:
    """`data_dir/relative` with leading "../" resolved textually (works for gs:// paths too)."""
    data_dir = str(data_dir)
    while relative.startswith("../"):
        data_dir, relative = os.path.dirname(data_dir.rstrip("/")), relative[3:]
    return os.path.join(data_dir, relative)


def open_first(data_dir: str, split_file: SplitFile) -> tuple[str, Iterator[str]] | None:
    """The first candidate path that exists, with its lines; None when none does."""
    for relative in split_file.paths:
        path = join_path(data_dir, relative)
        lines = read_utf8_lines(path)
        try:
            first = next(lines)
        except FileNotFoundError:
            continue
        except StopIteration:
            return path, iter(())
        return path, itertools.chain([first.removeprefix("\ufeff")], lines)
    return None


def parse_rows(path: str, lines: Iterator[str], split: str, split_file: SplitFile,
               labels: list[str] | None, is_regression: bool,
               skip_short_rows: bool) -> tuple[list[InputExample], list[int]]:
    """Examples of one file, and the line numbers of short rows skipped."""
    numbered = enumerate(lines, start=1)
    header = None
    if split_file.has_header:
        first = next(numbered, None)
        if first is None:
            return [], []
        header = [name.strip() for name in first[1].split("\t")]
    columns = [split_file.text_a, split_file.text_b, split_file.label, split_file.guid]
    a_at, b_at, label_at, guid_at = (None if column is None else _position(column, header, path)
                                     for column in columns)
    needed = 1 + max(at for at in (a_at, b_at, label_at, guid_at) if at is not None)
    examples, skipped = [], []
    for line_number, line in numbered:
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) < needed:
            if skip_short_rows:
                skipped.append(line_number)
                continue
            raise ValueError(f"{path}:{line_number}: {len(fields)} tab-separated columns, "
                             f"at least {needed} needed")
        label = None
        where = f"{path}:{line_number}"
        if label_at is not None and split_file.label_delimiter is not None:
            label = tuple(dict.fromkeys(
                _parse_label(part.strip(), labels, False, where)
                for part in fields[label_at].split(split_file.label_delimiter) if part.strip()))
        elif label_at is not None:
            label = _parse_label(fields[label_at].strip(), labels, is_regression, where)
        guid = fields[guid_at].strip() if guid_at is not None else f"{split}-{len(examples)}"
        examples.append(InputExample(guid=guid, text_a=fields[a_at],
                                     text_b=None if b_at is None else fields[b_at], label=label))
    return examples, skipped


def _position(column: Column, header: list[str] | None, path: str) -> int:
    if isinstance(column, int):
        return column
    if header is not None and column in header:
        return header.index(column)
    if column.isdigit():
        return int(column)
    raise ValueError(f"{path}: no column {column!r} in the header {header}")


def _parse_label(text: str, labels: list[str] | None, is_regression: bool,
                 where: str) -> str | float:
    if is_regression:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{where}: score {text!r} is not a number") from None
    if labels is not None and text not in labels:
        raise ValueError(f"{where}: label {text!r} is not one of {labels}")
    return text
