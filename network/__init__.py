"""The network and its weights: config, layers, encoder and heads, checkpoints, loading.

`network.encoder` is BERT's encoder as Keras layers (`network.layers`), the
pre-training heads are in `network.heads`; `network.checkpoints` reads and
writes Google's, Hugging Face's and this project's checkpoints by name maps;
`network.presets` fetches released models by name; `network.pretrained`
builds a model from a folder, checkpoint or name, and `network.model_folder`
is what a model's folder keeps besides its weights (labels, settings);
`network.serving_spec` is the form in which every model states what it
serves, for the exports. Nothing here knows a task beyond its name.
"""
