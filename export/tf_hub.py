"""A model as TF Hub's BERT pair of SavedModels: `preprocess` and `encoder`.

TensorFlow's BERT tutorials, and much code written for them, load two
SavedModels: a preprocessor that turns strings into `input_word_ids`,
`input_mask` and `input_type_ids`, and an encoder that turns those into
`pooled_output`, `sequence_output` and `encoder_outputs`. Exporting that
interface lets such code switch to any model this project loads without
changing a line:

    import tensorflow_text  # registers the preprocessor's ops: import it first
    preprocess = tf.saved_model.load("out/preprocess")
    encoder = tf.saved_model.load("out/encoder")
    encoder(preprocess(tf.constant(["a fine film"])))["pooled_output"]
    tokenize = preprocess.tokenize
    pairs = preprocess.bert_pack_inputs([tokenize(a), tokenize(b)], seq_length=64)

Loading the preprocessor fails with "Op type not registered" unless
`tensorflow_text` was imported first; the encoder needs only TensorFlow.

The preprocessor is the project's tokenizer (the original's ids, see
`text.tokenization`) and packer (`text.sentence_pairs.pack_ragged`, the
original's layout and `_truncate_seq_pair`), so the exported model reads
text exactly as fine-tuning did. `tokenize` returns word pieces grouped by
word, [batch, (words), (pieces)], as TF Hub's does; `bert_pack_inputs` takes
one or two such segments (or [batch, (pieces)] ones). A second segment with
no tokens packs as a single text, as the original's `if tokens_b:`.

Bad arguments to `bert_pack_inputs` end in one `InvalidArgumentError` whose
"assertion failed:" line says what is wrong, raised before any packing: a
`seq_length` outside [3, max_position_embeddings], segments of different
batch sizes, and three segments (BERT has two segment types). The loaded
model has no Python of ours to check with, and calls that match no traced
signature (four segments, a words segment beside a pieces one) get
TensorFlow's own list of the signatures it has; three is traced only to
refuse, so that the likeliest mistake reads as a sentence.

The encoder takes the three int32 inputs, runs in float32, and accepts
`training=True` for fine-tuning (dropout on); it lists `variables` and
`trainable_variables` as TF Hub's reusable SavedModels do. It holds only
TensorFlow's own ops: it loads without tensorflow-text and compiles with
XLA. An int8 encoder (`quantize="int8"`) is for inference only (no
`training=True`) and is traced for XLA (`network.quantization.portable_tracing`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import tensorflow as tf

from core.export_folder import check_export_folder, export_folder
from core.saved_models import KerasCall
from export.sources import export_source, is_model_or_file, source_paths
from modeling.preprocessor import default_sequence_length
from network.encoder import BertEncoder, load_encoder
from network.pretrained import load_config, load_tokenizer
from network.quantization import check_quantize, is_quantized, portable_tracing
from text.graph_checks import guarded
from text.sentence_pairs import pack_ragged
from text.tokenization import FullTokenizer

# TF Hub's input names, and the encoder's for the same tensors.
HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask",
              "input_type_ids": "segment_ids"}
_TEXTS = tf.TensorSpec([None], tf.string)


def export_tf_hub(source: Any, folder: str | os.PathLike,
                  sequence_length: int | None = None, do_lower_case: bool | None = None,
                  quantize: str | None = None) -> Path:
    """Writes `folder/preprocess` and `folder/encoder` for the model in `source`.

    Args:
      source: any folder or checkpoint `load_encoder` takes, or a model of
        this project (its encoder is exported, its head left out) or the
        `.keras` file one was saved to, with its preprocessor
        (`export.sources`).
      folder: new, empty, or an earlier TF Hub export (`core.export_folder`:
        it is then replaced whole); it appears whole or not at all.
      sequence_length: what the preprocessor's default signature pads to
        (default: 128, or the model's positions where it has fewer;
        `bert_pack_inputs` takes its own).
      do_lower_case: overrides the source's casing.
      quantize: "int8" quantizes the exported encoder (`model.quantize`; a copy,
        never the model given); None exports it as it is.

    Every argument is checked before the weights are loaded.

    Examples:

    >>> export_tf_hub("uncased_L-12_H-768_A-12", "bert_hub")
    PosixPath('bert_hub')
    """
    check_quantize(quantize, "tf_hub", None)
    check_export_folder(folder, "tf_hub", source_paths(source))
    if do_lower_case is not None and not isinstance(do_lower_case, bool):
        raise ValueError(f"do_lower_case must be True, False or None, got {do_lower_case!r}")
    if is_model_or_file(source):
        loaded = export_source(source, do_lower_case)
        sequence_length = loaded.config.check_sequence_length(
            sequence_length or default_sequence_length(loaded.config))
        with tempfile.TemporaryDirectory() as scratch:  # the vocabulary asset's source file
            vocab_file = os.path.join(scratch, "vocab.txt")
            loaded.write_vocabulary(vocab_file, "the TF Hub preprocessor")
            return _write(folder, source_paths(source), loaded.config,
                          loaded.tokenizer(vocab_file), _encoder_from(loaded), sequence_length,
                          quantize)
    config = load_config(source)
    sequence_length = config.check_sequence_length(
        sequence_length or default_sequence_length(config))
    tokenizer = load_tokenizer(source, do_lower_case)
    encoder = load_encoder(source, output_hidden_states=True)
    return _write(folder, [source], config, tokenizer, encoder, sequence_length, quantize)


def _write(folder, sources: list, config, tokenizer: FullTokenizer, encoder,
           sequence_length: int, quantize: str | None = None) -> Path:
    if quantize:
        encoder.quantize(quantize)
    preprocess = HubPreprocess(tokenizer, sequence_length, config.max_position_embeddings)
    hub_encoder = HubEncoder(encoder, tokenizer)
    with export_folder(folder, "tf_hub", sources) as staging:
        tf.saved_model.save(preprocess, os.path.join(staging, "preprocess"),
                            signatures={"serving_default": preprocess.__call__})
        with portable_tracing(encoder):  # saving traces `__call__` once more
            tf.saved_model.save(hub_encoder, os.path.join(staging, "encoder"),
                                signatures={"serving_default": hub_encoder.serve})
    return Path(folder)


def _encoder_from(loaded) -> BertEncoder:
    """A BertEncoder with every hidden state, holding the source model's encoder weights."""
    encoder = BertEncoder(loaded.config, output_hidden_states=True)
    for name, variable in encoder.checkpoint_variables().items():
        variable.assign(loaded.variables[name])
    return encoder


