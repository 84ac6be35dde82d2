"""Every task model's constructor and `from_pretrained` over drawn keyword arguments (Hypothesis).

The keywords come from each signature (`property_strategies.keyword_arguments`),
`from_pretrained`'s also from `BertConfig`'s fields, which it overrides. The
property: the call builds a model whose outputs on a packed batch are
finite and of the declared shape, or it refuses in the library's own words,
naming an argument it was given (or the folder), and the model folder read
is left byte for byte as it was.
"""

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from modeling import (BertClassifier, BertConfig, BertMultipleChoice, BertPreprocessor,
                      BertPretrainer, BertSpanModel, BertTextEmbedder, BertTokenTagger,
                      FeatureTagger)
from modeling.fine_tuning_model import FineTuningModel
from tests.fixtures import TINY_CONFIG
from tests.modeling.property_strategies import (HOSTILE, ContractTestCase, budget,
                                                folder_digest, keyword_arguments, names_of)
from tests.modeling.tiny_folder import VOCAB, tiny_folder

LENGTH = 8
TEXT_MODELS = (BertClassifier, BertSpanModel, BertTokenTagger)
# The sources a test may name: drawn as labels, made into paths per class (never a download).
SOURCES = st.sampled_from(["tiny", "missing", "a file", "an empty folder", "", "   ",
                           "not-a-model-name"])
SOURCE_OR_HOSTILE = st.one_of(SOURCES, HOSTILE)
CONFIG_OVERRIDES = keyword_arguments(BertConfig.__init__)


def packed_batch(model, batch: int = 2) -> dict:
    """Zeros of the packed inputs `model` reads ([batch, 2 or 4, seq] where it scores pairs
    or choices), [CLS]-like ids and a full mask."""
    if isinstance(model, FeatureTagger):
        return {"features": np.zeros((batch, LENGTH, 4), np.float32),
                "input_mask": np.ones((batch, LENGTH), np.int32)}
    shape = (batch, LENGTH)
    if isinstance(model, BertMultipleChoice) or getattr(model, "both_orders", False):
        shape = (batch, 2, LENGTH)
    features = {"input_ids": np.full(shape, 2, np.int32), "input_mask": np.ones(shape, np.int32),
                "segment_ids": np.zeros(shape, np.int32)}
    if isinstance(model, BertPretrainer):
        features["masked_lm_positions"] = np.ones((batch, 2), np.int32)
    return features


