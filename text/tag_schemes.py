"""Entity tagging schemes: how an I- tag can open an entity (IOB1) or never does (IOB2).

The CoNLL-2003 files are IOB1, where B- appears only between two touching
entities of one type; the entity-level metric reads IOB2. The reader that
detects the scheme and the metric that converts it both need these rules,
so they live below both.
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
