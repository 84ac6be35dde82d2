"""The preprocessors (one per task) over drawn settings, hostile strings, lists and labels.

The property, as for the models (`property_strategies`): a preprocessor is
built and packs rows of ids inside its vocabulary, a 0/1 mask and segment
ids, one row per text; or the call is refused in the library's own words,
naming an argument (or what the texts are called: `texts_a`, `sentence 1`,
`questions`), never a graph or Python internals error.
"""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from modeling import (BertClassifierPreprocessor, BertPreprocessor, BertSpanPreprocessor,
                      BertTaggerPreprocessor)
from tests.modeling.property_strategies import (CLASS_LABELS, HOSTILE, ODD_STRINGS, ODD_TEXT,
                                                ContractTestCase, budget, folder_digest,
                                                keyword_arguments, names_of)
from tests.modeling.tiny_folder import VOCAB, tiny_folder

LENGTH = 8
PREPROCESSORS = (BertPreprocessor, BertClassifierPreprocessor, BertTaggerPreprocessor)
# What the texts, pairs and labels a call takes are called in its messages.
DATA_WORDS = ("x", "y", "text", "texts_a", "texts_b", "pair", "rows", "strings", "sentence",
              "words", "word", "questions", "contexts", "answer", "label", "tags",
              "sample_weight", "weight", "examples")
TEXTS = st.one_of(st.lists(ODD_TEXT, max_size=4), HOSTILE)
WORD_LISTS = st.one_of(st.lists(st.one_of(st.lists(ODD_TEXT, max_size=4), HOSTILE),
                                max_size=3), HOSTILE)
VOCABULARIES = st.one_of(st.just(VOCAB), st.lists(st.sampled_from(ODD_STRINGS), max_size=5),
                         HOSTILE)
# (class, its keyword arguments): the span preprocessor declares BertPreprocessor's.
BUILDS = st.one_of(*(st.tuples(st.just(preprocessor_class), keyword_arguments(
    (preprocessor_class if preprocessor_class is not BertSpanPreprocessor
     else BertPreprocessor).__init__, skip=("vocabulary",)))
    for preprocessor_class in (*PREPROCESSORS, BertSpanPreprocessor)))
LOADS = st.one_of(*(st.tuples(st.just(preprocessor_class), st.builds(
    lambda loading, own: {**loading, **own},
    keyword_arguments(BertPreprocessor.from_pretrained, skip=("source",)),
    keyword_arguments(preprocessor_class.__init__, skip=(
        "vocabulary", "do_lower_case", "sequence_length"))))
    for preprocessor_class in PREPROCESSORS))
WEIGHTS = st.one_of(st.none(), st.lists(st.one_of(st.floats(0, 2), HOSTILE), max_size=4),
                    HOSTILE)


