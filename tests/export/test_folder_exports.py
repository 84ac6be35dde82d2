"""A run folder of a causal or BiLSTM model exports as the model object it was saved from.

Every export reads a folder through `export.sources`, which now
rebuilds the saved model from its `model_settings.json`: each format that
takes the model object takes its folder, and one that refuses it (Hugging
Face has no class for either) refuses the folder with the same message.
"""

import pytest

from export.model_exports import export_model
from export.sources import export_source
from modeling import BertClassifier, BertTokenTagger
from tests.network.test_model_folder import RunFolderTestCase

FORMATS = ("google", "huggingface", "saved_model")


class FolderExportsTest(RunFolderTestCase):

    def outcome(self, source, format_name: str) -> str:
        """"exported", or the refusal's type and message."""
        try:
            export_model(source, self.tmp_path() / "export", format_name)
        except (TypeError, ValueError) as error:
            return f"{type(error).__name__}: {error}"
        return "exported"

    @pytest.mark.long
    def test_causal_and_bilstm_folders_export_as_their_model_objects(self):
        cases = [(BertClassifier, {"num_labels": 2, "causal": True}),
                 (BertClassifier, {"num_labels": 2, "bilstm_units": 4}),
                 (BertTokenTagger, {"num_labels": 2, "bilstm_units": 4})]
        for model_class, arguments in cases:
            with self.subTest(f"{model_class.__name__} {arguments}"):
                model, out = self.fine_tuned(model_class, "run", ["a", "b"], **arguments)
                expected = {name: self.outcome(model, name) for name in FORMATS}
                self.assertEqual(expected["saved_model"], "exported")
                self.assertIn("no Hugging Face BERT class", expected["huggingface"])
                loaded = export_source(out).model
                self.assertEqual((type(loaded), loaded.causal, loaded.bilstm_units),
                                 (model_class, model.causal, model.bilstm_units))
                self.assertEqual({name: self.outcome(out, name) for name in FORMATS}, expected)

    def test_an_older_bilstm_folder_is_refused_naming_bilstm_units(self):
        _, out = self.fine_tuned(BertClassifier, "run", ["a", "b"], num_labels=2,
                                 bilstm_units=4)
        (out / "model_settings.json").unlink()  # as folders were written before it
        with self.assertRaisesRegex(ValueError, r"reads the encoder through a BiLSTM, but the "
                                    r"folder does not say its bilstm_units \(model_settings"):
            export_source(out)
