"""SWAG (Zellers et al., 2018) CSV files -> multiple-choice examples -> [N, choices, S] features.

SWAG asks which of four endings continues a video caption. The paper
(Section 4.4) builds four sequences, the given sentence as segment A and
one possible continuation as segment B, scores each from its [CLS] vector,
and takes a softmax over the four scores. Each choice here is packed as
`[CLS] sent1 [SEP] sent2 ending_i [SEP]`: the second sentence's opening
words (`sent2`, which every ending continues) joined with the ending form
the continuation, as in the widely used BERT SWAG ports (Hugging Face's
`run_swag` among them). Pairs are shortened longest-first, as in GLUE.

Unlike GLUE's TSV files, the distribution's `train.csv`, `val.csv` and
`test.csv` were written by pandas with standard CSV quoting (endings hold
commas and quotes), so they are read by the csv module with its default
dialect; columns are found by header name (`video-id`, `fold-ind`, `sent1`,
`sent2`, `ending0`..`ending3`, and `label` except in test.csv). Text is
strict UTF-8 through `read_utf8_lines`, and errors name `file:line`.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
from typing import Sequence

import numpy as np

from text.sentence_pairs import pack_ids
from text.text_files import read_utf8_lines

NUM_CHOICES = 4
ENDING_COLUMNS = tuple(f"ending{i}" for i in range(NUM_CHOICES))
TEXT_COLUMNS = ("fold-ind", "sent1", "sent2", *ENDING_COLUMNS)


@dataclasses.dataclass
class MultipleChoiceExample:
    """A context, the opening shared by every ending, the endings, and the gold ending's index."""

    guid: str
    context: str
    start_ending: str
    endings: list[str]
    label: int | None


def read_swag(path: str, has_label: bool) -> list[MultipleChoiceExample]:
    """Examples of one SWAG CSV file; guids are its `fold-ind` values.

    `has_label` is False for test.csv, which has no `label` column.
    """
    path = str(path)
    reader = csv.reader(line + "\n" for line in read_utf8_lines(path))
    try:
        examples = _read_rows(path, reader, has_label)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; SWAG's distribution has train.csv, "
                                "val.csv and test.csv") from None
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: malformed CSV: {error}") from None
    if not examples:
        raise ValueError(f"{path}: holds no examples")
    return examples


def _read_rows(path: str, reader, has_label: bool) -> list[MultipleChoiceExample]:
    header = next(reader, None)
    if header is None:
        return []
    header = [name.strip().removeprefix("\ufeff") for name in header]
    wanted = TEXT_COLUMNS + (("label",) if has_label else ())
    missing = [name for name in wanted if name not in header]
    if missing:
        raise ValueError(f"{path}: header lacks SWAG columns {', '.join(missing)} "
                         f"(has {', '.join(header)})")
    at = {name: header.index(name) for name in wanted}
    needed = 1 + max(at.values())
    examples = []
    for row in reader:
        if not row:
            continue
        if len(row) < needed:
            raise ValueError(f"{path}:{reader.line_num}: {len(row)} columns, at least "
                             f"{needed} needed")
        label = None
        if has_label:
            text = row[at["label"]].strip()
            if text not in {str(i) for i in range(NUM_CHOICES)}:
                raise ValueError(f"{path}:{reader.line_num}: label {text!r} is not one of "
                                 f"0..{NUM_CHOICES - 1}")
            label = int(text)
        examples.append(MultipleChoiceExample(
            guid=row[at["fold-ind"]].strip(), context=row[at["sent1"]],
            start_ending=row[at["sent2"]], endings=[row[at[name]] for name in ENDING_COLUMNS],
            label=label))
    return examples


def convert_multiple_choice(examples: Sequence[MultipleChoiceExample], tokenizer,
                            max_seq_length: int) -> dict[str, np.ndarray]:
    """int32 `input_ids`, `input_mask`, `segment_ids` [N, choices, S] and `label_ids` [N].

    Unlabelled examples get label 0. How many choices lost tokens to
    truncation is logged.
    """
    if not examples:
        raise ValueError("no examples to convert")
    num_choices = len(examples[0].endings)
    for example in examples:
        if len(example.endings) != num_choices:
            raise ValueError(f"example {example.guid}: {len(example.endings)} endings, "
                             f"the first example has {num_choices}")
        if example.label is not None and not 0 <= example.label < num_choices:
            raise ValueError(f"example {example.guid}: label {example.label} is not a "
                             f"choice index 0..{num_choices - 1}")
    contexts = tokenizer.tokenize_many([example.context for example in examples])
    starts = tokenizer.tokenize_many([example.start_ending for example in examples])
    endings = tokenizer.tokenize_many([ending for example in examples
                                         for ending in example.endings])
    firsts, seconds = [], []
    for i in range(len(examples)):
        for choice in range(num_choices):
            firsts.append(contexts[i])
            seconds.append(starts[i] + endings[i * num_choices + choice])
    truncated = sum(len(first) + len(second) + 3 > max_seq_length
                    for first, second in zip(firsts, seconds))
    packed = pack_ids([tokenizer.convert_tokens_to_ids(tokens) for tokens in firsts],
                      [tokenizer.convert_tokens_to_ids(tokens) for tokens in seconds],
                      max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
    shape = (len(examples), num_choices, max_seq_length)
    features = {name: values.reshape(shape) for name, values in packed.items()}
    features["label_ids"] = np.array([example.label or 0 for example in examples], np.int32)
    if truncated:
        logging.info("%d of %d (context, ending) pairs were truncated to %d tokens", truncated,
                     len(examples) * num_choices, max_seq_length)
    return features
