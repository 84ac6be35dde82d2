"""The paper's ablations (Tables 5-8, the training-steps figure) at small scale.

`python -m experiments --table=5 --scale=cpu` builds the grid of one table
(`grid`), runs every pre-training and fine-tuning it needs as a subprocess
of the project's own command-line tools, caching each result under a hash
of its settings (`jobs`), and writes a markdown table with the paper's
numbers beside ours, and plots (`report`).
"""
