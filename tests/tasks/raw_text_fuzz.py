"""The child process of test_raw_text_crash: random text through every door that takes it.

Run as `python -m tests.tasks.raw_text_fuzz SEED BATCHES FOLDER`. It builds a
tiny model, its preprocessor layer, the TF Hub preprocess and encoder
SavedModels and the classifier, span and tagger SavedModels on raw strings,
then feeds them random batches: sizes from 0, pairs whose columns differ in
length, empty rows and strings, long texts, control characters and bytes
that are not UTF-8. Each answer must be well formed (and, where the runners
have a packer, equal to its packing); each error must be the readable one
the case calls for. A crash kills this process, which the parent sees in its
exit status. The last line printed is a JSON object: batches by door, and
the first failures with their inputs.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import tensorflow as tf

from export.serving import export_classifier
from export.serving_span import export_span_model
from export.serving_tagging import export_tagger
from modeling import (BertClassifier, BertConfig, BertSpanModel, BertTokenTagger,
                      export_tf_hub, load_preprocessor, load_tokenizer)
from tasks.squad import SquadTask
from tests.fixtures import TINY_CONFIG
from tests.modeling.tiny_folder import VOCAB, WORDS, tiny_folder
from text.sentence_pairs import pack_ids
from text.whitespace_words import whitespace_words

LENGTH = 16  # the exports' sequence length; the preprocessor layers take others too
MAX_POSITIONS = TINY_CONFIG["max_position_embeddings"]
CLS, SEP, UNK = (VOCAB.index(token) for token in ("[CLS]", "[SEP]", "[UNK]"))
TAGS, CLASSES = ["O", "B-X", "I-X"], ["neg", "pos"]
HUB_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
# The readable errors a case may end in: each says what was wrong, with the values.
MISMATCH = r"differ in batch size: \d+ and \d+; give one of each per example"
ROW_MISMATCH = r"words and word_labels differ in row \d+: \d+ and \d+ items"
SEQ_LENGTH = rf"seq_length must be from 3 to {MAX_POSITIONS} \(max_position_embeddings\), got"
SEGMENTS = r"bert_pack_inputs packs one or two segments \(BERT has two segment types\), got 3"
CONTROL = ["\x00", "\x01", "\t", "\n", "\r", "\x0b", "\x1b", "\x7f", "\x85", "\x9f", "\u200b",
           "\u2028", "\ufeff", "\ufffd", "\u0301", "\U0001f600", "\ue000"]
UNICODE = ["café", "naïve", "中文字", "Ελληνικά", "e\u0301", "ﬁne", "ＡＢＣ", "İstanbul", "ß"]
NOT_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf",
            b"\xf8\x88\x80\x80\x80", b"\x80"]


class Case(NamedTuple):
    door: str
    call: Callable[[], Any]
    check: Callable[[Any], None] | None  # None: the call must fail
    error: str | None  # the pattern its error must match
    inputs: Any  # shown on failure


class Fuzzer:
    """Random inputs from one seed; texts are str, or bytes (always when not UTF-8)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def pick(self, items):
        return items[int(self.rng.integers(len(items)))]

    def size(self) -> int:
        return int(self.pick([0, 0, 1, 1, 2, 3, 4, 5, 7]))

    def other_size(self, size: int) -> int:
        return self.pick([other for other in range(6) if other != size])

    def word(self) -> str | bytes:
        kind = int(self.rng.integers(10))
        if kind < 6:
            return self.pick(WORDS)
        if kind == 6:
            return self.pick(UNICODE)
        if kind == 7:
            return self.pick(WORDS) + self.pick(CONTROL) + self.pick(WORDS)
        if kind == 8:
            return self.pick(WORDS).encode() + self.pick(NOT_UTF8)
        return "x" * int(self.rng.integers(150, 260))  # around the original's 200 characters

    def text(self) -> str | bytes:
        kind = int(self.rng.integers(12))
        if kind == 0:
            return ""
        if kind == 1:
            return self.pick([" ", "\t\n", "\u3000", "\x00", "\u200b \u200b"])
        words = [self.word() for _ in range(int(self.rng.integers(1, 400 if kind == 2 else 12)))]
        gaps = [self.pick([" ", " ", " ", "  ", "\t", "\n", "", ",", "\x00"]) for _ in words]
        if any(isinstance(word, bytes) for word in words) or self.rng.integers(4) == 0:
            return b"".join(_bytes(word) + _bytes(gap) for word, gap in zip(words, gaps))
        return "".join(word + gap for word, gap in zip(words, gaps))

    def texts(self, count: int) -> list:
        return [self.text() for _ in range(count)]

    def sentences(self, count: int) -> list[list]:
        """Sentences as words; a few words empty or holding spaces."""
        return [[self.pick(["", " ", "a b"]) if self.rng.integers(8) == 0 else self.word()
                 for _ in range(int(self.rng.integers(0, 40)))] for _ in range(count)]


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def _strings(texts: list) -> tf.Tensor:
    return tf.constant([_bytes(text) for text in texts], tf.string, shape=[len(texts)])


