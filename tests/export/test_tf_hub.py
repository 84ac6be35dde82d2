"""TF Hub's BERT interface: code written for TF Hub's preprocess + encoder pair runs on ours.

The export is loaded in a fresh process, as a user would load it (after
`import tensorflow_text`, nothing else of this project imported), and must
give the packing of `text.sentence_pairs.pack_ids` and the outputs of
`load_encoder` on it, for single texts and for pairs.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertEncoder, export_tf_hub, load_encoder, load_tokenizer
from network.checkpoints import export_google_checkpoint
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import TINY_CONFIG, TestCase
from text.sentence_pairs import pack_ids

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat", "on", "mat",
         "a", "dog", "ran", "far", "away", ".", ","]
SINGLES = ["The cats sat on the mat.", "a dog", "", "the dog ran far far away , the cat sat"]
PAIRS = [("the cats sat", "a dog ran"), ("the cat sat on the mat", ""),
         ("a dog", "the cats sat on the mat , the dog ran far away")]
SEQUENCE_LENGTH, PAIR_LENGTH = 12, 10

# Run by a fresh interpreter: TF Hub's recipe, word for word, on the exported folder.
_USER_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the preprocessor's ops)

folder, singles, firsts, seconds, pair_length, out = sys.argv[1:7]
preprocess = tf.saved_model.load(folder + "/preprocess")
encoder = tf.saved_model.load(folder + "/encoder")
results = {}
for kind, inputs in (
        ("single", preprocess(tf.constant(singles.split("|")))),
        ("pair", preprocess.bert_pack_inputs(
            [preprocess.tokenize(tf.constant(firsts.split("|"))),
             preprocess.tokenize(tf.constant(seconds.split("|")))],
            seq_length=tf.constant(int(pair_length))))):
    outputs = encoder(inputs)
    results.update({f"{kind}_{key}": value.numpy() for key, value in inputs.items()})
    for key in ("pooled_output", "sequence_output", "default"):
        results[f"{kind}_{key}"] = outputs[key].numpy()
    for index, block in enumerate(outputs["encoder_outputs"]):
        results[f"{kind}_encoder_outputs_{index}"] = block.numpy()
np.savez(out, **results)
"""


