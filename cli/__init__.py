"""The command-line edge: absl flags turned into configs, the entry point, exit codes.

Only the runner scripts import this package; library code takes its
settings as dataclasses and never reads flags.
"""
