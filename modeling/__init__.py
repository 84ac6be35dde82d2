"""BERT in Keras 3: the encoder, its pre-training and task models, and loading them.

The library's face: `import modeling` gives every public name wherever its
module lives (the encoder, its config and loading in `network/`, the fit's
divergence errors in `training/`, TF Hub's layout in `export/`), so user code
names no internal module.
"""

from modeling.classifier import BertClassifier
from modeling.classifier_preprocessor import BertClassifierPreprocessor
from modeling.feature_tagger import FeatureTagger
from modeling.multiple_choice import BertMultipleChoice
from modeling.preprocessor import BertPreprocessor, load_preprocessor
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.span_preprocessor import BertSpanPreprocessor
from modeling.tagger_preprocessor import BertTaggerPreprocessor
from modeling.text_embedder import BertTextEmbedder
from modeling.token_tagger import BertTokenTagger
from network.config import BertConfig
from network.encoder import BertEncoder, load_encoder
from network.model_folder import load_labels
from network.pretrained import load_config, load_task_model, load_tokenizer
from training.divergence import FitDiverged, TrainingDiverged

__all__ = ["BertClassifier", "BertClassifierPreprocessor", "BertConfig", "BertEncoder",
           "BertMultipleChoice", "BertPreprocessor", "BertPretrainer", "BertSpanModel",
           "BertSpanPreprocessor", "BertTaggerPreprocessor", "BertTextEmbedder",
           "BertTokenTagger", "FeatureTagger", "FitDiverged", "TrainingDiverged",
           "export_tf_hub", "load_config", "load_encoder", "load_labels", "load_preprocessor",
           "load_task_model", "load_tokenizer"]


def __getattr__(name: str):
    """`export_tf_hub`, imported on first use (PEP 562): `export/` imports this package's
    modules, so an import of it here would run while `export/` is half-imported when that
    is imported first."""
    if name == "export_tf_hub":
        from export.tf_hub import export_tf_hub

        return export_tf_hub
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
