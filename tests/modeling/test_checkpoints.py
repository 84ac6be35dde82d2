"""Checkpoints: real MiniLM and Hugging Face heads against PyTorch's outputs, formats round trip."""

import json

import numpy as np
import pytest
import tensorflow as tf

from data_prep.corpora.assets import minilm_dir
from modeling.checkpoints import (CheckpointError, export_google_checkpoint, export_huggingface,
                                  load_weights, names, read_checkpoint, save_checkpoint,
                                  training_checkpoint)
from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.optimization import create_optimizer
from modeling.pretrainer import BertPretrainer
from tests.fixtures import GOLDEN
from text.sentence_pairs import pack
from text.tokenization import FullTokenizer

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


@pytest.mark.parametrize("transfer_layers", [0, 1])
def test_transfer_layers_keeps_the_embeddings_and_blocks_below(tmp_path, hf_loaded_pretrainer,
                                                              transfer_layers):
    """GPT's layers-transferred curve: the first N blocks come from the checkpoint, no more."""
    config = hf_loaded_pretrainer.config
    assert config.num_hidden_layers == 2
    path = save_checkpoint(hf_loaded_pretrainer, tmp_path / "ckpt")
    saved = read_checkpoint(path).tensors
    encoder = BertEncoder(config)
    before = {name: variable.numpy() for name, variable in encoder.checkpoint_variables().items()}
    report = load_weights(encoder, path, transfer_layers)
    for name, variable in encoder.checkpoint_variables().items():
        block = names_block(name)
        expected_loaded = (block is None and not name.startswith("bert/pooler/")) or (
            block is not None and block < transfer_layers)
        assert (name in report.loaded) == expected_loaded, name
        assert (name in report.held_back) != expected_loaded, name
        np.testing.assert_array_equal(variable.numpy(),
                                      saved[name] if expected_loaded else before[name], name)
    assert "left as initialized" in report.summary()
    # All blocks: the pooler comes too; more blocks than the model has is refused.
    assert not load_weights(BertEncoder(config), path, 2).held_back
    with pytest.raises(ValueError, match="--transfer_layers=3, but the model has 2"):
        load_weights(BertEncoder(config), path, 3)


def names_block(name: str) -> int | None:
    parts = name.split("/")
    return int(parts[2][len("layer_"):]) if parts[1:2] == ["encoder"] else None


def test_huggingface_export_round_trip(tmp_path, hf_loaded_pretrainer):
    folder = export_huggingface(hf_loaded_pretrainer, tmp_path / "hf", hf_loaded_pretrainer.config)
    assert json.loads((folder / "config.json").read_text())["architectures"] == [
        "BertForPreTraining"]
    exported = read_checkpoint(folder).tensors
    original = read_checkpoint(TINY).tensors
    assert sorted(exported) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)


@pytest.mark.parametrize("change, message", [
    ({"vocab_size": 100}, (r"word_embeddings has shape \[99, 32\], the model expects "
                           r"\[100, 32\]: vocab_size=100 in the config, 99 in the checkpoint;")),
    ({"hidden_size": 64, "num_attention_heads": 2},
     (r"word_embeddings has shape \[99, 32\], the model expects \[99, 64\]: hidden_size=64 "
      r"in the config, 32 in the checkpoint; does --bert_config_file describe it\?$")),
    ({"intermediate_size": 48}, (r"intermediate/dense/kernel has shape \[32, \d+\], the model "
                                 r"expects \[32, 48\]; .*intermediate_size")),
])
def test_shape_mismatch_names_tensor_both_shapes_and_the_config_field(change, message):
    config = BertConfig.from_json_file(TINY / "config.json").replace(**change)
    with pytest.raises(CheckpointError, match=message):
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

    with pytest.raises(CheckpointError, match="no checkpoint in this folder.* it holds nothing"):
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


def _weights(model) -> dict[str, np.ndarray]:
    return {name: variable.numpy() for name, variable in model.checkpoint_variables().items()}


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    """A folder laid out as the training loop leaves it: two checkpoints and an index file.

    The model is the No-NSP pre-trainer, whose pooler is frozen (not among
    the optimizer's variables); an extra object stands for state that other
    parts of a run may save beside the model.
    """
    folder = tmp_path_factory.mktemp("run")
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
    return folder, values


def test_training_checkpoint_keeps_weights_under_optimizer_keys(training_run):
    """The layout the reader must see through: most weights are saved only once, elsewhere."""
    folder, _ = training_run
    keys = [key for key, _ in tf.train.list_variables(str(folder / "ckpt-2"))]
    named = [key for key in keys if key.startswith("weights/named/")]
    assert any(key.startswith("optimizer/_trainable_variables/") for key in keys)
    assert named and all("pooler" in key for key in named)


