"""Keras layers that make up BERT: embeddings, self-attention, Transformer block."""
