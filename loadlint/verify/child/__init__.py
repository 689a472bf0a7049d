"""The side of verify that runs inside the user's process.

It patches ``torch.utils.data.DataLoader.__init__`` (subclasses inherit the
patch, or reach it through ``super().__init__``), runs the user's script the
way ``python script.py`` would, and records every construction with its
call site. What happens next depends on the mode the parent asked for:

``bench``
    stop the script once the target loader is built, build the candidate
    configurations, check that each yields the same data, then time fresh
    loaders per candidate (:mod:`.bench`, :mod:`.tune`).
``insitu``
    inject one candidate configuration into the target call, let the
    user's own loop run for warm-up + N steps, time ``next()`` and stop
    (:mod:`.insitu`).
``ddp``
    inside one rank of ``torch.distributed.run``: record the sampler's index
    list at every ``iter()`` of the target loader and every ``set_epoch``
    call, feeding the loop a few real batches per epoch only (:mod:`.ddp`).
``ddp_sim``
    capture without a process group and simulate each rank's
    ``DistributedSampler``.

The parent reads one JSON result file; a progress file that the child
rewrites after every step is the parent's heartbeat for hang detection.
One :class:`~.state.State` object, created by :func:`.main.main`, carries
what the modes share; nothing here keeps module-level state.
"""