def _ragged(sentences: list[list]) -> tf.RaggedTensor:
    return tf.RaggedTensor.from_row_lengths(
        _strings([word for words in sentences for word in words]),
        [len(words) for words in sentences])


def check_packed(outputs: dict, expected: dict, keys=("input_ids", "input_mask",
                                                      "segment_ids")) -> None:
    """Equal to the runners' packing, which is itself checked for the layout's invariants:
    ids in the vocabulary, [CLS] first, the mask a prefix of ones, segments 0 on padding."""
    ids, mask, segments = (np.asarray(outputs[key]) for key in keys)
    for got, want in zip((ids, mask, segments), expected.values()):
        assert got.shape == want.shape and (got == want).all(), (got, want)
    rows, length = ids.shape
    assert ((ids >= 0) & (ids < len(VOCAB))).all() and (rows == 0 or (ids[:, 0] == CLS).all())
    lengths = mask.sum(axis=1)
    assert (mask == (np.arange(length)[None, :] < lengths[:, None])).all() and (lengths >= 2).all()
    assert (ids[mask == 0] == 0).all() and (segments[mask == 0] == 0).all()


class Doors:
    """Everything fed, built once from a tiny model: the layer and the SavedModels."""

    def __init__(self, root: Path):
        folder = tiny_folder(root)
        self.tokenizer = load_tokenizer(folder)
        self.layers = {length: load_preprocessor(folder, sequence_length=length)
                       for length in (3, 9, MAX_POSITIONS)}
        # The layer inside a graph (a tf.data map or a SavedModel sees unknown batch sizes).
        self.in_graph = tf.function(lambda a, b: self.layers[9]((a, b)),
                                    input_signature=[tf.TensorSpec([None], tf.string)] * 2)
        hub = export_tf_hub(folder, root / "hub", LENGTH)
        self.hub_preprocess = tf.saved_model.load(str(hub / "preprocess"))
        # Its signature, a concrete function: the loaded __call__ traces anew per batch size.
        self.hub_encoder = tf.saved_model.load(str(hub / "encoder")).signatures["serving_default"]
        # Called eagerly, a loaded tf.function without an input signature traces again for
        # each new input shape (a third of a second); inside a function of relaxed shapes,
        # as in a Keras model or tf.data, it runs the same exported graphs, traced once.
        self.hub_pack = tf.function(self.hub_preprocess.bert_pack_inputs, reduce_retracing=True)
        config = BertConfig.from_dict({**TINY_CONFIG, "num_hidden_layers": 1})  # quicker export
        tf.keras.utils.set_random_seed(0)
        self.classifier = tf.saved_model.load(export_classifier(
            BertClassifier(config, num_labels=2), self.tokenizer, LENGTH, CLASSES, pair=True,
            path=str(root / "classifier"))).signatures
        self.span = tf.saved_model.load(export_span_model(
            BertSpanModel(config), self.tokenizer, LENGTH,
            SquadTask(max_query_length=6, max_answer_length=5, version_2_with_negative=True),
            str(root / "span"))).signatures["serving_default"]
        self.tagger = tf.saved_model.load(export_tagger(
            BertTokenTagger(config, len(TAGS)), self.tokenizer, LENGTH, TAGS,
            str(root / "tagger"))).signatures

    def ids(self, texts: list) -> list[list[int]]:
        return self.tokenizer(_strings(texts)).to_list() if texts else []

    def word_ids(self, sentences: list[list], unknown: list[int] | None = None
                 ) -> list[list[int]]:
        """Each sentence's words tokenized alone; a word of none gets `unknown`: [UNK] as in
        the tagging runners, or no position (`[]`) as in the SQuAD runner."""
        unknown = [UNK] if unknown is None else unknown
        pieces = iter(self.ids([word for words in sentences for word in words]))
        return [[piece for _ in words for piece in (next(pieces) or unknown)]
                for words in sentences]

    def packed(self, ids_a: list, ids_b: list | None, length: int) -> dict:
        return pack_ids(ids_a, ids_b or [None] * len(ids_a), length, CLS, SEP)