class HubPreprocess(tf.Module):
    """Strings -> TF Hub's encoder inputs; `tokenize` and `bert_pack_inputs` for pairs."""

    def __init__(self, tokenizer: FullTokenizer, sequence_length: int, max_length: int):
        super().__init__(name="preprocess")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.max_length = max_length  # the encoder's max_position_embeddings
        self._special_ids = (tokenizer.cls_id, tokenizer.sep_id)
        keep_tokenizer_files(self, tokenizer)
        for rank in (2, 3):
            spec = tf.RaggedTensorSpec([None] * rank, tf.int32, ragged_rank=rank - 1,
                                       row_splits_dtype=tf.int64)
            for segments in (1, 2, 3):  # three: refused with a sentence, see the module's doc
                self.bert_pack_inputs.get_concrete_function([spec] * segments)
                self.bert_pack_inputs.get_concrete_function(
                    [spec] * segments, seq_length=tf.TensorSpec([], tf.int32))

    @tf.function(input_signature=[_TEXTS])
    def __call__(self, texts: tf.Tensor) -> dict[str, tf.Tensor]:
        token_ids, _ = self.tokenizer.tokenize_batch(texts)
        return self._pack([token_ids], self.sequence_length)

    @tf.function(input_signature=[_TEXTS])
    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """[batch] strings -> int32 word-piece ids [batch, (words), (pieces)]."""
        token_ids, word_ids = self.tokenizer.tokenize_batch(texts)
        return group_by_word(token_ids, word_ids)

    @tf.function
    def bert_pack_inputs(self, segments: list, seq_length=None) -> dict[str, tf.Tensor]:
        """One or two tokenized segments -> the encoder's inputs, `seq_length` (default: the
        export's) positions each; a pair too long loses tokens as `_truncate_seq_pair`."""
        if seq_length is None:
            seq_length = self.sequence_length
        else:
            seq_length = guarded(
                (seq_length >= 3) & (seq_length <= self.max_length),
                f"seq_length must be from 3 to {self.max_length} (max_position_embeddings), "
                "got {}", [seq_length], seq_length)
        if len(segments) not in (1, 2):
            rows = guarded(tf.constant(False), f"bert_pack_inputs packs one or two segments "
                           f"(BERT has two segment types), got {len(segments)}", [],
                           segments[0].nrows())
            refused = tf.zeros(tf.stack([tf.cast(rows, tf.int32), seq_length]), tf.int32)
            return {hub_name: refused for hub_name in HUB_INPUTS}
        return self._pack(segments, seq_length)

    def _pack(self, segments: list, seq_length) -> dict[str, tf.Tensor]:
        flat = [segment.merge_dims(1, -1) if segment.shape.rank > 2 else segment
                for segment in segments]
        packed = pack_ragged(flat[0], flat[1] if len(flat) == 2 else None, seq_length,
                             *self._special_ids, names=("segments[0]", "segments[1]"))
        return {hub_name: packed[name] for hub_name, name in HUB_INPUTS.items()}


