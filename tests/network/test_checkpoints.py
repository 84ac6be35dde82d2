"""Checkpoints: real MiniLM and Hugging Face heads against PyTorch's outputs, formats round trip."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from modeling.pretrainer import BertPretrainer
from network.checkpoints import (CheckpointError, export_google_checkpoint, export_huggingface,
                                 load_weights, names, read_checkpoint, save_checkpoint,
                                 training_checkpoint)
from network.config import BertConfig
from network.encoder import BertEncoder
from tests.fixtures import GOLDEN, TestCase
from text.sentence_pairs import pack
from text.tokenization import FullTokenizer
from training.optimization import create_optimizer

pytestmark = pytest.mark.assets

TINY = GOLDEN / "tiny_bert_pretraining"


def _tiny_pretrainer() -> BertPretrainer:
    return BertPretrainer(BertConfig.from_json_file(TINY / "config.json"), objective="mlm_nsp")


def _pretraining_outputs(model: BertPretrainer) -> tuple[np.ndarray, np.ndarray]:
    golden = np.load(GOLDEN / "tiny_bert_pretraining.npz")
    batch, length = golden["input_ids"].shape
    features = {key: tf.constant(golden[key]) for key in ("input_ids", "input_mask", "segment_ids")}
    features["masked_lm_positions"] = tf.tile(tf.range(length)[None], [batch, 1])
    outputs = model(features, training=False)
    return outputs["masked_lm_logits"].numpy(), outputs["next_sentence_logits"].numpy()


def _hf_loaded_pretrainer():
    model = _tiny_pretrainer()
    return model, load_weights(model, TINY)


def names_block(name: str) -> int | None:
    parts = name.split("/")
    return int(parts[2][len("layer_"):]) if parts[1:2] == ["encoder"] else None


def _weights(model) -> dict[str, np.ndarray]:
    return {name: variable.numpy() for name, variable in model.checkpoint_variables().items()}


class CheckpointFormatsTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """The tiny pre-trainer loads its Hugging Face weights once; no test changes them."""
        super().setUpClass()
        cls.hf_loaded_pretrainer, cls.hf_report = _hf_loaded_pretrainer()

    def test_huggingface_folder_loads_every_weight(self):
        self.assertEqual(self.hf_report.format, "huggingface")
        self.assertEqual(self.hf_report.missing, [])
        self.assertEqual(self.hf_report.unexpected, [])

    def test_huggingface_heads_match_pytorch(self):
        golden = np.load(GOLDEN / "tiny_bert_pretraining.npz")
        masked_lm, next_sentence = _pretraining_outputs(self.hf_loaded_pretrainer)
        self.assertAllClose(masked_lm, golden["prediction_logits"], atol=1e-4, rtol=1e-7)
        self.assertAllClose(next_sentence, golden["seq_relationship_logits"], atol=1e-4,
                            rtol=1e-7)

    def test_real_minilm_matches_pytorch(self):
        folder = minilm_dir()
        config = BertConfig.from_json_file(folder / "config.json")
        encoder = BertEncoder(config, output_hidden_states=True)
        report = load_weights(encoder, folder)
        self.assertEqual(report.missing, [])
        self.assertEqual(report.unexpected, [])
        self.assertEqual(report.skipped, ["embeddings.position_ids"])
        golden = np.load(GOLDEN / "minilm_reference.npz")
        outputs = encoder({key: tf.constant(golden[key])
                           for key in ("input_ids", "input_mask", "segment_ids")}, training=False)
        mask = golden["input_mask"][None, :, :, None].astype(bool)
        for index, layer in enumerate(golden["hidden_state_layers"]):
            ours = np.where(mask[0], outputs["hidden_states"][layer].numpy(), 0)
            theirs = np.where(mask[0], golden["hidden_states"][index], 0)
            self.assertAllClose(ours, theirs, atol=1e-4, rtol=1e-7, msg=f"hidden state {layer}")
        self.assertAllClose(outputs["pooled_output"].numpy(), golden["pooled_output"],
                            atol=1e-4, rtol=1e-7)

    def test_tokenizer_and_packing_give_huggingface_ids(self):
        folder = minilm_dir()
        texts = json.loads((GOLDEN / "minilm_reference.json").read_text())
        golden = np.load(GOLDEN / "minilm_reference.npz")
        tokenizer = FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
        for row, (first, second) in enumerate(zip(texts["text_a"], texts["text_b"])):
            packed = pack(tokenizer.tokenize(first),
                          tokenizer.tokenize(second) if second is not None else None,
                          texts["max_length"], tokenizer.vocab)
            self.assertEqual(packed.input_ids, golden["input_ids"][row].tolist())
            self.assertEqual(packed.segment_ids, golden["segment_ids"][row].tolist())
            self.assertEqual(packed.input_mask, golden["input_mask"][row].tolist())

    def test_google_export_has_google_names_and_reloads_exactly(self):
        tmp_path = self.tmp_path()
        prefix = export_google_checkpoint(self.hf_loaded_pretrainer, tmp_path / "bert_model.ckpt")
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
        hidden = 32
        self.assertEqual(shapes["bert/encoder/layer_1/attention/self/query/kernel"],
                         [hidden, hidden])
        self.assertEqual(shapes["bert/encoder/layer_0/intermediate/dense/kernel"], [hidden, 37])
        self.assertEqual(shapes["cls/seq_relationship/output_weights"], [2, hidden])
        self.assertEqual(shapes["cls/predictions/output_bias"], [99])
        self.assertEqual(shapes["bert/embeddings/LayerNorm/gamma"], [hidden])
        self.assertEmpty([path for path in tmp_path.iterdir() if path.name.startswith(".")])
        reloaded = _tiny_pretrainer()
        report = load_weights(reloaded, prefix)
        self.assertEqual(report.format, "google")
        self.assertEmpty(report.missing)
        self.assertEmpty(report.unexpected)
        for ours, theirs in zip(_pretraining_outputs(reloaded),
                                _pretraining_outputs(self.hf_loaded_pretrainer)):
            self.assertAllEqual(ours, theirs)

    def test_tf1_saver_checkpoint_with_optimizer_slots(self):
        """A checkpoint written by TF1's Saver, as Google's training runs wrote them."""
        values = {name: variable.numpy()
                  for name, variable in self.hf_loaded_pretrainer.checkpoint_variables().items()}
        graph = tf.Graph()
        with graph.as_default():
            variables = [tf.compat.v1.Variable(value, name=name)
                         for name, value in values.items()]
            variables += [tf.compat.v1.Variable(np.zeros_like(value), name=f"{name}/adam_m")
                          for name, value in list(values.items())[:3]]
            variables.append(tf.compat.v1.Variable(7, dtype=tf.int64, name="global_step"))
            saver = tf.compat.v1.train.Saver(variables)
            with tf.compat.v1.Session(graph=graph) as session:
                session.run(tf.compat.v1.global_variables_initializer())
                prefix = saver.save(session, str(self.tmp_path() / "model.ckpt"))
        reloaded = _tiny_pretrainer()
        report = load_weights(reloaded, prefix)
        self.assertEqual(report.format, "google")
        self.assertEmpty(report.missing)
        self.assertEmpty(report.unexpected)
        self.assertIn("global_step", report.skipped)
        self.assertLen(report.skipped, 4)
        golden = np.load(GOLDEN / "tiny_bert_pretraining.npz")
        self.assertAllClose(_pretraining_outputs(reloaded)[1],
                            golden["seq_relationship_logits"], atol=1e-4, rtol=1e-7)

    def test_own_checkpoint_loads_into_another_model_class(self):
        path = save_checkpoint(self.hf_loaded_pretrainer, self.tmp_path() / "ckpt")
        encoder = BertEncoder(self.hf_loaded_pretrainer.config)
        report = load_weights(encoder, path)
        self.assertEqual(report.format, "own")
        self.assertEmpty(report.missing)
        self.assertNotEmpty(report.unexpected)
        for name in report.unexpected:
            self.assertStartsWith(name, "cls/")
        self.assertAllEqual(encoder.embedding_table.numpy(),
                            self.hf_loaded_pretrainer.encoder.embedding_table.numpy())

    @parameterized.parameters(0, 1)
    def test_transfer_layers_keeps_the_embeddings_and_blocks_below(self, transfer_layers):
        """GPT's layers-transferred curve: the first N blocks come from the checkpoint, no more."""
        config = self.hf_loaded_pretrainer.config
        self.assertEqual(config.num_hidden_layers, 2)
        path = save_checkpoint(self.hf_loaded_pretrainer, self.tmp_path() / "ckpt")
        saved = read_checkpoint(path).tensors
        encoder = BertEncoder(config)
        before = {name: variable.numpy()
                  for name, variable in encoder.checkpoint_variables().items()}
        report = load_weights(encoder, path, transfer_layers)
        for name, variable in encoder.checkpoint_variables().items():
            block = names_block(name)
            expected_loaded = (block is None and not name.startswith("bert/pooler/")) or (
                block is not None and block < transfer_layers)
            self.assertEqual(name in report.loaded, expected_loaded, name)
            self.assertNotEqual(name in report.held_back, expected_loaded, name)
            self.assertAllEqual(variable.numpy(),
                                saved[name] if expected_loaded else before[name], msg=name)
        self.assertIn("left as initialized", report.summary())
        # All blocks: the pooler comes too; more blocks than the model has is refused.
        self.assertEmpty(load_weights(BertEncoder(config), path, 2).held_back)
        with self.assertRaisesRegex(ValueError, "^transfer_layers=3, but the model has 2"):
            load_weights(BertEncoder(config), path, 3)

    def test_huggingface_export_round_trip(self):
        folder = export_huggingface(self.hf_loaded_pretrainer, self.tmp_path() / "hf",
                                    self.hf_loaded_pretrainer.config)
        self.assertEqual(json.loads((folder / "config.json").read_text())["architectures"],
                         ["BertForPreTraining"])
        exported = read_checkpoint(folder).tensors
        original = read_checkpoint(TINY).tensors
        self.assertEqual(sorted(exported), sorted(original))
        for name, value in original.items():
            self.assertAllEqual(exported[name], value, msg=name)

    @parameterized.parameters(
        ({"vocab_size": 100}, (r"word_embeddings has shape \[99, 32\], the model expects "
                               r"\[100, 32\]: vocab_size=100 in the config, 99 in the "
                               r"checkpoint;")),
        ({"hidden_size": 64, "num_attention_heads": 2},
         (r"word_embeddings has shape \[99, 32\], the model expects \[99, 64\]: hidden_size=64 "
          r"in the config, 32 in the checkpoint; does bert_config_file describe it\?$")),
        ({"intermediate_size": 48}, (r"intermediate/dense/kernel has shape \[32, \d+\], the "
                                     r"model expects \[32, 48\]; .*intermediate_size")),
    )
    def test_shape_mismatch_names_tensor_both_shapes_and_the_config_field(self, change, message):
        config = BertConfig.from_json_file(TINY / "config.json").replace(**change)
        with self.assertRaisesRegex(CheckpointError, message) as raised:
            load_weights(BertEncoder(config), TINY)
        # A command line whose flag gives the config names it as the flag.
        self.assertIn("does --bert_config_file describe",
                      raised.exception.render({"bert_config_file"}))

    @parameterized.parameters(
        ("missing", "not a checkpoint"),
        ("pytorch_model.bin", "PyTorch pickles"),
        ("weights.safetensors", "no such file"),
    )
    def test_unreadable_paths(self, name, message):
        with self.assertRaisesRegex(CheckpointError, message):
            read_checkpoint(self.tmp_path() / name)

    def test_folder_without_weights_and_foreign_safetensors(self):
        from safetensors.numpy import save_file

        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(CheckpointError,
                                    "no checkpoint in this folder.* it holds nothing"):
            read_checkpoint(tmp_path)
        save_file({"vision.conv.weight": np.zeros((2, 2), np.float32)},
                  str(tmp_path / "other.safetensors"))
        encoder = BertEncoder(BertConfig.from_json_file(TINY / "config.json"))
        with self.assertRaisesRegex(CheckpointError, "none of the model's .* weights"):
            load_weights(encoder, tmp_path / "other.safetensors")

    def test_name_maps_invert_each_other(self):
        for google_name in self.hf_loaded_pretrainer.checkpoint_variables():
            hf_name, transposed = names.google_to_huggingface(google_name)
            self.assertEqual(names.huggingface_to_google(hf_name), (google_name, transposed))
        self.assertEqual(names.normalize_huggingface_name("encoder.layer.0.output.LayerNorm.gamma"),
                         "bert.encoder.layer.0.output.LayerNorm.weight")

    @parameterized.parameters(
        ("bert_model.ckpt", export_google_checkpoint, "google"),  # Google's released models
        ("model.ckpt", save_checkpoint, "own"),  # a fine-tuning --output_dir
    )
    def test_folder_holding_a_known_prefix(self, prefix, write, format):
        tmp_path = self.tmp_path()
        write(self.hf_loaded_pretrainer, tmp_path / prefix)
        checkpoint = read_checkpoint(tmp_path)
        self.assertEqual(checkpoint.source, str(tmp_path / prefix))
        self.assertEqual(checkpoint.format, format)
        self.assertEqual(sorted(checkpoint.tensors),
                         sorted(self.hf_loaded_pretrainer.checkpoint_variables()))

    def test_unreadable_index_file(self):
        tmp_path = self.tmp_path()
        (tmp_path / "checkpoint").write_text("this is not a checkpoint state\n")
        with self.assertRaisesRegex(CheckpointError,
                                    "checkpoint: not a readable checkpoint index file"):
            read_checkpoint(tmp_path)

    def test_folder_without_any_checkpoint_lists_what_it_holds(self):
        tmp_path = self.tmp_path()
        (tmp_path / "vocab.txt").write_text("[PAD]\n")
        (tmp_path / "logs").mkdir()
        with self.assertRaisesRegex(CheckpointError,
                                    r"neither a `checkpoint` index file.*, a Hugging Face "
                                    r"model.safetensors, nor a bert_model.ckpt or model.ckpt "
                                    r"checkpoint; it holds logs, vocab.txt$"):
            read_checkpoint(tmp_path)

    def test_object_checkpoint_of_something_else(self):
        prefix = tf.train.Checkpoint(counter=tf.Variable(1)).write(
            str(self.tmp_path() / "other"))
        with self.assertRaisesRegex(CheckpointError, r"without model weights under "
                                                     r"'weights/named' \(it holds counter\)"):
            read_checkpoint(prefix)


