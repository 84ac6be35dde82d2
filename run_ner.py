"""Named-entity recognition on CoNLL-2003 files: fine-tuning, or the feature-based approach.

`--mode=fine_tune` (Section 5.3): a linear tagger on every position of the
encoder's last layer, all weights trained, each word predicted at its first
WordPiece and no CRF, as the paper. `--document_context` fills each window
with the neighbouring sentences of the same document, the "maximal document
context" the paper used; only the target sentence is scored.

`--mode=feature_based` (Section 5.4, Table 7): the pre-trained encoder stays
frozen. Its activations (`--feature_layers`, one flag value per Table 7 row)
are computed once per split and cached as .npy files in
`--feature_cache_dir`; a two-layer BiLSTM (`--lstm_units`) with a linear
classifier is trained on them with Adam (Keras `fit` on one device: the
BiLSTM is small next to the encoder). Later runs that change only the
classifier (learning rate, units, epochs) reuse the cache. A cache entry is
keyed by the split, the layers, the sequence length, and a hash of the
checkpoint (path, file sizes and times), config, precision and the windows'
token ids, so changing the data or the checkpoint never reads stale features.
The BiLSTM trains from scratch: unless `--learning_rate` is given, it uses
1e-3 rather than the fine-tuning default.

Inputs: `--data_dir` with `train.txt`, `valid.txt` (or `dev.txt`) and
`test.txt` in CoNLL-2003 layout (`TOKEN POS CHUNK TAG`, or `TOKEN TAG`),
IOB1 or IOB2 tags. Outputs in `--output_dir`: `eval_results.txt` with
conlleval's entity-level precision/recall/F1 (`eval_*` for valid with
--do_eval, `test_*` for test with --do_predict, and F1 per entity type),
`valid_predictions.txt` / `test_predictions.txt` as `TOKEN GOLD PRED`
lines, and the trained model (`model.ckpt*` with its config and vocabulary,
or `feature_tagger.weights.h5`). The paper used a cased model for NER:
pass `--do_lower_case=false` with a cased vocabulary.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
from typing import Callable

import numpy as np
from absl import flags, logging

from modeling.feature_tagger import FEATURE_LAYERS, check_feature_layers
from training import finetuning, runner_flags

FLAGS = flags.FLAGS
finetuning.define_flags(max_seq_length=128, learning_rate=5e-5, num_train_epochs=3.0,
                        train_batch_size=32)
flags.DEFINE_string("data_dir", None, "Folder with train.txt, valid.txt (or dev.txt), test.txt.")
flags.DEFINE_list("labels", None, "Tag set, comma-separated (default: the training file's).")
flags.DEFINE_enum("tag_scheme", "auto", ["auto", "IOB1", "IOB2"],
                  "Tagging scheme of the files (auto: detected from the training data).")
flags.DEFINE_bool("document_context", False,
                  "Fill windows with neighbouring sentences of the same document (Section 5.3).")
flags.DEFINE_integer("window_stride", None, "Sub-tokens between the windows of a sentence "
                     "longer than one window (default: half a window).")
flags.DEFINE_enum("mode", "fine_tune", ["fine_tune", "feature_based"],
                  "Fine-tune BERT, or train a BiLSTM on frozen BERT features (Table 7).")
flags.DEFINE_enum("feature_layers", "concat_last_four", list(FEATURE_LAYERS),
                  "feature_based: which encoder layers make the features (Table 7's rows).")
flags.DEFINE_integer("lstm_units", 768, "feature_based: units of each BiLSTM direction.")
flags.DEFINE_float("lstm_dropout", 0.1, "feature_based: dropout on features and LSTM outputs.")
flags.DEFINE_string("feature_cache_dir", None,
                    "feature_based: cached features (default: <output_dir>/features).")

SPLIT_FILES = {"train": ("train.txt",), "valid": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
FEATURE_LEARNING_RATE = 1e-3
Predictor = Callable[[str, dict], np.ndarray]  # split name, arrays -> logits


@dataclasses.dataclass
class Split:
    name: str
    sentences: list
    windows: list
    arrays: dict[str, np.ndarray]


def _read_split(name: str) -> list:
    from data_prep.datasets.conll import read_conll

    paths = [os.path.join(FLAGS.data_dir, file) for file in SPLIT_FILES[name]]
    for path in paths:
        if os.path.exists(path):
            return read_conll(path)
    raise FileNotFoundError(f"{name} split: no file {' or '.join(paths)}")


def _check_labels(labels: list[str]) -> None:
    if len(set(labels)) != len(labels):
        raise ValueError(f"--labels lists a label twice: {','.join(labels)}")
    bad = [label for label in labels
           if label != "O" and (label[:2] not in ("B-", "I-") or len(label) < 3)]
    if bad:
        raise ValueError(f"labels {', '.join(bad)} are not O, B-TYPE or I-TYPE; entity-level "
                         "scoring needs IOB1 or IOB2 tags")


def _fine_tune(setup, labels: list[str], splits: dict[str, Split]) -> Predictor:
    import keras

    from modeling.task_models import BertTokenTagger, tagging_loss

    keras.utils.set_random_seed(FLAGS.random_seed)
    model = finetuning.build_model(setup.strategy,
                                   lambda: BertTokenTagger(setup.config, len(labels)),
                                   FLAGS.init_checkpoint)
    if FLAGS.do_train:
        finetuning.train(model, setup.strategy, splits["train"].arrays, tagging_loss,
                         FLAGS.output_dir, seed=FLAGS.random_seed)
        finetuning.save_model_files(model, setup.config, FLAGS.output_dir)
    return lambda name, arrays: finetuning.predict(model, arrays, _batch_size(name))


def _batch_size(split: str) -> int:
    return FLAGS.eval_batch_size if split == "valid" else FLAGS.predict_batch_size


def _checkpoint_fingerprint(path: str) -> list:
    """(file, size, mtime) of each file of a checkpoint: a prefix, a file or a folder."""
    files = (sorted(os.path.join(path, name) for name in os.listdir(path))
             if os.path.isdir(path) else sorted(glob.glob(glob.escape(path) + "*")))
    if not files:
        raise FileNotFoundError(f"--init_checkpoint {path}: no such file, folder or prefix")
    return [(os.path.basename(file), os.stat(file).st_size, os.stat(file).st_mtime_ns)
            for file in files]


def _cache_path(split: Split, config) -> str:
    checkpoint = os.path.abspath(FLAGS.init_checkpoint)
    digest = hashlib.sha256(json.dumps(
        {"checkpoint": checkpoint, "files": _checkpoint_fingerprint(checkpoint),
         "config": config.to_dict(), "dtype": FLAGS.dtype}, sort_keys=True).encode())
    for key in ("input_ids", "input_mask", "segment_ids"):
        digest.update(np.ascontiguousarray(split.arrays[key]).tobytes())
    folder = FLAGS.feature_cache_dir or os.path.join(FLAGS.output_dir, "features")
    return os.path.join(folder, f"{split.name}-{FLAGS.feature_layers}-len{FLAGS.max_seq_length}"
                                f"-{digest.hexdigest()[:16]}.npy")


def _cached_features(setup, splits: dict[str, Split]) -> dict[str, np.ndarray]:
    """Each split's features, computed by the frozen encoder only where no cache entry exists."""
    from modeling.encoder import BertEncoder
    from modeling.feature_tagger import write_features

    paths = {name: _cache_path(split, setup.config) for name, split in splits.items()}
    encoder = None
    for name, path in paths.items():
        if os.path.exists(path):
            logging.info("%s: reusing cached features %s", name, path)
            continue
        if encoder is None:
            encoder = finetuning.build_model(
                setup.strategy, lambda: BertEncoder(setup.config, output_hidden_states=True),
                FLAGS.init_checkpoint)
        logging.info("%s: computing %s features of %d windows into %s", name,
                     FLAGS.feature_layers, len(splits[name].windows), path)
        write_features(encoder, splits[name].arrays, FLAGS.feature_layers, path,
                       FLAGS.predict_batch_size)
    return {name: np.load(path, mmap_mode="r") for name, path in paths.items()}


