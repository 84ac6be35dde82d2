"""BERT in Keras 3: the encoder, its pre-training and task models, and loading them."""

from modeling.classifier import BertClassifier
from modeling.classifier_preprocessor import BertClassifierPreprocessor
from modeling.config import BertConfig
from modeling.divergence import FitDiverged, TrainingDiverged
from modeling.encoder import BertEncoder, load_encoder
from modeling.feature_tagger import FeatureTagger
from modeling.multiple_choice import BertMultipleChoice
from modeling.preprocessor import BertPreprocessor, load_preprocessor
from modeling.pretrained import load_config, load_labels, load_task_model, load_tokenizer
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.span_preprocessor import BertSpanPreprocessor
from modeling.tagger_preprocessor import BertTaggerPreprocessor
from modeling.text_embedder import BertTextEmbedder
from modeling.tf_hub_export import export_tf_hub
from modeling.token_tagger import BertTokenTagger

__all__ = ["BertClassifier", "BertClassifierPreprocessor", "BertConfig", "BertEncoder",
           "BertMultipleChoice", "BertPreprocessor", "BertPretrainer", "BertSpanModel",
           "BertSpanPreprocessor", "BertTaggerPreprocessor", "BertTextEmbedder",
           "BertTokenTagger", "FeatureTagger", "FitDiverged", "TrainingDiverged",
           "export_tf_hub", "load_config", "load_encoder", "load_labels", "load_preprocessor",
           "load_task_model", "load_tokenizer"]
