"""The paper's ablations (Tables 5-8, the training-steps figure) at small scale.

`python -m experiments --table=5 --scale=cpu` lays out a table (`tables`)
at a scale and on the data of `scales`, builds the runs its cells need
(`grid`, `cells`), shows the plan and its estimated time (`plan`), runs
every pre-training and fine-tuning as a subprocess of the project's own
command-line tools, caching each result under a hash of its settings
(`jobs`) and starting each once its inputs are ready (`schedule`), and
writes the table's results (`summary`), a markdown table with the paper's
numbers beside ours, and plots (`report`). `demo.py` runs on the same
engine, with runs that fill idle CPU time (`schedule`).
"""
