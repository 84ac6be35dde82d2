"""Sliding windows and the "max context" rule that SQuAD features and CoNLL windows share."""

import numpy as np
import pytest

from text.sliding_windows import max_context_owners, windows


def _best_window(spans, position):
    """The rule as the original's loop: only a strictly better score wins, ties stay early."""
    best, best_score = None, None
    for index, (start, length) in enumerate(spans):
        if not start <= position < start + length:
            continue
        score = min(position - start, start + length - 1 - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = index, score
    return best


def test_windows_step_by_stride_and_end_at_the_last_token():
    assert windows(10, 6, 2) == [(0, 6), (2, 6), (4, 6)]
    assert windows(7, 3, 3) == [(0, 3), (3, 3), (6, 1)]
    assert windows(4, 6, 2) == [(0, 4)]
    assert windows(0, 6, 2) == []


def test_a_stride_longer_than_a_window_skips_no_token():
    assert windows(7, 3, 5) == [(0, 3), (3, 3), (6, 1)]


@pytest.mark.parametrize("max_tokens, stride", [(0, 1), (3, 0)])
def test_windows_reject_non_positive_sizes(max_tokens, stride):
    with pytest.raises(ValueError, match="must be positive"):
        windows(5, max_tokens, stride)


@pytest.mark.parametrize("seed", range(4))
def test_owner_is_the_window_of_most_context(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        num_tokens = int(rng.integers(1, 40))
        spans = windows(num_tokens, int(rng.integers(1, 12)), int(rng.integers(1, 12)))
        owners = max_context_owners(spans, num_tokens).tolist()
        assert owners == [_best_window(spans, p) for p in range(num_tokens)], spans


def test_equal_context_goes_to_the_longer_then_the_earlier_window():
    # token 3 has 1 token of context on its short side in both; the second window is longer
    assert max_context_owners([(2, 3), (2, 4)], 6).tolist()[3] == 1
    # token 3 has 1 token on its short side in both windows of equal length: the first keeps it
    assert max_context_owners([(0, 5), (2, 5)], 7).tolist()[3] == 0