def layer_case(doors: Doors, fuzz: Fuzzer) -> Case:
    """The preprocessor layer: single texts, pair columns, rows of pairs, a scalar, and
    columns of different lengths (eagerly, then in a graph)."""
    length = fuzz.pick(sorted(doors.layers))
    layer, size = doors.layers[length], fuzz.size()
    texts_a, texts_b = fuzz.texts(size), fuzz.texts(size)
    kind = int(fuzz.rng.integers(6))
    if kind == 0:
        return Case("layer: single texts", lambda: layer(texts_a),
                    lambda out: check_packed(out, doors.packed(doors.ids(texts_a), None, length)),
                    None, texts_a)
    expected = doors.packed(doors.ids(texts_a), doors.ids(texts_b), length)
    if kind == 1:
        return Case("layer: pair columns", lambda: layer((texts_a, texts_b)),
                    lambda out: check_packed(out, expected), None, (texts_a, texts_b))
    if kind == 2:
        rows = list(zip(texts_a, texts_b))
        return Case("layer: rows of pairs", lambda: layer(rows),
                    lambda out: check_packed(out, expected), None, rows)
    if kind == 3:
        text = fuzz.text()
        single = doors.packed(doors.ids([text]), None, length)
        return Case("layer: scalar", lambda: layer(text),
                    lambda out: check_packed({k: v[None] for k, v in out.items()}, single),
                    None, text)
    seconds = fuzz.texts(fuzz.other_size(size))
    if kind == 4:
        return Case("layer: mismatched pair", lambda: layer((texts_a, seconds)), None,
                    MISMATCH, (texts_a, seconds))
    return Case("layer: mismatched pair in a graph",
                lambda: doors.in_graph(_strings(texts_a), _strings(seconds)), None, MISMATCH,
                (texts_a, seconds))


def words_case(doors: Doors, fuzz: Fuzzer) -> Case:
    """`pack_words` (labels one per word, or not) and `pack_question_words`."""
    length = fuzz.pick(sorted(doors.layers))
    layer, size = doors.layers[length], fuzz.size()
    sentences = fuzz.sentences(size)
    if fuzz.rng.integers(2) == 0:
        labels = [[0] * len(words) for words in sentences]
        error = None
        if size and fuzz.rng.integers(4) == 0:  # a row with one label too many
            labels[int(fuzz.rng.integers(size))].append(0)
            error = ROW_MISMATCH
        ragged_labels = tf.RaggedTensor.from_row_lengths(
            tf.zeros([sum(map(len, labels))], tf.int32), [len(row) for row in labels])
        expected = doors.packed(doors.word_ids(sentences), None, length)

        def check_words(result):
            packed, starts, token_labels = result
            check_packed(packed, expected)
            token_labels = np.asarray(token_labels)
            assert token_labels.shape == (size, length)
            for row, row_starts in enumerate(starts.to_list()):
                assert len(row_starts) == len(sentences[row])
                kept = [start for start in row_starts if start >= 0]
                assert kept == sorted(set(kept)) and all(0 < p < length - 1 for p in kept)
                assert np.flatnonzero(token_labels[row] == 0).tolist() == kept
        return Case("pack_words", lambda: layer.pack_words(_ragged(sentences), ragged_labels),
                    check_words, error, (sentences, labels))
    questions = fuzz.texts(size)
    contexts = fuzz.sentences(fuzz.pick([size, size, fuzz.other_size(size)]))
    if len(contexts) != size:
        return Case("pack_question_words", lambda: layer.pack_question_words(
            _strings(questions), _ragged(contexts)), None, MISMATCH, (questions, contexts))
    expected = doors.packed(doors.ids(questions), doors.word_ids(contexts, []), length)
    return Case("pack_question_words",
                lambda: layer.pack_question_words(_strings(questions), _ragged(contexts))[0],
                lambda out: check_packed(out, expected), None, (questions, contexts))