def _feature_based(setup, labels: list[str], splits: dict[str, Split]) -> Predictor:
    import keras

    from modeling.feature_tagger import FeatureBatches, FeatureTagger

    epochs = FLAGS.num_train_epochs
    features = _cached_features(setup, splits)
    keras.utils.set_random_seed(FLAGS.random_seed)
    model = FeatureTagger(len(labels), FLAGS.lstm_units, dropout=FLAGS.lstm_dropout)

    def batches(name: str, batch_size: int, shuffle: bool) -> FeatureBatches:
        arrays = splits[name].arrays
        return FeatureBatches(features[name], arrays["input_mask"], arrays["label_ids"],
                              batch_size, FLAGS.random_seed if shuffle else None)

    weights = os.path.join(FLAGS.output_dir, "feature_tagger.weights.h5")
    if FLAGS.do_train:
        rate = FLAGS.learning_rate if FLAGS["learning_rate"].present else FEATURE_LEARNING_RATE
        logging.info("Training the BiLSTM tagger: %d epochs, Adam at learning rate %g",
                     int(epochs), rate)
        model.compile(optimizer=keras.optimizers.Adam(rate))
        model.fit(batches("train", FLAGS.train_batch_size, True), epochs=int(epochs),
                  validation_data=batches("valid", FLAGS.eval_batch_size, False)
                  if "valid" in splits else None, verbose=2)
        model.save_weights(weights)
    else:
        if not os.path.exists(weights):
            raise FileNotFoundError(f"{weights}: no trained tagger; run with --do_train first")
        model(batches(next(iter(splits)), 1, False)[0][0])  # builds the weights to load
        model.load_weights(weights)

    def predict(name: str, arrays: dict) -> np.ndarray:
        del arrays  # the cached features stand for them
        return model.predict(batches(name, _batch_size(name), False), verbose=0)

    return predict


