"""SQuAD v1.1 / v2.0 reader: the official JSON layout -> whitespace-tokenized examples.

The layout is `data[] -> paragraphs[] -> {context, qas[] -> {id, question,
answers[] -> {text, answer_start}, is_impossible, plausible_answers}}`.

Answers are given as character offsets into the context, but the model
works on words and WordPiece tokens, so the context is split into words on
the original BERT's five whitespace characters (`text.whitespace_words`)
while recording, for every character, the word it falls in. The answer's
first and last characters then give its first and last word.

In training an answer must be recoverable from those words: when the words
it covers do not contain the answer text (whitespace normalized), the
offset in the file is wrong (SQuAD has a few such questions) and the
question is skipped, counted and logged by id, as the original did, rather
than training the model on a wrong span. Empty contexts and questions are
skipped the same way. File-level problems (bad JSON, missing keys, wrong
types) are errors naming the file and the place in it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from text.answer_targets import answer_words
from text.text_files import read_utf8_lines
from text.whitespace_words import whitespace_words

_log = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    `start_position`/`end_position` are word indices into `doc_tokens`
    (inclusive); -1 for an impossible v2 question; None when not training.
    """

    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass
class ReadReport:
    """What `read_squad_examples` kept and what it skipped, and why."""

    path: str
    examples: int = 0
    answer_mismatches: list[str] = dataclasses.field(default_factory=list)
    empty_contexts: int = 0
    questions_without_context: int = 0
    empty_questions: list[str] = dataclasses.field(default_factory=list)

    @property
    def skipped(self) -> int:
        return (len(self.answer_mismatches) + self.questions_without_context
                + len(self.empty_questions))

    def summary(self) -> str:
        return (f"{self.path}: {self.examples} questions read, {self.skipped} skipped "
                f"({len(self.answer_mismatches)} answers not found at answer_start, "
                f"{len(self.empty_questions)} empty questions, "
                f"{self.questions_without_context} questions on {self.empty_contexts} "
                "empty contexts)")


def read_squad_examples(path: str, is_training: bool, version_2_with_negative: bool
                        ) -> tuple[list[SquadExample], ReadReport]:
    """Every usable question of a SQuAD file, in file order, and the report of skips.

    Raises ValueError for malformed JSON (with line and column), a missing
    or mistyped key (with its place in the JSON and the question id), a
    training question without exactly one answer, a question id used twice
    in a file to predict, or a file with no usable question left.
    """
    path = str(path)
    text = "\n".join(read_utf8_lines(path))
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: malformed JSON at line {error.lineno}, column "
                         f"{error.colno}: {error.msg}") from None
    report = ReadReport(path)
    examples: list[SquadExample] = []
    first_place: dict[str, str] = {}  # question id -> where it first appears
    articles = _field(dataset, "data", list, path, "the top level")
    for a, article in enumerate(articles):
        place = f"data[{a}]"
        for p, paragraph in enumerate(_field(article, "paragraphs", list, path, place)):
            where = f"{place}.paragraphs[{p}]"
            doc_tokens, char_to_word = whitespace_words(_field(paragraph, "context", str, path,
                                                               where))
            questions = _field(paragraph, "qas", list, path, where)
            if not doc_tokens:
                report.empty_contexts += 1
                report.questions_without_context += len(questions)
                _log.warning("%s: %s has an empty context; its %d questions are skipped",
                             path, where, len(questions))
                continue
            for q, qa in enumerate(questions):
                example = _read_question(qa, doc_tokens, char_to_word, is_training,
                                         version_2_with_negative, path, f"{where}.qas[{q}]",
                                         report)
                if example is None:
                    continue
                examples.append(example)
                here = f"{where}.qas[{q}]"
                first = first_place.setdefault(example.qas_id, here)
                if not is_training and first != here:
                    # Answers are keyed by id: one would shadow the other in the scores.
                    raise ValueError(f"{path}: question id {example.qas_id!r} appears twice, "
                                     f"at {first} and {here}; ids must be unique")
    report.examples = len(examples)
    if not examples:
        raise ValueError(f"no usable question in {report.summary()}")
    if report.skipped:
        _log.warning(report.summary())
    return examples, report


def _read_question(qa: Any, doc_tokens: list[str], char_to_word: list[int], is_training: bool,
                   version_2: bool, path: str, where: str, report: ReadReport
                   ) -> SquadExample | None:
    """One `qas` entry as an example, or None (counted in `report`) when it must be skipped."""
    qas_id = str(_field(qa, "id", (str, int), path, where))
    where = f"{where} (id {qas_id!r})"
    question = _field(qa, "question", str, path, where)
    if not question.strip():
        report.empty_questions.append(qas_id)
        _log.warning("%s: question %s is empty; skipped", path, qas_id)
        return None
    example = SquadExample(qas_id, question, doc_tokens)
    if not is_training:
        return example
    if version_2:
        example.is_impossible = bool(_field(qa, "is_impossible", (bool, int), path, where))
    if example.is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return example
    answers = _field(qa, "answers", list, path, where)
    if len(answers) != 1:
        raise ValueError(f"{path}: {where} has {len(answers)} answers; a training question "
                         "needs exactly one")
    answer_text = _field(answers[0], "text", str, path, f"{where}.answers[0]")
    offset = _field(answers[0], "answer_start", int, path, f"{where}.answers[0]")
    found = answer_words(doc_tokens, char_to_word, answer_text, offset)
    if found is not None:
        example.orig_answer_text = answer_text
        example.start_position, example.end_position = found
        return example
    report.answer_mismatches.append(qas_id)
    _log.warning("%s: question %s: answer %r not found at answer_start %d; skipped",
                 path, qas_id, answer_text, offset)
    return None


def _field(obj: Any, key: str, kind: type | tuple[type, ...], path: str, where: str) -> Any:
    """obj[key], checked to exist and be of `kind`; errors say where in the file."""
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: {where} should be a JSON object, found {type(obj).__name__}")
    if key not in obj:
        raise ValueError(f"{path}: {where} lacks the key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{path}: {where}: {key!r} has the wrong type "
                         f"{type(value).__name__}")
    return value
