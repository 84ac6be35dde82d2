"""Entity-level precision, recall and F1 for IOB tags, as conlleval (CoNLL-2000/2003) counts them.

NER is scored by entities, not tokens: a predicted entity counts only if
its type, first word and last word all match a gold entity. The reference
is conlleval.pl, the shared task's script, which every published CoNLL-2003
F1 (the paper's 92.4 and 92.8 included) comes from.

Entities are read by seqeval's `get_entities`, the reader behind seqeval's
default (non-strict) mode, which ports conlleval's startOfChunk/endOfChunk
rules. What was checked (conlleval.pl 2004-01-26 run under perl against
this module and seqeval's default-mode `precision_recall_fscore_support`,
on 3000 random batches of IOB1 and IOB2 tag sequences, well- and
ill-formed, types with hyphens included):

- for tags drawn from O, B-TYPE and I-TYPE, the three agree on every count
  (gold, predicted and correct entities, overall and per type);
- conlleval reads IOB1 and IOB2 with the same rules (an I- after O or
  after another type opens an entity; B- always does), so converting IOB1
  to IOB2 first changes no count; `scheme` is accepted for clarity and
  the conversion is applied, but a wrong `scheme` cannot change a score;
- an I- tag that opens an entity in "IOB2" data (ill-formed, frequent in
  model output) counts as an entity, as conlleval counts it;
- sentence ends close entities, as conlleval's blank lines do;
- E- and S- tags (IOE, IOBES) are read differently by the two (seqeval
  ends an entity after E-, conlleval only where the next tag says so), so
  they are rejected here rather than scored one way or the other.

Scores are fractions in [0, 1] (conlleval prints percentages), 0.0 where a
denominator is 0 (conlleval's convention); per-type `support` is the
number of gold entities of that type.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from text.tag_schemes import check_aligned, convert_iob1_to_iob2

SCHEMES = ("IOB1", "IOB2")
Entity = tuple[str, int, int, int]  # type, sentence, first word, last word


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                  scheme: str = "IOB2") -> dict:
    """Overall and per-type entity precision/recall/F1, as conlleval computes them.

    Returns {"precision", "recall", "f1": fractions, "support": gold
    entities, "predicted": predicted entities, "correct": exact matches,
    "per_type": {TYPE: {"precision", "recall", "f1", "support"}}}. Raises
    ValueError for sequences of different lengths, an unknown scheme, or a
    tag that is not O, B-TYPE or I-TYPE.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    _check_lengths(gold, predicted)
    gold_entities = _entities(gold, scheme, "gold")
    predicted_entities = _entities(predicted, scheme, "predicted")
    correct_entities = gold_entities & predicted_entities
    gold_count, predicted_count, correct_count = (
        Counter(entity[0] for entity in entities)
        for entities in (gold_entities, predicted_entities, correct_entities))
    per_type = {}
    for entity_type in sorted(gold_count.keys() | predicted_count.keys()):
        precision, recall, f1 = _prf(correct_count[entity_type], predicted_count[entity_type],
                                     gold_count[entity_type])
        per_type[entity_type] = {"precision": precision, "recall": recall, "f1": f1,
                                 "support": gold_count[entity_type]}
    precision, recall, f1 = _prf(len(correct_entities), len(predicted_entities),
                                 len(gold_entities))
    return {"precision": precision, "recall": recall, "f1": f1,
            "support": len(gold_entities), "predicted": len(predicted_entities),
            "correct": len(correct_entities), "per_type": per_type}


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Share of words whose tag is exactly right, O included (conlleval's "accuracy").

    Both sides must use the same scheme: an IOB1 gold B- and an IOB2 I-
    for the same entity word differ here, though not in `entity_scores`.
    """
    _check_lengths(gold, predicted)
    total = sum(len(sentence) for sentence in gold)
    if not total:
        raise ValueError("no words to score")
    right = sum(g == p for gold_tags, predicted_tags in zip(gold, predicted)
                for g, p in zip(gold_tags, predicted_tags))
    return right / total


def _check_lengths(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> None:
    check_aligned(gold, predicted, "{first} gold sentences but {second} predicted",
                  "sentence {index}: {first} gold tags but {second} predicted")


def _entities(sequences: Sequence[Sequence[str]], scheme: str, side: str) -> set[Entity]:
    # Imported here: seqeval's package imports scikit-learn, which a run that never
    # scores a dev set is spared.
    from seqeval.metrics.sequence_labeling import get_entities

    entities = set()
    for index, tags in enumerate(sequences):
        for position, tag in enumerate(tags):
            if tag != "O" and (tag[:2] not in ("B-", "I-") or len(tag) < 3):
                raise ValueError(f"{side} sentence {index}, word {position}: tag {tag!r} is "
                                 "not O, B-TYPE or I-TYPE")
        tags = convert_iob1_to_iob2(tags) if scheme == "IOB1" else list(tags)
        entities.update((entity_type, index, first, last)
                        for entity_type, first, last in get_entities(tags))
    return entities


def _prf(correct: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
