"""Models by name: Google and Hugging Face layouts served from loopback, cached, local first."""

import contextlib
import io
import os
import time
import zipfile
from pathlib import Path
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from core.downloads import DownloadError
from modeling import BertConfig, BertEncoder, load_config, load_encoder, load_tokenizer
from network import presets
from network.checkpoints import export_google_checkpoint, export_huggingface, load_weights
from network.config import ConfigError
from tests.fixtures import TINY_CONFIG, TestCase, write_tiny_config
from tests.loopback_http import LoopbackServer, closed_port_url
from tests.zip_archives import declaring, zip_bytes

GOOGLE_NAME = "uncased_L-2_H-128_A-2"
GOOGLE_PATH = f"/2020_02_20/{GOOGLE_NAME}.zip"
HF_ID = "google/bert_uncased_L-2_H-128_A-2"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"Word{i}" for i in range(59)]


def _encoder(seed: int) -> BertEncoder:
    keras.utils.set_random_seed(seed)
    return BertEncoder(BertConfig.from_dict(TINY_CONFIG))


def _weights(model) -> dict[str, np.ndarray]:
    return {name: variable.numpy() for name, variable in model.checkpoint_variables().items()}


def _google_folder(folder: Path, encoder: BertEncoder) -> Path:
    """A folder laid out as Google's releases are: config, vocabulary, TF1 checkpoint."""
    folder.mkdir(parents=True)
    write_tiny_config(folder / "bert_config.json")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    export_google_checkpoint(encoder, folder / "bert_model.ckpt")
    return folder


