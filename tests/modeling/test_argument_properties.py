"""BertClassifier's `compile`, `fit` and `predict` over drawn arguments (Hypothesis).

The property, for every call: it succeeds with a well-formed result (one
finite output row per input), or it raises the library's own refusal (a
ValueError or TypeError naming the argument at fault), never a TensorFlow
graph error or a Python internals error (KeyError, IndexError,
AttributeError, ZeroDivisionError) from deeper down. Packed ids reach the
graph, whose refusal (an InvalidArgumentError naming the input) is the
served models' contract. The values drawn are the hostile ones: NaN,
infinities, negatives, zero, huge numbers, wrong types, empty and very long
strings, odd Unicode. `make test` draws the same few examples every run (the
conftest's default profile); `--hypothesis-profile=long` draws many.
"""

import numpy as np
import tensorflow as tf
from hypothesis import event, example, given
from hypothesis import strategies as st

from modeling import BertClassifier
from tests.fixtures import TINY_CONFIG, TestCase
from tests.modeling.property_strategies import (COUNTS, HOSTILE_NUMBERS, ODD_TEXT, RATES,
                                                budget)
from tests.modeling.tiny_folder import tiny_folder

LABEL_NAMES = ["neg", "pos"]
TEXTS = ["a fine film", "a dull film", "great acting", "boring plot"]
CLASS_KEYS = st.one_of(st.integers(min_value=-2, max_value=3), st.sampled_from(
    LABEL_NAMES + ["maybe", "", True, None, 1.0]))
CLASS_WEIGHTS = st.one_of(st.none(), st.dictionaries(CLASS_KEYS, RATES, max_size=3),
                          HOSTILE_NUMBERS)
# What each of the library's refusals must name: the argument, or the data it is about.
_NAMED = ("learning_rate", "warmup_proportion", "batch_size", "epochs", "class_weight",
          "sample_weight", "x ", "x:", "y:", "y ", "validation_split", "initial_epoch")


class ClassifierArgumentPropertiesTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        folder = tiny_folder(cls.class_folder())
        cls.model = BertClassifier.from_pretrained(folder, num_labels=2, sequence_length=8,
                                                   label_names=LABEL_NAMES)
        cls.model.compile()

    def _refused_in_its_own_words(self, error: Exception) -> None:
        event(f"refused: {type(error).__name__}")
        self.assertIsInstance(error, (ValueError, TypeError))
        self.assertNotIsInstance(error, tf.errors.OpError)
        self.assertTrue(any(name in str(error) for name in _NAMED), str(error))

    @given(learning_rate=RATES, warmup_proportion=RATES)
    def test_compile_keeps_a_usable_recipe_or_names_the_rate(self, learning_rate,
                                                               warmup_proportion):
        try:
            self.model.compile(learning_rate=learning_rate, warmup_proportion=warmup_proportion)
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            self._refused_in_its_own_words(error)
            return
        finally:
            recipe = dict(self.model._recipe)
            self.model.compile()
        self.assertGreater(recipe["learning_rate"], 0)
        self.assertTrue(0 <= recipe["warmup_proportion"] <= 1)

    @budget(quick=4)
    @example(texts=[""], batch_size=2**63)  # past int32: once a shape error inside TensorFlow
    @given(texts=st.lists(ODD_TEXT, max_size=5), batch_size=COUNTS)
    def test_predict_gives_one_finite_row_per_text_or_names_the_argument(self, texts,
                                                                          batch_size):
        try:
            logits = self.model.predict(texts, batch_size=batch_size, verbose=0)
        except Exception as error:  # noqa: BLE001
            self._refused_in_its_own_words(error)
            return
        self.assertEqual(logits.shape, (len(texts), 2))
        self.assertTrue(np.isfinite(logits).all())

    @budget(quick=6)
    @given(ids=st.lists(st.integers(min_value=-2**31, max_value=2**31 - 1), min_size=1,
                        max_size=6))
    def test_predict_on_packed_ids_refuses_every_id_outside_the_vocabulary(self, ids):
        packed = {"input_ids": np.array([ids], np.int32),
                  "input_mask": np.ones((1, len(ids)), np.int32),
                  "segment_ids": np.zeros((1, len(ids)), np.int32)}
        inside = all(0 <= value < TINY_CONFIG["vocab_size"] for value in ids)
        if inside:
            self.assertTrue(np.isfinite(self.model.predict(packed, verbose=0)).all())
            return
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"input_ids holds values outside \[0, 64\)"):
            self.model.predict(packed, verbose=0)

    # A call that trains, drawn or not: the property's other half runs in every profile.
    @budget(quick=3)
    @example(class_weight={"pos": 2, 0: 0.5}, epochs=1, batch_size=4, validation_split=None,
             labels=[0, "pos", 1, "neg"])
    @given(class_weight=CLASS_WEIGHTS, epochs=COUNTS, batch_size=COUNTS,
           validation_split=st.one_of(st.none(), RATES),
           labels=st.lists(st.sampled_from([0, 1, "neg", "pos", 2, -1, None, 1.0]),
                           min_size=4, max_size=4))
    def test_fit_trains_finitely_or_names_the_argument(self, class_weight, epochs, batch_size,
                                                        validation_split, labels):
        arguments = {"class_weight": class_weight, "epochs": epochs, "batch_size": batch_size}
        if validation_split is not None:
            arguments["validation_split"] = validation_split
        steps = int(self.model.optimizer.iterations)
        try:
            history = self.model.fit(TEXTS, labels, verbose=0, **arguments)
        except Exception as error:  # noqa: BLE001
            self._refused_in_its_own_words(error)
            self.assertEqual(int(self.model.optimizer.iterations), steps)  # before any step
            return
        event("trained")
        self.assertTrue(np.isfinite(history.history["loss"]).all())
