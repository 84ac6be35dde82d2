"""Checkpoints in and out: Google TF1, Hugging Face safetensors, and this project's own."""

from network.checkpoints.loading import LoadReport, load_weights
from network.checkpoints.readers import CheckpointError, read_checkpoint
from network.checkpoints.writing import (export_google_checkpoint, export_huggingface,
                                         save_checkpoint, training_checkpoint)

__all__ = ["CheckpointError", "LoadReport", "export_google_checkpoint", "export_huggingface",
           "load_weights", "read_checkpoint", "save_checkpoint", "training_checkpoint"]
