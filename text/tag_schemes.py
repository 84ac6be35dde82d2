"""Entity tagging schemes: how an I- tag can open an entity (IOB1) or never does (IOB2).

The CoNLL-2003 files are IOB1, where B- appears only between two touching
entities of one type; the entity-level metric reads IOB2. The reader that
detects the scheme and the metric that converts it both need these rules,
so they live below both, with the check that tags line up with their words.
"""

from __future__ import annotations

from typing import Sequence


def opens_with_inside(previous: str, tag: str) -> bool:
    """True for an I- tag that starts an entity: IOB1 does this, IOB2 never does."""
    return tag.startswith("I-") and (previous[:2] not in ("B-", "I-") or previous[2:] != tag[2:])


def convert_iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 (B- only between touching entities of one type) -> IOB2 (B- opens every entity)."""
    converted, previous = [], "O"
    for tag in tags:
        converted.append("B-" + tag[2:] if opens_with_inside(previous, tag) else tag)
        previous = tag
    return converted


def check_aligned(first: Sequence[Sequence], second: Sequence[Sequence],
                  count_error: str, length_error: str) -> None:
    """Raises unless `second` holds one sequence per sentence of `first`, each as long.

    Tags are trained and scored word by word, so one tag too many or too few
    would shift every tag after it. The errors are formatted with the two
    counts as `{first}` and `{second}`, and the sentence's `{index}`.
    """
    if len(first) != len(second):
        raise ValueError(count_error.format(first=len(first), second=len(second)))
    for index, (first_items, second_items) in enumerate(zip(first, second)):
        if len(first_items) != len(second_items):
            raise ValueError(length_error.format(index=index, first=len(first_items),
                                                 second=len(second_items)))
