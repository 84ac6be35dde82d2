"""The names of the encoder's inputs, shared by every format, dataset and model that carries them.

They are the original `create_pretraining_data.py`'s TFRecord feature names,
so records written by either implementation train on the other; a model's
`inputs`, a fine-tuning dataset's arrays and an exported signature all use
them, and a rename here reaches each of them at once.
"""

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