class PreprocessorPropertiesTest(ContractTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)
        cls.digest = folder_digest(cls.root)
        cls.plain = BertPreprocessor(VOCAB, sequence_length=LENGTH)
        cls.classifier = BertClassifierPreprocessor(VOCAB, sequence_length=LENGTH,
                                                    label_names=["neg", "pos"])
        cls.tagger = BertTaggerPreprocessor(VOCAB, sequence_length=LENGTH, num_labels=3)
        cls.span = BertSpanPreprocessor(VOCAB, sequence_length=16)

    def assert_packed(self, packed: dict, rows: int | None, length: int = LENGTH,
                      vocabulary: int = len(VOCAB)) -> None:
        """Packed rows: ids in the vocabulary, a 0/1 mask starting at [CLS], segments 0/1."""
        shape = (length,) if rows is None else (rows, length)  # None: one bare text
        self.assertEqual(packed["input_ids"].shape, shape)
        self.assertEqual(packed["segment_ids"].shape, shape)
        ids, mask = (np.reshape(packed[key].numpy(), (-1, length))
                     for key in ("input_ids", "input_mask"))
        self.assertTrue(((ids >= 0) & (ids < vocabulary)).all(), ids)
        self.assertTrue(((mask == 0) | (mask == 1)).all())
        self.assertTrue((mask[:, 0] == 1).all())

    def call_or_refusal(self, call, named, *arguments):
        """`call(*arguments)`'s result, or None after checking its refusal names one of `named`."""
        try:
            return call(*arguments)
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            self.assert_refused(error, named)
            return None

    @budget(quick=6)
    @given(built=BUILDS, vocabulary=VOCABULARIES)
    @example(built=(BertPreprocessor, {}), vocabulary=float("nan"))
    @example(built=(BertTaggerPreprocessor, {"label_names": []}), vocabulary=VOCAB)
    def test_each_preprocessor_builds_or_names_the_argument(self, built, vocabulary):
        preprocessor_class, arguments = built
        preprocessor = self.call_or_refusal(lambda: preprocessor_class(vocabulary, **arguments),
                                            ["vocabulary", *names_of(arguments)])
        if preprocessor is not None and vocabulary is VOCAB:
            texts = (["who sat?"], ["the cat"]) if preprocessor_class is BertSpanPreprocessor \
                else ["a fine film"]
            self.assert_packed(preprocessor(texts), 1, preprocessor.sequence_length)

    @budget(quick=6)
    @given(loaded=LOADS, source=st.sampled_from(["tiny", "", "missing"]) | HOSTILE)
    @example(loaded=(BertPreprocessor, {}), source="\ud7ff\ue000")
    def test_from_pretrained_loads_or_names_the_argument(self, loaded, source):
        preprocessor_class, arguments = loaded
        path = {"tiny": str(self.folder), "missing": str(self.root / "missing")}.get(
            source, source) if isinstance(source, str) else source
        preprocessor = self.call_or_refusal(
            lambda: preprocessor_class.from_pretrained(path, **arguments),
            ["source", *names_of(arguments), *names_of({"source": path})])
        if preprocessor is not None:
            self.assert_packed(preprocessor(["the cat sat"]), 1, preprocessor.sequence_length)
        self.assertEqual(folder_digest(self.root), self.digest)

    @example(texts=["a", "b"], pairs=["c"])
    @example(texts=["\ud800"], pairs=None)
    @given(texts=TEXTS, pairs=st.one_of(st.none(), TEXTS))
    def test_call_packs_one_row_per_text_or_names_the_texts(self, texts, pairs):
        inputs = texts if pairs is None else (texts, pairs)
        packed = self.call_or_refusal(self.plain, DATA_WORDS, inputs)
        if packed is not None:
            self.assert_packed(packed, None if isinstance(texts, (str, bytes)) else len(texts))

    @example(texts=["a fine film", "a dull one"], labels=["pos", 1], weights=[1.0, 2.0])
    @example(texts=["a fine film"], labels=["pos", "neg"], weights=None)
    @example(texts=[], labels=None, weights=None)
    @given(texts=TEXTS, labels=st.one_of(st.lists(CLASS_LABELS, max_size=4), HOSTILE),
           weights=WEIGHTS)
    def test_classifier_columns_hold_one_label_per_text_or_name_the_argument(
            self, texts, labels, weights):
        columns = self.call_or_refusal(self.classifier.text_columns, DATA_WORDS, texts, labels,
                                       weights)
        if columns is None:
            return
        outputs = self.classifier(*columns[:2])
        features, targets = outputs if labels is not None else (outputs, None)
        self.assert_packed(features, len(texts))
        if targets is not None:
            self.assertAllInSet(targets.numpy(), [0, 1])

    @example(sentences=[["john", "lives"]], tags=[[0, 1]])
    @example(sentences=[["john", "lives"]], tags=[[0]])
    @example(sentences=float("nan"), tags=None)
    @given(sentences=WORD_LISTS, tags=st.one_of(st.none(), st.lists(
        st.one_of(st.lists(CLASS_LABELS, max_size=4), HOSTILE), max_size=3), HOSTILE))
    def test_tagger_columns_hold_one_tag_per_word_or_name_the_argument(self, sentences, tags):
        columns = self.call_or_refusal(self.tagger.text_columns, DATA_WORDS, sentences, tags)
        if columns is None:
            return
        outputs = self.tagger(*columns)
        packed = outputs if tags is None else outputs[0]
        self.assertGreaterEqual(packed["input_ids"].shape[0], len(sentences))
        self.assert_packed(packed, packed["input_ids"].shape[0])

    @example(questions=["who sat?"], contexts=["the cat sat"],
             answers=[{"text": "cat", "answer_start": 4}])
    @example(questions=["who sat?"], contexts=["the cat sat"], answers=[("cat", 99)])
    @example(questions=[], contexts=float("nan"), answers=None)
    @given(questions=TEXTS, contexts=TEXTS, answers=st.one_of(st.none(), st.lists(
        st.one_of(st.tuples(ODD_TEXT, st.integers(-2, 20)),
                  st.fixed_dictionaries({"text": ODD_TEXT, "answer_start": st.integers(-2, 20)}),
                  HOSTILE), max_size=3), HOSTILE))
    def test_span_columns_hold_windows_and_targets_or_name_the_argument(self, questions,
                                                                        contexts, answers):
        columns = self.call_or_refusal(self.span.text_columns, DATA_WORDS,
                                       (questions, contexts), answers)
        if columns is None:
            return
        if answers is None:
            self.assert_packed(self.span(columns[0]), len(questions), 16)
            return
        packed, targets = columns[:2]
        windows = packed["input_ids"].shape[0]
        self.assertGreaterEqual(windows, len(questions))
        for target in targets.values():
            self.assertTrue(((target.numpy() >= 0) & (target.numpy() < 16)).all())