def _write_training_run(folder: Path) -> list[dict[str, np.ndarray]]:
    """A folder laid out as the training loop leaves it: two checkpoints and an index file.

    The model is the No-NSP pre-trainer, whose pooler is frozen (not among
    the optimizer's variables); an extra object stands for state that other
    parts of a run may save beside the model.
    """
    model = BertPretrainer(BertConfig.from_json_file(TINY / "config.json"), objective="mlm")
    optimizer = create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=1)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = training_checkpoint(model, optimizer=optimizer, step=step,
                                     generator=tf.random.Generator.from_seed(3))
    manager = tf.train.CheckpointManager(checkpoint, str(folder), max_to_keep=3)
    values = []
    for number in (1, 2):
        generator = np.random.default_rng(number)
        for variable in model.checkpoint_variables().values():
            variable.assign(generator.normal(size=variable.shape).astype(np.float32))
        step.assign(number)
        manager.save(checkpoint_number=number)
        values.append(_weights(model))
    return values


class TrainingRunCheckpointsTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """One training-run folder for the class; the tests only read it."""
        super().setUpClass()
        cls.folder = cls.class_folder()
        cls.values = _write_training_run(cls.folder)

    def test_training_checkpoint_keeps_weights_under_optimizer_keys(self):
        """The layout the reader must see through: most weights are saved only once, elsewhere."""
        keys = [key for key, _ in tf.train.list_variables(str(self.folder / "ckpt-2"))]
        named = [key for key in keys if key.startswith("weights/named/")]
        self.assertTrue(any(key.startswith("optimizer/_trainable_variables/") for key in keys))
        self.assertNotEmpty(named)
        for key in named:
            self.assertIn("pooler", key)

    def test_training_output_folder_loads_its_newest_checkpoint(self):
        folder, values = self.folder, self.values
        model = BertPretrainer(BertConfig.from_json_file(TINY / "config.json"), objective="mlm")
        report = load_weights(model, folder)
        self.assertEqual(report.source, str(folder / "ckpt-2"))
        self.assertEqual(report.format, "own")
        self.assertEmpty(report.missing)
        self.assertEmpty(report.unexpected)
        # frozen, so not the optimizer's
        self.assertIn("bert/pooler/dense/kernel", report.loaded)
        for name, value in _weights(model).items():
            self.assertAllEqual(value, values[1][name], msg=name)
        self.assertIn("step/.ATTRIBUTES/VARIABLE_VALUE", report.skipped)
        self.assertTrue(any(key.startswith("generator/") for key in report.skipped))
        self.assertTrue(any(key.startswith("optimizer/_variables/") for key in report.skipped))
        self.assertFalse(any(key.startswith("optimizer/_trainable_variables/")
                             for key in report.skipped))

    def test_training_checkpoint_prefix_loads_into_an_encoder(self):
        encoder = BertEncoder(BertConfig.from_json_file(TINY / "config.json"))
        report = load_weights(encoder, self.folder / "ckpt-1")
        self.assertEmpty(report.missing)
        self.assertNotEmpty(report.unexpected)
        for name in report.unexpected:
            self.assertStartsWith(name, "cls/")
        for name, value in _weights(encoder).items():
            self.assertAllEqual(value, self.values[0][name], msg=name)

    def test_index_naming_a_missing_checkpoint(self):
        copy = self.tmp_path() / "partial"
        copy.mkdir()
        for file in self.folder.iterdir():
            if not file.name.startswith("ckpt-2"):
                (copy / file.name).write_bytes(file.read_bytes())
        with self.assertRaisesRegex(CheckpointError,
                                    r"checkpoint: names .*ckpt-2 as the newest checkpoint, but "
                                    r".*ckpt-2.index is missing; pass one that is there, e.g. "
                                    r".*ckpt-1$"):
            read_checkpoint(copy)

    def test_index_with_paths_from_elsewhere_means_files_here(self):
        """TF1 wrote absolute paths: a folder copied from a bucket names files that are not here."""
        tmp_path = self.tmp_path()
        for file in self.folder.glob("ckpt-1.*"):
            (tmp_path / file.name).write_bytes(file.read_bytes())
        (tmp_path / "checkpoint").write_text('model_checkpoint_path: "/bucket/run/ckpt-1"\n'
                                             'all_model_checkpoint_paths: "/bucket/run/ckpt-1"\n')
        checkpoint = read_checkpoint(tmp_path)
        self.assertEqual(checkpoint.source, str(tmp_path / "ckpt-1"))
        self.assertAllEqual(checkpoint.tensors["bert/pooler/dense/kernel"],
                            self.values[0]["bert/pooler/dense/kernel"])


if __name__ == "__main__":
    tf.test.main()
