"""Overlapping windows over a token sequence too long for one input, and which one scores a token.

SQuAD contexts and CoNLL sentences longer than the encoder's input are
covered by windows starting every `stride` tokens, so a span cut by one
window's edge lies whole in another. A token seen in several windows is
then scored in only one: the original run_squad.py's `_check_is_max_context`
picks the window where it has the most context on its shorter side,
`min(tokens left of it, tokens right of it) + 0.01 * window length` (the
small term prefers longer windows; ties go to the earlier window), since a
token near a window's edge is predicted with half its context missing.
Both tasks use the rule from here, so they cannot score windows differently.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def windows(num_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the windows over `num_tokens` tokens; none for no tokens.

    Windows of `max_tokens` start `stride` tokens apart (at most a window
    apart, so no token is skipped); the last one ends at the last token.
    """
    if max_tokens < 1 or stride < 1:
        raise ValueError(f"window length ({max_tokens}) and stride ({stride}) must be positive")
    spans: list[tuple[int, int]] = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return spans


def max_context_owners(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """For each of `num_tokens` tokens, the index of the (start, length) span that scores it.

    A token in no span gets 0; callers ask only about covered tokens.
    """
    scores = np.full((max(len(spans), 1), num_tokens), -np.inf)
    for index, (start, length) in enumerate(spans):
        left = np.arange(length)
        scores[index, start:start + length] = np.minimum(left, left[::-1]) + 0.01 * length
    return np.argmax(scores, axis=0)