def keep_tokenizer_files(module: tf.Module, tokenizer: FullTokenizer) -> None:
    """The vocabulary (an asset) and casing, where TF Hub's BERT models kept them
    (`vocab_file`, `do_lower_case`), for code that builds a tokenizer of its own."""
    module.vocab_file = tf.saved_model.Asset(tokenizer.vocab_file)
    module.do_lower_case = tf.Variable(tokenizer.do_lower_case, trainable=False)


def group_by_word(token_ids: tf.RaggedTensor, word_ids: tf.RaggedTensor) -> tf.RaggedTensor:
    """[batch, (pieces)] ids and their word indices -> [batch, (words), (pieces)]."""
    words = word_ids.flat_values
    row_of_piece = token_ids.value_rowids()
    position = tf.range(tf.size(words, out_type=tf.int64))
    starts_row = tf.equal(position, tf.gather(token_ids.row_splits, row_of_piece))
    starts_word = starts_row | tf.not_equal(words, tf.roll(words, 1, axis=0))
    word_of_piece = tf.cumsum(tf.cast(starts_word, tf.int64)) - 1
    words_per_row = tf.math.unsorted_segment_sum(tf.cast(starts_word, tf.int64), row_of_piece,
                                                 token_ids.nrows())
    pieces = tf.RaggedTensor.from_value_rowids(token_ids.flat_values, word_of_piece,
                                               nrows=tf.reduce_sum(words_per_row))
    return tf.RaggedTensor.from_row_lengths(pieces, words_per_row)


class HubEncoder(tf.Module):
    """TF Hub's encoder inputs -> `pooled_output`, `sequence_output`, `encoder_outputs`."""

    # tf.Module computes these; TF Hub's reusable SavedModels store them as lists.
    variables = ()
    trainable_variables = ()

    def __init__(self, encoder, tokenizer: FullTokenizer):
        super().__init__(name="encoder")
        if not encoder.output_hidden_states:
            raise ValueError("the encoder must be built with output_hidden_states=True")
        self._encoder = KerasCall(encoder)
        keep_tokenizer_files(self, tokenizer)
        self.variables = list(encoder.variables)  # with the dropout seeds' state
        self.trainable_variables = list(encoder.trainable_weights)
        inputs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in HUB_INPUTS}
        # An int8 encoder is for inference only: it refuses training=True.
        with portable_tracing(encoder):
            for training in (False,) if is_quantized(encoder) else (False, True):
                self.__call__.get_concrete_function(inputs, training=training)
            self.serve = tf.function(self._serve).get_concrete_function(**inputs)

    @tf.function
    def __call__(self, inputs: dict, training: bool = False) -> dict:
        features = {name: inputs[hub_name] for hub_name, name in HUB_INPUTS.items()}
        encoded = self._encoder(features, training=training)
        pooled = tf.cast(encoded["pooled_output"], tf.float32)
        return {"pooled_output": pooled, "default": pooled,
                "sequence_output": tf.cast(encoded["sequence_output"], tf.float32),
                "encoder_outputs": [tf.cast(state, tf.float32)
                                    for state in encoded["hidden_states"][1:]]}

    def _serve(self, **inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """The signature for TF Serving: flat outputs, block i as `encoder_outputs_i`."""
        outputs = self.__call__(inputs)
        blocks = outputs.pop("encoder_outputs")
        return {**outputs, **{f"encoder_outputs_{index}": block
                              for index, block in enumerate(blocks)}}
