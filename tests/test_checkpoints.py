"""Checkpoints: real MiniLM and Hugging Face heads against PyTorch's outputs, formats round trip."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from data_prep.assets import minilm_dir
from data_prep.sentence_pairs import pack
from data_prep.tokenization import FullTokenizer
from modeling.checkpoints import (CheckpointError, export_google_checkpoint, export_huggingface,
                                  load_weights, read_checkpoint, save_checkpoint)
from modeling.checkpoints import names
from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.pretrainer import BertPretrainer

GOLDEN = Path(__file__).parent / "golden"
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


@pytest.fixture(scope="module")
def hf_loaded_pretrainer() -> BertPretrainer:
    model = _tiny_pretrainer()
    report = load_weights(model, TINY)
    assert report.format == "huggingface"
    assert report.missing == [] and report.unexpected == []
    return model


def test_huggingface_heads_match_pytorch(hf_loaded_pretrainer):
    golden = np.load(GOLDEN / "tiny_bert_pretraining.npz")
    masked_lm, next_sentence = _pretraining_outputs(hf_loaded_pretrainer)
    np.testing.assert_allclose(masked_lm, golden["prediction_logits"], atol=1e-4)
    np.testing.assert_allclose(next_sentence, golden["seq_relationship_logits"], atol=1e-4)


def test_real_minilm_matches_pytorch():
    folder = minilm_dir()
    config = BertConfig.from_json_file(folder / "config.json")
    encoder = BertEncoder(config, output_hidden_states=True)
    report = load_weights(encoder, folder)
    assert report.missing == [] and report.unexpected == []
    assert report.skipped == ["embeddings.position_ids"]
    golden = np.load(GOLDEN / "minilm_reference.npz")
    outputs = encoder({key: tf.constant(golden[key])
                       for key in ("input_ids", "input_mask", "segment_ids")}, training=False)
    mask = golden["input_mask"][None, :, :, None].astype(bool)
    for index, layer in enumerate(golden["hidden_state_layers"]):
        ours = np.where(mask[0], outputs["hidden_states"][layer].numpy(), 0)
        theirs = np.where(mask[0], golden["hidden_states"][index], 0)
        np.testing.assert_allclose(ours, theirs, atol=1e-4, err_msg=f"hidden state {layer}")
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), golden["pooled_output"],
                               atol=1e-4)


def test_tokenizer_and_packing_give_huggingface_ids():
    folder = minilm_dir()
    texts = json.loads((GOLDEN / "minilm_reference.json").read_text())
    golden = np.load(GOLDEN / "minilm_reference.npz")
    tokenizer = FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    for row, (first, second) in enumerate(zip(texts["text_a"], texts["text_b"])):
        packed = pack(tokenizer.tokenize(first),
                      tokenizer.tokenize(second) if second is not None else None,
                      texts["max_length"], tokenizer.vocab)
        assert packed.input_ids == golden["input_ids"][row].tolist()
        assert packed.segment_ids == golden["segment_ids"][row].tolist()
        assert packed.input_mask == golden["input_mask"][row].tolist()


def test_google_export_has_google_names_and_reloads_exactly(tmp_path, hf_loaded_pretrainer):
    prefix = export_google_checkpoint(hf_loaded_pretrainer, tmp_path / "bert_model.ckpt")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    hidden = 32
    assert shapes["bert/encoder/layer_1/attention/self/query/kernel"] == [hidden, hidden]
    assert shapes["bert/encoder/layer_0/intermediate/dense/kernel"] == [hidden, 37]
    assert shapes["cls/seq_relationship/output_weights"] == [2, hidden]
    assert shapes["cls/predictions/output_bias"] == [99]
    assert shapes["bert/embeddings/LayerNorm/gamma"] == [hidden]
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]
    reloaded = _tiny_pretrainer()
    report = load_weights(reloaded, prefix)
    assert report.format == "google" and not report.missing and not report.unexpected
    for ours, theirs in zip(_pretraining_outputs(reloaded),
                            _pretraining_outputs(hf_loaded_pretrainer)):
        np.testing.assert_array_equal(ours, theirs)


def test_tf1_saver_checkpoint_with_optimizer_slots(tmp_path, hf_loaded_pretrainer):
    """A checkpoint written by TF1's Saver, as Google's training runs wrote them."""
    values = {name: variable.numpy()
              for name, variable in hf_loaded_pretrainer.checkpoint_variables().items()}
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(value, name=name) for name, value in values.items()]
        variables += [tf.compat.v1.Variable(np.zeros_like(value), name=f"{name}/adam_m")
                      for name, value in list(values.items())[:3]]
        variables.append(tf.compat.v1.Variable(7, dtype=tf.int64, name="global_step"))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(session, str(tmp_path / "model.ckpt"))
    reloaded = _tiny_pretrainer()
    report = load_weights(reloaded, prefix)
    assert report.format == "google" and not report.missing and not report.unexpected
    assert "global_step" in report.skipped and len(report.skipped) == 4
    golden = np.load(GOLDEN / "tiny_bert_pretraining.npz")
    np.testing.assert_allclose(_pretraining_outputs(reloaded)[1],
                               golden["seq_relationship_logits"], atol=1e-4)


def test_own_checkpoint_loads_into_another_model_class(tmp_path, hf_loaded_pretrainer):
    path = save_checkpoint(hf_loaded_pretrainer, tmp_path / "ckpt")
    encoder = BertEncoder(hf_loaded_pretrainer.config)
    report = load_weights(encoder, path)
    assert report.format == "own" and not report.missing
    assert report.unexpected and all(name.startswith("cls/") for name in report.unexpected)
    np.testing.assert_array_equal(encoder.embedding_table.numpy(),
                                  hf_loaded_pretrainer.encoder.embedding_table.numpy())


def test_huggingface_export_round_trip(tmp_path, hf_loaded_pretrainer):
    folder = export_huggingface(hf_loaded_pretrainer, tmp_path / "hf", hf_loaded_pretrainer.config)
    assert json.loads((folder / "config.json").read_text())["architectures"] == [
        "BertForPreTraining"]
    exported = read_checkpoint(folder).tensors
    original = read_checkpoint(TINY).tensors
    assert sorted(exported) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)


def test_shape_mismatch_names_tensor_and_hint():
    config = BertConfig.from_json_file(TINY / "config.json").replace(vocab_size=100)
    with pytest.raises(CheckpointError, match=r"word_embeddings has shape \[99, 32\].*vocab_size"):
        load_weights(BertEncoder(config), TINY)


@pytest.mark.parametrize("name, message", [
    ("missing", "not a checkpoint"),
    ("pytorch_model.bin", "PyTorch pickles"),
    ("weights.safetensors", "no such file"),
])
def test_unreadable_paths(tmp_path, name, message):
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint(tmp_path / name)


def test_folder_without_weights_and_foreign_safetensors(tmp_path):
    from safetensors.numpy import save_file

    with pytest.raises(CheckpointError, match="without model.safetensors"):
        read_checkpoint(tmp_path)
    save_file({"vision.conv.weight": np.zeros((2, 2), np.float32)},
              str(tmp_path / "other.safetensors"))
    encoder = BertEncoder(BertConfig.from_json_file(TINY / "config.json"))
    with pytest.raises(CheckpointError, match="none of the model's .* weights"):
        load_weights(encoder, tmp_path / "other.safetensors")


def test_name_maps_invert_each_other(hf_loaded_pretrainer):
    for google_name in hf_loaded_pretrainer.checkpoint_variables():
        hf_name, transposed = names.google_to_huggingface(google_name)
        assert names.huggingface_to_google(hf_name) == (google_name, transposed)
    assert names.normalize_huggingface_name("encoder.layer.0.output.LayerNorm.gamma") == \
        "bert.encoder.layer.0.output.LayerNorm.weight"
    tricky = "bert/a.b/..S/c"
    assert names.unescape_object_name(names.escape_object_name(tricky)) == tricky
