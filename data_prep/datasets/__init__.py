"""Fine-tuning datasets: GLUE and SWAG classification, SQuAD, CoNLL token tagging."""