def _scores(split: Split, logits: np.ndarray, labels: list[str], scheme: str,
            prefix: str) -> dict[str, float]:
    """Writes the split's predictions in CoNLL layout; returns its conlleval scores."""
    from data_prep.datasets.conll import predictions_to_tags, write_conll_predictions
    from evaluation.ner import entity_scores, token_accuracy

    predicted = predictions_to_tags(split.windows, logits, split.sentences, labels)
    path = os.path.join(FLAGS.output_dir, f"{split.name}_predictions.txt")
    write_conll_predictions(path, split.sentences, predicted)
    gold = [sentence.tags for sentence in split.sentences]
    scores = entity_scores(gold, predicted, scheme)
    results = {f"{prefix}_{key}": scores[key] for key in ("precision", "recall", "f1")}
    results[f"{prefix}_accuracy"] = token_accuracy(gold, predicted)
    results.update({f"{prefix}_f1_{kind}": values["f1"]
                    for kind, values in scores["per_type"].items()})
    logging.info("%s: entity F1 %.4f (%d gold, %d predicted, %d correct entities); wrote %s",
                 split.name, scores["f1"], scores["support"], scores["predicted"],
                 scores["correct"], path)
    return results


def _check_flags(values: flags.FlagValues = FLAGS) -> None:
    """The tagger's own flags; `finetuning.setup` checks the shared ones."""
    if not values.data_dir:
        raise ValueError("--data_dir is required")
    runner_flags.check_ranges(values, positive=("lstm_units",) + (
        ("window_stride",) if values.window_stride is not None else ()))
    if not 0 <= values.lstm_dropout < 1:
        raise ValueError(f"--lstm_dropout must be in [0, 1), got {values.lstm_dropout}")
    if values.mode == "feature_based":
        if not values.init_checkpoint:
            raise ValueError("--mode=feature_based needs --init_checkpoint: features of a "
                             "random encoder are noise")
        epochs = values.num_train_epochs
        if values.do_train and (epochs < 1 or epochs != int(epochs)):
            raise ValueError(f"--mode=feature_based trains whole epochs; got "
                             f"--num_train_epochs={epochs}")


def main(argv: list[str]) -> None:
    del argv
    _check_flags()
    setup = finetuning.setup()
    if FLAGS.mode == "feature_based":
        check_feature_layers(FLAGS.feature_layers, setup.config.num_hidden_layers)
    from data_prep.datasets.conll import build_windows, detect_scheme, label_list, windows_to_arrays
    from training import cli

    wanted = [name for name, wanted in (("train", FLAGS.do_train), ("valid", FLAGS.do_eval),
                                        ("test", FLAGS.do_predict)) if wanted]
    sentences = {name: _read_split(name) for name in wanted}
    if not FLAGS.labels and "train" not in sentences:
        sentences["train"] = _read_split("train")
    labels = FLAGS.labels or label_list(sentences["train"])
    _check_labels(labels)
    scheme = FLAGS.tag_scheme if FLAGS.tag_scheme != "auto" else detect_scheme(
        sentences.get("train") or sentences[wanted[0]])
    logging.info("%d labels (%s): %s", len(labels), scheme, ", ".join(labels))
    label_map = {label: index for index, label in enumerate(labels)}
    splits = {}
    for name in wanted:
        windows = build_windows(sentences[name], setup.tokenizer, FLAGS.max_seq_length,
                                label_map, FLAGS.document_context, FLAGS.window_stride)
        splits[name] = Split(name, sentences[name], windows, windows_to_arrays(windows))
        logging.info("%s: %d sentences in %d windows", name, len(sentences[name]), len(windows))

    build = _fine_tune if FLAGS.mode == "fine_tune" else _feature_based
    predict = build(setup, labels, splits)
    results = {}
    for name, prefix in (("valid", "eval"), ("test", "test")):
        if name in splits:
            logits = predict(name, splits[name].arrays)
            results.update(_scores(splits[name], logits, labels, scheme, prefix))
    if results:
        cli.write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
        for key, value in sorted(results.items()):
            logging.info("  %s = %.4f", key, value)


if __name__ == "__main__":
    from training.cli import run

    run(main)
