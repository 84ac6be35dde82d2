"""The paper's tasks as library code: each takes configs, never flags.

Every task module offers the same few steps, so a runner, a notebook or an
experiment driver composes them the same way: read its data, build its
model, the loss, score predictions, write the outputs; and `run`, which
does all of them in order for the actions asked for.
"""
