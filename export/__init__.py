"""Every format a model leaves the library in: other ecosystems' layouts and SavedModels.

`export.layouts` writes Google's, Hugging Face's and TF Hub's layouts;
`export.model_exports` adds the SavedModels that take raw text (each task
model's serving module in `export.serving*`), TF Serving's numeric model
and TFLite. Both read their source through `export.sources`: a model
object, a `.keras` file, or a folder, checkpoint or name.
"""