class ModelConstructionPropertiesTest(ContractTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)
        (cls.root / "file.txt").write_text("not a model\n")
        (cls.root / "empty").mkdir()
        cls.config = BertConfig(**TINY_CONFIG)
        cls.preprocessor = BertPreprocessor(VOCAB, sequence_length=LENGTH)
        cls.digest = folder_digest(cls.root)

    def source(self, label):
        """The path a drawn source label stands for (hostile values stay as drawn)."""
        paths = {"tiny": self.folder, "missing": self.root / "missing" / "model",
                 "a file": self.root / "file.txt", "an empty folder": self.root / "empty"}
        return str(paths[label]) if isinstance(label, str) and label in paths else label

    def check_outputs(self, model) -> None:
        """A built model answers a packed batch with finite outputs, one row per example."""
        outputs = model(packed_batch(model), training=False)
        for output in (outputs.values() if isinstance(outputs, dict) else [outputs]):
            self.assert_finite(output)
            self.assertEqual(np.shape(output)[0], 2)

    def check_construction(self, model_class, arguments: dict, with_text: bool = False) -> None:
        """`model_class(config, **arguments)` builds a working model or refuses them."""
        if with_text:
            arguments = {**arguments, "preprocessor": self.preprocessor}
        try:
            model = (model_class(**arguments) if model_class is FeatureTagger
                     else model_class(self.config, **arguments))
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            self.assert_refused(error, names_of(arguments))
            return
        self.assertIsInstance(model, model_class)
        self.check_outputs(model)

    def check_loading(self, model_class, source, arguments: dict) -> None:
        """`model_class.from_pretrained(source, **arguments)` loads or refuses; the folders
        it read are unchanged either way."""
        path = self.source(source)
        try:
            model = model_class.from_pretrained(path, **arguments)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, [*names_of(arguments), "path", "source", *names_of(
                {"source": path})])
        else:
            self.assertIsInstance(model, model_class)
            self.check_outputs(model)
        self.assertEqual(folder_digest(self.root), self.digest)

    @budget(300, quick=6)
    @given(arguments=keyword_arguments(BertClassifier.__init__, skip=("config", "preprocessor")),
           with_text=st.booleans())
    @example(arguments={"num_labels": 3, "multi_label": True, "threshold": 0.3}, with_text=True)
    @example(arguments={"num_labels": 1}, with_text=False)
    @example(arguments={"num_labels": 2, "causal": True, "both_orders": True,
                        "lm_aux_weight": 0.5}, with_text=False)
    def test_classifier_builds_or_names_the_argument(self, arguments, with_text):
        self.check_construction(BertClassifier, arguments, with_text)

    @budget(300)
    @given(arguments=keyword_arguments(BertTokenTagger.__init__, skip=("config", "preprocessor")),
           with_text=st.booleans())
    @example(arguments={"num_labels": 1, "label_names": math.nan}, with_text=False)
    @example(arguments={"num_labels": 3, "label_names": "neg"}, with_text=False)
    def test_token_tagger_builds_or_names_the_argument(self, arguments, with_text):
        self.check_construction(BertTokenTagger, arguments, with_text)

    @example(arguments={"bilstm_units": 2**63}, with_text=False)
    @budget(300, quick=6)
    @given(arguments=keyword_arguments(BertSpanModel.__init__, skip=("config", "preprocessor")),
           with_text=st.booleans())
    def test_span_model_builds_or_names_the_argument(self, arguments, with_text):
        self.check_construction(BertSpanModel, arguments, with_text)

    @example(arguments={'causal': np.zeros((2, 2))})
    @budget(300, quick=4)
    @given(arguments=keyword_arguments(BertMultipleChoice.__init__, skip=("config",)))
    def test_multiple_choice_builds_or_names_the_argument(self, arguments):
        self.check_construction(BertMultipleChoice, arguments)

    @example(arguments={'objective': np.zeros((2, 2))})
    @budget(300, quick=6)
    @given(arguments=keyword_arguments(BertPretrainer.__init__, skip=("config",)))
    def test_pretrainer_builds_or_names_the_argument(self, arguments):
        self.check_construction(BertPretrainer, arguments)

    @budget(300, quick=6)
    @example(arguments={"pooling": [[]]}, with_text=False)  # once a TypeError: unhashable
    @given(arguments=keyword_arguments(BertTextEmbedder.__init__, skip=("config", "preprocessor")),
           with_text=st.booleans())
    def test_text_embedder_builds_or_names_the_argument(self, arguments, with_text):
        self.check_construction(BertTextEmbedder, arguments, with_text)

    @example(arguments={'num_labels': 2**63})
    @budget(300)
    @given(arguments=keyword_arguments(FeatureTagger.__init__, lstm_units=st.integers(1, 4),
                                       num_lstm_layers=st.integers(-1, 2)))
    @example(arguments={"num_labels": 3, "lstm_units": 2, "dropout": math.nan})
    def test_feature_tagger_builds_or_names_the_argument(self, arguments):
        self.check_construction(FeatureTagger, arguments)

    @budget(300, quick=6)
    @given(model_class=st.sampled_from([*TEXT_MODELS, BertMultipleChoice, BertPretrainer]),
           source=SOURCE_OR_HOSTILE, loading=keyword_arguments(FineTuningModel.from_pretrained,
                                                               skip=("path",)),
           settings=st.data())
    @example(model_class=BertClassifier, source="tiny", loading={"num_labels": 2,
             "sequence_length": LENGTH, "hidden_dropout_prob": 0.0}, settings=None)
    def test_from_pretrained_loads_or_names_the_argument(self, model_class, source, loading,
                                                         settings):
        arguments = dict(loading)
        if settings is not None:
            arguments.update(settings.draw(keyword_arguments(
                model_class.__init__, skip=("config", "preprocessor")), label="model"))
            arguments.update(settings.draw(st.one_of(st.just({}), CONFIG_OVERRIDES),
                                           label="config"))
        self.check_loading(model_class, source, arguments)

    @budget(300)
    @given(source=SOURCE_OR_HOSTILE, arguments=keyword_arguments(
        BertTextEmbedder.from_pretrained, skip=("source",)))
    def test_text_embedder_loads_or_names_the_argument(self, source, arguments):
        self.check_loading(BertTextEmbedder, source, arguments)