def hub_case(doors: Doors, fuzz: Fuzzer) -> Case:
    """TF Hub's preprocess (with the encoder after it) and `bert_pack_inputs` with one to
    three segments, of words or of pieces, any `seq_length`, columns of any lengths."""
    size = fuzz.size()
    if fuzz.rng.integers(3) == 0:
        texts = fuzz.texts(size)
        expected = doors.packed(doors.ids(texts), None, LENGTH)

        def check_encoded(outputs):
            check_packed(outputs, expected, HUB_KEYS)
            encoded = doors.hub_encoder(**outputs)
            assert encoded["pooled_output"].shape == (size, TINY_CONFIG["hidden_size"])
            assert np.isfinite(encoded["sequence_output"].numpy()).all()
        return Case("hub: preprocess + encoder", lambda: doors.hub_preprocess(_strings(texts)),
                    check_encoded, None, texts)
    sizes = [size] * int(fuzz.pick([1, 2, 2, 3]))
    if len(sizes) > 1 and fuzz.rng.integers(3) == 0:
        sizes[1] = fuzz.other_size(size)
    seq_length = fuzz.pick([None, None, 2, 3, 7, LENGTH, MAX_POSITIONS, MAX_POSITIONS + 1,
                            100000, -1])
    texts = [fuzz.texts(count) for count in sizes]
    segments = [doors.hub_preprocess.tokenize(_strings(column)) for column in texts]
    flat = fuzz.rng.integers(2) == 0
    if flat:
        segments = [segment.merge_dims(1, 2) for segment in segments]
    arguments = {} if seq_length is None else {"seq_length": tf.constant(seq_length)}
    inputs = (texts, seq_length, "pieces" if flat else "words")

    def call():
        return doors.hub_pack(segments, **arguments)
    error = (SEQ_LENGTH if seq_length is not None and not 3 <= seq_length <= MAX_POSITIONS else
             SEGMENTS if len(sizes) == 3 else MISMATCH if len(set(sizes)) > 1 else None)
    if error:
        return Case("hub: bert_pack_inputs", call, None, error, inputs)
    expected = doors.packed(doors.ids(texts[0]), doors.ids(texts[1]) if len(texts) > 1 else None,
                            seq_length or LENGTH)
    return Case("hub: bert_pack_inputs", call,
                lambda out: check_packed(out, expected, HUB_KEYS), None, inputs)


def classifier_case(doors: Doors, fuzz: Fuzzer) -> Case:
    size = fuzz.size()
    texts_a = fuzz.texts(size)

    def check_classes(outputs):
        probabilities = outputs["probabilities"].numpy()
        assert probabilities.shape == (size, 2) and np.isfinite(probabilities).all()
        assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-5)
        labels = [CLASSES[index].encode() for index in probabilities.argmax(axis=1)]
        assert outputs["label"].numpy().tolist() == labels
    if fuzz.rng.integers(3) == 0:
        return Case("classifier: serve_single", lambda: doors.classifier["serve_single"](
            text_a=_strings(texts_a)), check_classes, None, texts_a)
    texts_b = fuzz.texts(fuzz.pick([size, size, fuzz.other_size(size)]))
    same = len(texts_b) == size
    return Case("classifier: serve_pair", lambda: doors.classifier["serve_pair"](
        text_a=_strings(texts_a), text_b=_strings(texts_b)), check_classes if same else None,
        None if same else MISMATCH, (texts_a, texts_b))