def test_training_output_folder_loads_its_newest_checkpoint(training_run):
    folder, values = training_run
    model = BertPretrainer(BertConfig.from_json_file(TINY / "config.json"), objective="mlm")
    report = load_weights(model, folder)
    assert report.source == str(folder / "ckpt-2") and report.format == "own"
    assert not report.missing and not report.unexpected
    assert "bert/pooler/dense/kernel" in report.loaded  # frozen, so not the optimizer's
    for name, value in _weights(model).items():
        np.testing.assert_array_equal(value, values[1][name], err_msg=name)
    assert "step/.ATTRIBUTES/VARIABLE_VALUE" in report.skipped
    assert any(key.startswith("generator/") for key in report.skipped)
    assert any(key.startswith("optimizer/_variables/") for key in report.skipped)
    assert not any(key.startswith("optimizer/_trainable_variables/") for key in report.skipped)


def test_training_checkpoint_prefix_loads_into_an_encoder(training_run):
    folder, values = training_run
    encoder = BertEncoder(BertConfig.from_json_file(TINY / "config.json"))
    report = load_weights(encoder, folder / "ckpt-1")
    assert not report.missing
    assert report.unexpected and all(name.startswith("cls/") for name in report.unexpected)
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(value, values[0][name], err_msg=name)


@pytest.mark.parametrize("prefix, write, format", [
    ("bert_model.ckpt", export_google_checkpoint, "google"),  # Google's released models
    ("model.ckpt", save_checkpoint, "own"),  # a fine-tuning --output_dir
])
def test_folder_holding_a_known_prefix(tmp_path, hf_loaded_pretrainer, prefix, write, format):
    write(hf_loaded_pretrainer, tmp_path / prefix)
    checkpoint = read_checkpoint(tmp_path)
    assert checkpoint.source == str(tmp_path / prefix) and checkpoint.format == format
    assert sorted(checkpoint.tensors) == sorted(hf_loaded_pretrainer.checkpoint_variables())


def test_index_naming_a_missing_checkpoint(training_run, tmp_path):
    folder, _ = training_run
    copy = tmp_path / "partial"
    copy.mkdir()
    for file in folder.iterdir():
        if not file.name.startswith("ckpt-2"):
            (copy / file.name).write_bytes(file.read_bytes())
    with pytest.raises(CheckpointError,
                       match=r"checkpoint: names .*ckpt-2 as the newest checkpoint, but "
                             r".*ckpt-2.index is missing; pass one that is there, e.g. .*ckpt-1$"):
        read_checkpoint(copy)


def test_index_with_paths_from_elsewhere_means_files_here(training_run, tmp_path):
    """TF1 wrote absolute paths: a folder copied from a bucket names files that are not here."""
    folder, values = training_run
    for file in folder.glob("ckpt-1.*"):
        (tmp_path / file.name).write_bytes(file.read_bytes())
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "/bucket/run/ckpt-1"\n'
                                         'all_model_checkpoint_paths: "/bucket/run/ckpt-1"\n')
    checkpoint = read_checkpoint(tmp_path)
    assert checkpoint.source == str(tmp_path / "ckpt-1")
    np.testing.assert_array_equal(checkpoint.tensors["bert/pooler/dense/kernel"],
                                  values[0]["bert/pooler/dense/kernel"])


def test_unreadable_index_file(tmp_path):
    (tmp_path / "checkpoint").write_text("this is not a checkpoint state\n")
    with pytest.raises(CheckpointError, match="checkpoint: not a readable checkpoint index file"):
        read_checkpoint(tmp_path)


def test_folder_without_any_checkpoint_lists_what_it_holds(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    (tmp_path / "logs").mkdir()
    with pytest.raises(CheckpointError, match=r"neither a `checkpoint` index file.*, a Hugging "
                                              r"Face model.safetensors, nor a bert_model.ckpt "
                                              r"or model.ckpt checkpoint; it holds logs, "
                                              r"vocab.txt$"):
        read_checkpoint(tmp_path)


def test_object_checkpoint_of_something_else(tmp_path):
    prefix = tf.train.Checkpoint(counter=tf.Variable(1)).write(str(tmp_path / "other"))
    with pytest.raises(CheckpointError, match=r"without model weights under 'weights/named' "
                                              r"\(it holds counter\)"):
        read_checkpoint(prefix)
