"""The paper's tasks as library code: each takes settings, never flags.

Every task module exposes one `TASK` implementing `tasks.contract.Task`:
`prepare` checks the settings and resolves the model's files by the task's
rule (`tasks.model_files`), `run` reads the data, builds the model, trains,
scores and writes the outputs the task's settings ask for, and returns a
`TaskResult`. `tasks.contract.run_task` does both in order. The fine-tuning
tasks (classification, squad, tagging) implement both once, in
`tasks.driver`, and give only hooks.
"""