def _tiny_release(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = {**TINY_CONFIG, "vocab_size": len(VOCAB)}
    (folder / "bert_config.json").write_text(json.dumps(config))
    tf.keras.utils.set_random_seed(3)
    export_google_checkpoint(BertEncoder(BertConfig.from_dict(config)),
                             folder / "bert_model.ckpt")
    return folder


class TfHubExportTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.source = _tiny_release(cls.root / "uncased_tiny")
        cls.exported = export_tf_hub(cls.source, cls.root / "hub", SEQUENCE_LENGTH)
        # Loaded once: each load's signatures are set up anew on their first call.
        without_graph_rewrites(cls)
        cls.preprocess = tf.saved_model.load(str(cls.exported / "preprocess"))
        cls.encoder = tf.saved_model.load(str(cls.exported / "encoder"))

    def _expected(self, firsts, seconds, length):
        tokenizer = load_tokenizer(self.source)
        packed = pack_ids([tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in firsts],
                          [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) if t else None
                           for t in seconds], length, tokenizer.cls_id, tokenizer.sep_id)
        encoder = load_encoder(self.source, output_hidden_states=True)
        outputs = encoder({key: tf.constant(value) for key, value in packed.items()},
                          training=False)
        expected = {"input_word_ids": packed["input_ids"], "input_mask": packed["input_mask"],
                    "input_type_ids": packed["segment_ids"],
                    "pooled_output": outputs["pooled_output"],
                    "default": outputs["pooled_output"],
                    "sequence_output": outputs["sequence_output"]}
        for index, block in enumerate(outputs["hidden_states"][1:]):
            expected[f"encoder_outputs_{index}"] = block
        return expected

    @pytest.mark.slow
    def test_fresh_process_matches_load_encoder_for_singles_and_pairs(self):
        out = self.root / "results.npz"
        environment = {**os.environ, "PYTHONPATH": ""}  # nothing of this project importable
        subprocess.run(
            [sys.executable, "-c", _USER_SCRIPT, str(self.exported), "|".join(SINGLES),
             "|".join(a for a, _ in PAIRS), "|".join(b for _, b in PAIRS), str(PAIR_LENGTH),
             str(out)], check=True, cwd=self.root, env=environment)
        results = np.load(out)
        for kind, firsts, seconds, length in (
                ("single", SINGLES, [None] * len(SINGLES), SEQUENCE_LENGTH),
                ("pair", [a for a, _ in PAIRS], [b for _, b in PAIRS], PAIR_LENGTH)):
            expected = self._expected(firsts, seconds, length)
            self.assertLen([key for key in results if key.startswith(f"{kind}_encoder_")],
                           TINY_CONFIG["num_hidden_layers"])
            for key, value in expected.items():
                if key.startswith("input_"):
                    self.assertAllEqual(results[f"{kind}_{key}"], value, msg=f"{kind} {key}")
                else:
                    self.assertAllClose(results[f"{kind}_{key}"], value, atol=1e-4, rtol=0,
                                        msg=f"{kind} {key}")

    def test_tokenize_groups_pieces_by_word(self):
        preprocess = self.preprocess
        tokenized = preprocess.tokenize(tf.constant(["the cats sat.", "", "a dog"]))
        ids = {token: index for index, token in enumerate(VOCAB)}
        self.assertAllEqual(tokenized.to_list(),
                            [[[ids["the"]], [ids["cat"], ids["##s"]], [ids["sat"]], [ids["."]]],
                             [], [[ids["a"]], [ids["dog"]]]])
        self.assertEqual(tokenized.dtype, tf.int32)

    def test_pack_inputs_takes_flat_segments_and_python_lengths(self):
        preprocess = self.preprocess
        tokenized = preprocess.tokenize(tf.constant(PAIRS[2][1:]))
        words = preprocess.bert_pack_inputs([tokenized], seq_length=6)
        pieces = preprocess.bert_pack_inputs([tokenized.merge_dims(1, 2)], seq_length=6)
        self.assertAllEqual(words["input_word_ids"], pieces["input_word_ids"])
        self.assertEqual(words["input_word_ids"].shape, (1, 6))
        default = preprocess.bert_pack_inputs([tokenized])  # the export's length
        self.assertEqual(default["input_mask"].shape, (1, SEQUENCE_LENGTH))

    def test_bad_pack_arguments_are_one_readable_error(self):
        """What a loader of the SavedModel sees: one InvalidArgumentError whose "assertion
        failed" line says what is wrong, not TensorFlow's own assertion dump or list of
        signatures (which four segments still get: only three are traced to refuse)."""
        preprocess = self.preprocess
        two = preprocess.tokenize(tf.constant(["the cats sat", "a dog"]))
        one = preprocess.tokenize(tf.constant(["far away"]))
        cases = [
            (([two], 2), "seq_length must be from 3 to 64 (max_position_embeddings), got 2"),
            (([two], 65), "seq_length must be from 3 to 64 (max_position_embeddings), got 65"),
            (([two, two, two], None), "bert_pack_inputs packs one or two segments (BERT has "
                                      "two segment types), got 3"),
            (([two.merge_dims(1, 2)] * 3, 8), "bert_pack_inputs packs one or two segments "
                                              "(BERT has two segment types), got 3"),
            (([two, one], None), "segments[0] and segments[1] differ in batch size: 2 and 1; "
                                 "give one of each per example"),
            (([one.merge_dims(1, 2), two.merge_dims(1, 2)], 8),
             "segments[0] and segments[1] differ in batch size: 1 and 2")]
        for (segments, seq_length), message in cases:
            arguments = {} if seq_length is None else {"seq_length": seq_length}
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        r"\nassertion failed: \[" + re.escape(message)):
                preprocess.bert_pack_inputs(segments, **arguments)

    def test_encoder_refuses_ids_outside_their_tables(self):
        """As the numeric exports: id -7 once read word V-7. The message names the encoder's
        own input names (`input_ids` for TF Hub's `input_word_ids`)."""
        encoder = self.encoder
        good = {"input_word_ids": [[2, 5, 6, 3]], "input_mask": [[1, 1, 1, 1]],
                "input_type_ids": [[0, 0, 0, 0]]}
        vocab = rf"input_ids holds values outside \[0, {len(VOCAB)}\)"
        for hub_name, value, message in (
                ("input_word_ids", -7, vocab), ("input_word_ids", len(VOCAB), vocab),
                ("input_type_ids", -1, r"segment_ids holds values outside \[0, 2\)"),
                ("input_mask", 2, "input_mask holds values other than 0 .padding. and 1")):
            bad = {name: tf.constant(ids, tf.int32) for name, ids in good.items()}
            bad[hub_name] = tf.tensor_scatter_nd_update(bad[hub_name], [[0, 1]], [value])
            for call in (encoder, encoder.signatures["serving_default"]):
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    call(bad) if call is encoder else call(**bad)

    def test_encoder_lists_its_variables_and_trains_with_dropout(self):
        encoder = self.encoder
        self.assertNotEmpty(encoder.trainable_variables)
        self.assertLen(encoder.trainable_variables,
                       len(load_encoder(self.source).trainable_weights))
        inputs = {"input_word_ids": tf.constant([[2, 5, 6, 3]]),
                  "input_mask": tf.ones([1, 4], tf.int32),
                  "input_type_ids": tf.zeros([1, 4], tf.int32)}
        inference = encoder(inputs)["sequence_output"]
        self.assertAllClose(encoder(inputs, training=False)["sequence_output"], inference)
        self.assertNotAllClose(encoder(inputs, training=True)["sequence_output"], inference)
        # Where TF Hub's BERT models kept the tokenizer's files, for code that reads them.
        self.assertEqual(Path(encoder.vocab_file.asset_path.numpy().decode()).read_text(),
                         "\n".join(VOCAB) + "\n")
        self.assertTrue(bool(encoder.do_lower_case.numpy()))

    def test_refuses_a_length_beyond_the_model_and_writes_nothing(self):
        target = self.root / "too_long"
        with self.assertRaisesRegex(ValueError, r"max_position_embeddings \(64\), got 65"):
            export_tf_hub(self.source, target, sequence_length=65)
        with self.assertRaisesRegex(ValueError, r"sequence_length must be an integer from 3 to "
                                                r"the model's max_position_embeddings \(64\), "
                                                r"got '16'"):
            export_tf_hub(self.source, target, sequence_length="16")
        self.assertFalse(target.exists())
