"""Pre-training examples: the original's instance algorithm, masking, records and sharded output."""
