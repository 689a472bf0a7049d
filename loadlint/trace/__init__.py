"""``loadlint trace``: diagnose a training run's input pipeline from its
PyTorch profiler (Kineto) traces, and map it back to the DataLoader call.

It reads traces and, with ``--source``, the project's files; it runs
nothing and never imports torch.  Flow: :mod:`stream` (JSON, one event at a
time) -> :mod:`events` (the few events that matter) -> :mod:`metrics` (per
step) -> :mod:`findings` -> :mod:`source`/:mod:`link` (back to the code) ->
:mod:`report` / :mod:`plot`; :mod:`command` is the command line.
"""
