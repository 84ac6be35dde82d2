"""Pre-trains BERT (masked LM + next sentence) or one of the paper's ablations.

Flags keep the original `run_pretraining.py` names. Objectives:
`mlm_nsp` (the paper), `mlm` (Table 5's "No NSP"), `ltr` (a causal encoder
predicting every next token: the left-to-right "LTR & No NSP" model).

The paper's two phases (Appendix A.2) are two runs: phase 1 at
`--max_seq_length=128`, then phase 2 at 512 on records written at 512 with
`--init_checkpoint=<phase 1 output_dir>`. Position embeddings are sized by
`max_position_embeddings` (512) from the start, so phase 2 loads every
weight of phase 1; its optimizer state and schedule start afresh.

A killed run restarts from the newest checkpoint in `--output_dir` (model,
optimizer, step) and continues with the batch it would have read next.
Outputs: checkpoints, `eval_results.txt`, `bert_config.json`, `vocab.txt`
(with `--vocab_file`), TensorBoard logs, and `export/bert_model.ckpt` with
Google's variable names for the original scripts.
"""

from __future__ import annotations

from absl import flags

from cli import runner_flags
from core import program
from tasks import pretraining

FLAGS = flags.FLAGS
REQUIRED = ("input_file", "output_dir")  # the config too, from a flag or the checkpoint's folder


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Called only when the file runs as a script, so that importing it (tests,
    notebooks) registers nothing in absl's global registry, where another
    runner's flags of the same names may already be.
    """
    runner_flags.define_pretraining_flags(flag_values)
    flags.adopt_module_key_flags(runner_flags, flag_values)  # all of them listed by --help


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    runner_flags.run_task(values, pretraining.TASK, pretraining.PretrainingTask,
                          lambda task: f"pretraining:{task.objective}", REQUIRED)


def console_main() -> None:
    """The installed `bert-run-pretraining` command: the same as running this file."""
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