def span_case(doors: Doors, fuzz: Fuzzer) -> Case:
    size = fuzz.size()
    questions = fuzz.texts(size)
    contexts = fuzz.texts(fuzz.pick([size, size, fuzz.other_size(size)]))

    def check_answers(outputs):
        answers = outputs["answer"].numpy().tolist()
        assert len(answers) == size
        for row, answer in enumerate(answers):
            start, end = int(outputs["start"][row]), int(outputs["end"][row])
            context = contexts[row]
            if not answer:
                assert (start, end) == (-1, -1), (start, end)
            elif isinstance(context, str):  # characters of valid UTF-8: Python's own indices
                # The runner's answer: the context's words there, joined by single spaces.
                words = whitespace_words(context[start:end])[0]
                assert " ".join(words) == answer.decode(), (context, start, end, answer)
            else:
                joined = re.sub(rb"(?:[ \t\r\n]|\xe2\x80\xaf)+", b" ", context)
                assert 0 <= start <= end and answer in joined, (start, end, answer)
    same = len(contexts) == size
    return Case("span: serve", lambda: doors.span(question=_strings(questions),
                                                  context=_strings(contexts)),
                check_answers if same else None, None if same else MISMATCH,
                (questions, contexts))


def tagger_case(doors: Doors, fuzz: Fuzzer) -> Case:
    size = fuzz.size()
    allowed = {tag.encode() for tag in TAGS} | {b""}
    if fuzz.rng.integers(2) == 0:
        sentences = fuzz.texts(size)

        def check_sentences(outputs):
            tags, words = outputs["tags"].numpy(), outputs["words"].numpy()
            assert tags.shape == words.shape and len(tags) == size
            assert set(tags.ravel().tolist()) <= allowed
            assert all(not tag for tag in tags[words == b""])
        return Case("tagger: tag_sentence", lambda: doors.tagger["serving_default"](
            sentence=_strings(sentences)), check_sentences, None, sentences)
    sentences = fuzz.sentences(size)  # a last word "" is padding: it gets no tag
    width = max([len(words) for words in sentences] + [int(fuzz.rng.integers(0, 3))])
    grid = [[_bytes(word) for word in words] + [b""] * (width - len(words))
            for words in sentences]

    def check_words(outputs):
        tags, words = outputs["tags"].numpy(), outputs["words"].numpy()
        assert tags.shape == words.shape and len(tags) == size
        assert set(tags.ravel().tolist()) <= allowed
        for row, given in enumerate(grid):
            count = max([index + 1 for index, word in enumerate(given) if word] + [0])  # words
            assert words[row][:count].tolist() == given[:count] and not any(words[row][count:])
            assert not any(tags[row][count:])
    return Case("tagger: tag_words", lambda: doors.tagger["tag_words"](
        words=tf.constant(grid, tf.string, shape=[size, width])), check_words, None, grid)


DOORS = (layer_case, layer_case, words_case, hub_case, classifier_case, span_case, tagger_case)


def run(case: Case) -> str | None:
    """None if the door answered well or refused as it should; else what went wrong."""
    try:
        result = case.call()
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as error:
        message = getattr(error, "message", str(error))
        if case.error and re.search(case.error, message):
            return None
        return f"{type(error).__name__}: {message}"[-1500:]
    if case.check is None:
        return "answered where an error was due"
    try:
        case.check(result)
    except Exception as error:  # noqa: BLE001 (any error of the check is a bad output)
        return f"bad output: {type(error).__name__}: {str(error)[:1000]}"
    return None


def main(seed: int, batches: int, root: Path) -> None:
    started = time.monotonic()
    doors = Doors(root)
    built = time.monotonic() - started
    fuzz = Fuzzer(seed)
    counts: dict[str, dict[str, int]] = {}
    failures = []
    for _ in range(batches):
        case = fuzz.pick(DOORS)(doors, fuzz)
        problem = run(case)
        tally = counts.setdefault(case.door, {"answers": 0, "refusals": 0, "failures": 0})
        tally["failures" if problem else "refusals" if case.error else "answers"] += 1
        if problem:
            failures.append({"door": case.door, "expected": case.error, "problem": problem,
                             "inputs": repr(case.inputs)[:600]})
    print(json.dumps({"seed": seed, "batches": batches, "counts": counts,
                      "failures": failures[:5], "build_seconds": round(built, 1),
                      "seconds": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
