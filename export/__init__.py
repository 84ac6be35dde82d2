"""Every format a model leaves the library in: other ecosystems' layouts and SavedModels.

`export.model_exports.export_model` writes each of them: Google's and
Hugging Face's layouts (`export.layouts`), TF Hub's (`export.tf_hub`), the
SavedModels that take raw text (each task model's serving module in
`export.serving*`), TF Serving's numeric model and TFLite. All read their
source through `export.sources`: a model object, a `.keras` file, or a
folder, checkpoint or name; and all read what the model serves from the
model's own `serving_spec()` (`network.serving_spec`), not from its class.
"""
