"""BertConfig: Google and Hugging Face files, presets, validation messages."""

import json
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.arguments import FieldError
from network.config import BertConfig, ConfigError
from tests.fixtures import TestCase

GOOGLE_BASE = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
    "type_vocab_size": 2, "vocab_size": 30522,
}

# A Hugging Face config.json as transformers writes it for a MiniLM BertModel.
HF_MINILM = {
    "_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": False,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 384,
    "initializer_range": 0.02, "intermediate_size": 1536, "layer_norm_eps": 1e-7,
    "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
    "num_hidden_layers": 6, "pad_token_id": 0, "position_embedding_type": "absolute",
    "transformers_version": "4.8.2", "type_vocab_size": 2, "use_cache": True,
    "vocab_size": 30522, "output_hidden_states": False, "return_dict": True,
    "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
}


def write_json(tmp_path, values, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(values) if not isinstance(values, str) else values)
    return path


class ConfigTest(TestCase, parameterized.TestCase):

    def test_reads_google_bert_config(self):
        tmp_path = self.tmp_path()
        config = BertConfig.from_json_file(write_json(tmp_path, GOOGLE_BASE, "bert_config.json"))
        self.assertEqual(config, BertConfig.preset("base"))
        self.assertEqual(config.layer_norm_eps, 1e-12)
        self.assertEqual(config.hidden_act, "gelu")

    def test_reads_hugging_face_config_and_ignores_bookkeeping(self):
        tmp_path = self.tmp_path()
        config = BertConfig.from_json_file(write_json(tmp_path, HF_MINILM))
        self.assertEqual((config.num_hidden_layers, config.hidden_size, config.num_attention_heads),
                         (6, 384, 12))
        self.assertEqual(config.intermediate_size, 1536)
        self.assertEqual(config.layer_norm_eps, 1e-7)
        self.assertEqual(config.head_size, 32)

    @parameterized.parameters([
        ("gelu", "gelu"), ("gelu_new", "gelu_approximate"),
        ("gelu_pytorch_tanh", "gelu_approximate"), ("gelu_approximate", "gelu_approximate"),
        ("relu", "relu")])
    def test_activation_names(self, name, expected):
        tmp_path = self.tmp_path()
        path = write_json(tmp_path, {**HF_MINILM, "hidden_act": name})
        self.assertEqual(BertConfig.from_json_file(path).hidden_act, expected)

    def test_writes_google_field_names_and_reads_them_back(self):
        tmp_path = self.tmp_path()
        config = BertConfig.preset("L4_H256", vocab_size=1000).replace(
            hidden_act="gelu_approximate", layer_norm_eps=1e-6)
        path = tmp_path / "out" / "bert_config.json"
        path.parent.mkdir()
        config.to_json_file(path)
        written = json.loads(path.read_text())
        self.assertEqual(set(written), set(GOOGLE_BASE) | {"layer_norm_eps"})
        self.assertEqual(written["num_attention_heads"], 4)
        self.assertEqual(written["layer_norm_eps"], 1e-6)
        self.assertEqual(BertConfig.from_json_file(path), config)
        self.assertEqual([p.name for p in path.parent.iterdir()], ["bert_config.json"])

    @parameterized.product(hidden=[128, 256, 512, 768], layers=[2, 4, 6, 8, 10, 12])
    def test_small_presets(self, layers, hidden):
        config = BertConfig.preset(f"L{layers}_H{hidden}")
        self.assertEqual((config.num_hidden_layers, config.hidden_size), (layers, hidden))
        self.assertEqual(config.num_attention_heads, hidden // 64)
        self.assertEqual(config.intermediate_size, 4 * hidden)
        self.assertEqual(config.vocab_size, 30522)

    def test_base_and_large_presets(self):
        large = BertConfig.preset("large")
        self.assertEqual((large.num_hidden_layers, large.hidden_size, large.num_attention_heads,
                          large.intermediate_size), (24, 1024, 16, 4096))
        base = BertConfig.preset("base")
        self.assertEqual((base.num_hidden_layers, base.hidden_size, base.num_attention_heads),
                         (12, 768, 12))

    @parameterized.parameters("huge", "L3_H128", "L2_H100", "l2_h128")
    def test_unknown_preset(self, name):
        with self.assertRaisesRegex(ConfigError, "unknown preset"):
            BertConfig.preset(name)

    @parameterized.parameters([
        ({"num_attention_heads": 5}, r"hidden_size \(768\) is not divisible by "
                                     r"num_attention_heads \(5\)"),
        ({"hidden_act": "swish"}, "unknown hidden_act 'swish'"),
        ({"hidden_size": 0}, "hidden_size must be a positive integer, got 0"),
        ({"num_hidden_layers": -1}, "num_hidden_layers must be a positive integer"),
        ({"vocab_size": 3.5}, "vocab_size must be a positive integer, got 3.5"),
        ({"max_position_embeddings": True}, "max_position_embeddings must be a positive integer"),
        ({"hidden_dropout_prob": 1.0}, r"hidden_dropout_prob must be a finite number in \[0, 1\)"),
        ({"layer_norm_eps": 0}, "layer_norm_eps must be a positive finite number"),
        ({"initializer_range": "0.02"}, "initializer_range must be a positive finite number"),
        # JSON files may spell NaN and Infinity; NaN passes every comparison-based check.
        ({"initializer_range": float("nan")},
         "initializer_range must be a positive finite number, got nan"),
        ({"layer_norm_eps": float("inf")}, "layer_norm_eps must be a positive finite number"),
        ({"attention_probs_dropout_prob": float("nan")},
         r"attention_probs_dropout_prob must be a finite number in \[0, 1\), got nan"),
        ({"position_embedding_type": "relative_key"},
         "position_embedding_type='relative_key' is not supported"),
        ({"model_type": "roberta"}, "model_type='roberta' is not a BERT model"),
        ({"layer_norm_epsilon": 1e-5}, "unknown field 'layer_norm_epsilon'; did you mean "
                                       "'layer_norm_eps'"),
    ])
    def test_invalid_values_name_file_and_field(self, changes, message):
        tmp_path = self.tmp_path()
        path = write_json(tmp_path, {**GOOGLE_BASE, **changes}, "bert_config.json")
        with self.assertRaisesRegex(ConfigError, message) as error:
            BertConfig.from_json_file(path)
        self.assertIn(str(path), str(error.exception))

    def test_sequence_lengths_from_3_to_the_position_embeddings_fit(self):
        config = BertConfig(vocab_size=10, max_position_embeddings=64)
        self.assertEqual(config.check_sequence_length(3), 3)
        length = config.check_sequence_length(np.int64(64))
        self.assertEqual((length, type(length)), (64, int))

    @parameterized.parameters((2, "2"), (65, "65"), ("16", "'16'"), (True, "True"),
                              (16.0, "16.0"))
    def test_other_sequence_lengths_are_refused_naming_the_field(self, value, shown):
        config = BertConfig(vocab_size=10, max_position_embeddings=64)
        with self.assertRaises(FieldError) as raised:
            config.check_sequence_length(value, "max_seq_length", "bert_config.json")
        self.assertEqual(str(raised.exception),
                         "max_seq_length must be an integer from 3 to the model's "
                         f"max_position_embeddings (64) of bert_config.json, got {shown}")
        self.assertTrue(raised.exception.render({"max_seq_length"}).startswith(
            "--max_seq_length must be"))
        with self.assertRaisesRegex(FieldError, r"^sequence_length must be an integer from 3 to "
                                                rf"the model's max_position_embeddings \(64\), "
                                                f"got {re.escape(shown)}$"):
            config.check_sequence_length(value)

    def test_missing_fields(self):
        tmp_path = self.tmp_path()
        values = {key: value for key, value in GOOGLE_BASE.items()
                  if key not in ("hidden_size", "vocab_size")}
        path = write_json(tmp_path, values)
        with self.assertRaisesRegex(ConfigError, f"{path}: missing required field.*vocab_size, "
                                                 "hidden_size"):
            BertConfig.from_json_file(path)

    def test_invalid_json(self):
        tmp_path = self.tmp_path()
        path = write_json(tmp_path, '{"vocab_size": 10,\n "hidden_size": }')
        with self.assertRaisesRegex(ConfigError, f"{path}: invalid JSON at line 2"):
            BertConfig.from_json_file(path)

    def test_json_that_is_not_an_object(self):
        tmp_path = self.tmp_path()
        path = write_json(tmp_path, "[1, 2]")
        with self.assertRaisesRegex(ConfigError, f"{path}: expected a JSON object, got list"):
            BertConfig.from_json_file(path)

    def test_missing_file(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ConfigError, "config file not found: .*nothing.json"):
            BertConfig.from_json_file(tmp_path / "nothing.json")

    def test_unreadable_file(self):
        tmp_path = self.tmp_path()
        path = tmp_path / "binary.json"
        path.write_bytes(b"\xff\xfe\x00garbage")
        with self.assertRaisesRegex(ConfigError, f"cannot read config file {path}"):
            BertConfig.from_json_file(path)

    def test_google_extra_pooler_keys_are_ignored(self):
        tmp_path = self.tmp_path()
        values = {**GOOGLE_BASE, "directionality": "bidi", "pooler_num_attention_heads": 12,
                  "pooler_type": "first_token_transform", "pooler_fc_size": 768}
        self.assertEqual(BertConfig.from_json_file(write_json(tmp_path, values)),
                         BertConfig.preset("base"))


if __name__ == "__main__":
    tf.test.main()
