"""Text in, token ids out: normalization, tokenization, sentence splitting, corpus files, input packing."""