def _zip_of(folder: Path, skip: str = "") -> bytes:
    """The folder zipped under its own name, as Google published each release."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for file in sorted(folder.iterdir()):
            if not file.name.startswith(skip or "\0"):
                archive.write(file, f"{folder.name}/{file.name}")
    return buffer.getvalue()


class PresetsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.work = cls.class_folder()
        cls.google_encoder, cls.hf_encoder = _encoder(1), _encoder(2)
        release = _google_folder(cls.work / GOOGLE_NAME, cls.google_encoder)
        cls.google_zip = _zip_of(release)
        cls.zip_without_checkpoint = _zip_of(release, skip="bert_model.ckpt")
        hf_folder = export_huggingface(cls.hf_encoder, cls.work / "hf",
                                       BertConfig.from_dict(TINY_CONFIG))
        cls.hf_files = {name: (hf_folder / name).read_bytes()
                        for name in ("config.json", "model.safetensors")}
        cls.hf_files["vocab.txt"] = (release / "vocab.txt").read_bytes()

    def setUp(self):
        super().setUp()
        self.server = LoopbackServer()
        self.addCleanup(self.server.close)
        self.server.files[GOOGLE_PATH] = self.google_zip
        for name, content in self.hf_files.items():
            self.server.files[f"/{HF_ID}/resolve/main/{name}"] = content
        self.cache = self.tmp_path()
        self._environment(BERT_CACHE_DIR=str(self.cache), BERT_HF_URL=self.server.url,
                          BERT_GOOGLE_MODELS_URL=self.server.url + "/")
        # Relative names are looked up in the working folder first: make it an empty one.
        self.enter_context(contextlib.chdir(self.tmp_path()))
        self.enter_context(contextlib.redirect_stderr(io.StringIO()))  # progress lines

    def _environment(self, **values):
        self.enter_context(mock.patch.dict(os.environ, values))

    def assert_weights(self, model, expected):
        for name, value in _weights(expected).items():
            self.assertAllEqual(model.checkpoint_variables()[name], value, msg=name)

    def test_google_name_downloads_once(self):
        self.assert_weights(load_encoder(GOOGLE_NAME), self.google_encoder)
        self.assertEqual(self.server.requests, [(GOOGLE_PATH, None)])
        self.assertEqual(load_config(GOOGLE_NAME).hidden_size, TINY_CONFIG["hidden_size"])
        self.assertTrue(load_tokenizer(GOOGLE_NAME).do_lower_case)  # "uncased_" in its name
        self.assert_weights(load_encoder(GOOGLE_NAME), self.google_encoder)
        self.assertLen(self.server.requests, 1)
        folder = presets.resolve(GOOGLE_NAME)
        self.assertEqual(folder, self.cache / "models" / "google" / GOOGLE_NAME)
        self.assertEqual(sorted(path.name for path in (self.cache / "downloads" / "google")
                                .iterdir()), [f".{GOOGLE_NAME}.zip.lock"])  # no zip kept

    def test_init_checkpoint_by_name(self):
        model = BertEncoder(BertConfig.from_dict(TINY_CONFIG))
        report = load_weights(model, GOOGLE_NAME)
        self.assertEqual(report.format, "google")
        self.assertEqual(report.source, str(presets.resolve(GOOGLE_NAME) / "bert_model.ckpt"))
        self.assert_weights(model, self.google_encoder)

    def test_huggingface_id_downloads_once(self):
        self.assert_weights(load_encoder(HF_ID), self.hf_encoder)
        asked = [path.rsplit("/", 1)[1] for path, _ in self.server.requests]
        self.assertEqual(asked, ["config.json", "vocab.txt", "tokenizer_config.json",
                                 "model.safetensors"])  # the optional file is absent (404)
        self.assertTrue(load_tokenizer(HF_ID).do_lower_case)
        self.assert_weights(load_encoder(HF_ID), self.hf_encoder)
        self.assertLen(self.server.requests, 4)

    def test_huggingface_short_id_is_its_repository(self):
        for name, content in self.hf_files.items():
            self.server.files[f"/google-bert/bert-base-uncased/resolve/main/{name}"] = content
        folder = self.cache / "models" / "huggingface" / "google-bert" / "bert-base-uncased"
        self.assertEqual(presets.resolve("bert-base-uncased"), folder)
        self.assert_weights(load_encoder("bert-base-uncased"), self.hf_encoder)

    def test_cut_weights_download_resumes(self):
        safetensors = f"/{HF_ID}/resolve/main/model.safetensors"
        self.server.cut_after[safetensors] = 1000
        self.assert_weights(load_encoder(HF_ID), self.hf_encoder)
        self.assertEqual(self.server.requests[-2:], [(safetensors, None),
                                                     (safetensors, "bytes=1000-")])
        self.assertEqual((presets.resolve(HF_ID) / "model.safetensors").read_bytes(),
                         self.hf_files["model.safetensors"])

    def test_local_folder_of_the_same_name_wins(self):
        local = _encoder(3)
        _google_folder(Path(GOOGLE_NAME), local)
        self.assert_weights(load_encoder(GOOGLE_NAME), local)
        self.assertEqual(presets.resolve(GOOGLE_NAME), Path(GOOGLE_NAME))
        self.assertEqual(self.server.requests, [])

    def test_corrupt_zip_is_refused_and_leaves_no_folder(self):
        archive = bytearray(self.google_zip)
        archive[200] ^= 0xFF
        self.server.files[GOOGLE_PATH] = bytes(archive)
        with self.assertRaisesRegex(DownloadError, rf"{GOOGLE_NAME}\.zip: corrupt zip archive"):
            load_encoder(GOOGLE_NAME)
        self._assert_nothing_cached()

    def test_archive_that_is_no_release_leaves_no_folder(self):
        self.server.files[GOOGLE_PATH] = self.zip_without_checkpoint
        with self.assertRaisesRegex(DownloadError, r"the archive lacks bert_model\.ckpt\.index"):
            load_encoder(GOOGLE_NAME)
        self._assert_nothing_cached()

    def test_only_the_release_files_are_unpacked(self):
        with zipfile.ZipFile(io.BytesIO(self.google_zip)) as release:
            members = {name: release.read(name) for name in release.namelist()}
        members[f"{GOOGLE_NAME}/bert_model.ckpt.meta"] = b"graph"
        members[f"{GOOGLE_NAME}/notes/huge.bin"] = bytes(3_000_000)
        self.server.files[GOOGLE_PATH] = zip_bytes(members, zipfile.ZIP_DEFLATED)
        self.assert_weights(load_encoder(GOOGLE_NAME), self.google_encoder)
        self.assertEqual(sorted(path.name for path in presets.resolve(GOOGLE_NAME).iterdir()),
                         ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                          "bert_model.ckpt.index", "vocab.txt"])

    def test_archive_declaring_more_than_the_limit_is_refused_and_leaves_no_folder(self):
        member = f"{GOOGLE_NAME}/bert_model.ckpt.data-00000-of-00001"
        self.server.files[GOOGLE_PATH] = declaring(self.google_zip, member, 7 << 29)
        with self.assertRaisesRegex(DownloadError, rf"{GOOGLE_NAME}\.zip: member {member} "
                                                   r"brings the unpacked size to \d+ bytes, "
                                                   r"over the limit of 3221225472"):
            load_encoder(GOOGLE_NAME)
        self._assert_nothing_cached()

    def _assert_nothing_cached(self):
        left = [path.name for path in self.cache.rglob("*") if not path.name.endswith(".lock")]
        self.assertEqual(sorted(left), ["downloads", "google", "google", "models"])

    def test_offline_fails_fast_naming_the_url_and_a_local_folder(self):
        offline = closed_port_url()
        self._environment(BERT_GOOGLE_MODELS_URL=offline, BERT_HF_URL=offline)
        for name, url, advice in (
                (GOOGLE_NAME, f"{offline}{GOOGLE_PATH}",
                 "download .*, unzip it, and pass the path of the folder"),
                (HF_ID, f"{offline}/{HF_ID}/resolve/main/config.json",
                 "in one folder and pass its path instead")):
            began = time.monotonic()
            with self.assertRaisesRegex(DownloadError, f"{url}: cannot connect .*{advice}"):
                load_encoder(name)
            self.assertLess(time.monotonic() - began, 2.0)

    def test_unknown_name_lists_close_matches(self):
        with self.assertRaisesRegex(ConfigError, r"'uncased_L-12_H-768_A12' is neither a local "
                                    r"file or folder nor a known model name; did you mean "
                                    r"uncased_L-12_H-768_A-12.*loaded by its folder's path"):
            load_encoder("uncased_L-12_H-768_A12")
        self.assertEqual(self.server.requests, [])

    def test_paths_are_not_names(self):
        Path("runs").mkdir()
        for path in ("runs/missing", "./missing/model", "/no/such/folder"):
            self.assertEqual(presets.resolve(path), Path(path))
        self.assertEqual(self.server.requests, [])

    def test_registry_holds_the_releases_and_the_24_miniatures(self):
        miniatures = [f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"
                      for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)]
        self.assertContainsSubset(miniatures, presets.GOOGLE_RELEASES)
        self.assertEqual(presets.GOOGLE_RELEASES["uncased_L-8_H-512_A-8"], "2020_02_20")
        # BERT-Base, one of the miniatures too, comes from its original release.
        self.assertEqual(presets.GOOGLE_RELEASES["uncased_L-12_H-768_A-12"], "2018_10_18")
        self.assertEqual(presets.GOOGLE_RELEASES["wwm_cased_L-24_H-1024_A-16"], "2019_05_30")
        self.assertLen(presets.GOOGLE_RELEASES, 30)


if __name__ == "__main__":
    tf.test.main()
