"""LL013 (missing-main-guard): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_WINDOWS = HardwareProfile(usable_cpus=8, gpu_count=0, platform="windows", declared=frozenset({"cpus", "gpus", "platform"}))


VALID = [
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32, num_workers=4, multiprocessing_context="spawn")
        if __name__ == "__main__":
            for batch in loader:
                step(batch)
        """
    ),
    Valid(
        """
        from torch.utils.data import DataLoader
        def main():
            loader = DataLoader(ds, batch_size=32, num_workers=4, multiprocessing_context="spawn")
            for batch in loader:
                step(batch)
        if __name__ == "__main__":
            main()
        """
    ),
    # No workers: nothing is started.
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32, multiprocessing_context=None)
        for batch in loader:
            step(batch)
        """
    ),
    # fork does not re-import the script.
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, multiprocessing_context="fork")
        for batch in loader:
            step(batch)
        """
    ),
    # Linux with Python before 3.14 forks (the examples' profile).
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        for batch in loader:
            step(batch)
        """
    ),
    # A notebook's cells are not re-imported by workers (see LL012).
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, multiprocessing_context="spawn")
        for batch in loader:
            step(batch)
        """,
        path="example.ipynb",
    ),
    # Under the guard.
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, multiprocessing_context="spawn")
        if __name__ == "__main__":
            batch = next(iter(loader))
        """
    ),
    # Constructing a loader at module level starts nothing.
    Valid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, multiprocessing_context="spawn")
        """
    ),
]
INVALID = [
    # A definition below the loop: the workers may need it, so no fix.
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, multiprocessing_context="spawn")
        for batch in loader:
            step(batch)
        def step(batch):
            pass
        """,
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32, num_workers=4)
        for batch in loader:
            step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            loader = DataLoader(ds, batch_size=32, num_workers=4)
            for batch in loader:
                step(batch)
        """,
        message="`loader` (4 workers) is iterated at module level without `if __name__ == \"__main__\":`, and its "
        "workers may start with spawn or forkserver (the target platform is windows, where workers are spawned): "
        "every worker re-imports this script, reaches this loop again and fails (\"An attempt has been made to "
        "start a new process before the current process has finished its bootstrapping phase\"); move the loop "
        "into a function, e.g. `def main():`, and call it under `if __name__ == \"__main__\":`",
        profile=_WINDOWS,
        line=3,
    ),
    Invalid(
        """
        import torch
        from tqdm import tqdm
        NUM_WORKERS = 2
        train_loader = torch.utils.data.DataLoader(ds, num_workers=NUM_WORKERS, multiprocessing_context="spawn")
        for epoch in range(3):
            for i, (x, y) in enumerate(tqdm(train_loader)):
                step(x, y)
        """,
        fixed="""
        import torch
        from tqdm import tqdm
        if __name__ == "__main__":
            NUM_WORKERS = 2
            train_loader = torch.utils.data.DataLoader(ds, num_workers=NUM_WORKERS, multiprocessing_context="spawn")
            for epoch in range(3):
                for i, (x, y) in enumerate(tqdm(train_loader)):
                    step(x, y)
        """,
        line=6,
    ),
    # No declared platform or Python: the portable answer.
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        with open("log.txt", "w") as log:
            for batch in loader:
                log.write(str(batch))
        """,
        fixed="""
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            loader = DataLoader(ds, num_workers=2)
            with open("log.txt", "w") as log:
                for batch in loader:
                    log.write(str(batch))
        """,
        profile=HardwareProfile(usable_cpus=4, gpu_count=0),
    ),
    Invalid(
        """
        import multiprocessing
        from torch.utils.data import DataLoader
        multiprocessing.set_start_method("forkserver")
        loader = DataLoader(ds, num_workers=2)
        if __name__ != "__main__":
            pass
        for batch in loader:
            pass
        """,
        fixed="""
        import multiprocessing
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            multiprocessing.set_start_method("forkserver")
            loader = DataLoader(ds, num_workers=2)
            if __name__ != "__main__":
                pass
            for batch in loader:
                pass
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, multiprocessing_context="spawn")
        images, labels = next(iter(loader))
        """,
        fixed="""
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            loader = DataLoader(ds, num_workers=2, multiprocessing_context="spawn")
            images, labels = next(iter(loader))
        """,
        message="`next(iter(loader))` (2 workers) starts the workers at module level without `if __name__ == "
        "\"__main__\":`, and its workers may start with spawn or forkserver (`multiprocessing_context=\"spawn\"`): "
        "every worker re-imports this script, reaches this line again and fails (\"An attempt has been made to "
        "start a new process before the current process has finished its bootstrapping phase\"); move the line "
        "into a function, e.g. `def main():`, and call it under `if __name__ == \"__main__\":`",
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, multiprocessing_context="forkserver")
        batches = iter(loader)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            loader = DataLoader(ds, num_workers=2, multiprocessing_context="forkserver")
            batches = iter(loader)
        """,
        line=3,
    ),
]
