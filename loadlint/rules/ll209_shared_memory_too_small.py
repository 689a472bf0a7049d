from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import workers_on

GIB = 1024**3


def _size(n: int) -> str:
    return f"{n / GIB:g} GiB" if n >= GIB else f"{n // 1024**2} MiB"


class SharedMemoryTooSmall(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers when the target's `/dev/shm`
    (declared with `--target shm=...`, or this machine's with `--target
    detect`) is smaller than 1 GiB, on Linux.  Without a declared `shm` the
    rule is silent: the machine loadlint runs on is not the one that trains.

    ## Why is this bad?
    Workers hand every batch to the main process through shared memory in
    `/dev/shm`: up to `num_workers × prefetch_factor` batches at a time.
    Docker gives containers 64 MiB by default, which a few image batches
    fill; the workers then die with

    ```
    RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
    ```

    usually after the run has started, sometimes only on larger batches.

    ## Example
    ```
    docker run --gpus all image python train.py   # /dev/shm: 64 MiB
    ```

    Use instead:
    ```
    docker run --gpus all --shm-size=16g image python train.py
    docker run --gpus all --ipc=host image python train.py
    ```
    In Kubernetes, mount an `emptyDir` with `medium: Memory` at `/dev/shm`.

    ## Fix safety
    No fix is offered: the limit belongs to the container, not the code.

    ## References
    - [PyTorch README: Docker image (`--ipc=host`, `--shm-size`)](https://github.com/pytorch/pytorch#docker-image)
    - [Docker run: `--shm-size`](https://docs.docker.com/reference/cli/docker/container/run/)
    """

    code = "LL209"
    name = "shared-memory-too-small"
    category = "performance"
    summary = "workers with less than 1 GiB of `/dev/shm` (bus errors in containers)"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        calls = [call for call in ctx.calls if workers_on(call)]
        if not calls:
            return
        profile = ctx.profile
        shm = profile.shm_bytes
        # Only a declared size: this machine's says nothing about the training one.
        if "shm" not in profile.declared or shm is None or shm >= GIB or profile.platform != "linux":
            return
        for call in calls:
            message = (
                f"`num_workers={call.workers()}` with {_size(shm)} of /dev/shm (declared): workers pass batches "
                "through shared memory and die with \"Bus error\" when it fills; raise it with `docker run "
                "--shm-size=16g` or `--ipc=host`"
            )
            yield Report(call.node, message)
