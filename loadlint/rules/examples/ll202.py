"""LL202 (missing-pin-memory): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    # No accelerator in sight.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        for x in loader:
            print(x.sum())
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.cuda(non_blocking=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=args.pin)
        model.cuda()
    """),
    # The dataset already returns CUDA tensors.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class OnGpu(Dataset):
            def __getitem__(self, i):
                return torch.ones(3).cuda()
            def __len__(self):
                return 10
        loader = DataLoader(OnGpu(), num_workers=0)
        model.cuda()
    """),
    # A device that is explicitly the CPU.
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cpu")
        loader = DataLoader(ds, num_workers=2)
        for x in loader:
            x = x.to(device)
    """),
    # A `TensorDataset` of CUDA tensors (NVIDIA's LAMB example): pinning them raises.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        inputs = torch.from_numpy(x).cuda().half()
        targets = torch.from_numpy(y).cuda().long()
        loader = DataLoader(TensorDataset(inputs, targets), batch_size=64)
        for x, y in loader:
            model(x)
    """),
    # A `collate_fn` that moves the batch to the GPU.
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        def to_gpu(samples):
            return torch.stack(samples).cuda()
        loader = DataLoader(ds, batch_size=64, num_workers=0, collate_fn=to_gpu)
        for x in loader:
            model(x)
    """),
    # A factory handed its collate function, whose module builds one on the GPU (DLRM).
    Valid("""
        import functools
        import torch
        from torch.utils.data import DataLoader
        class Factory:
            def create_collate_fn(self):
                stream = torch.cuda.current_stream()
                return functools.partial(collate_split_tensors, device=self.device, orig_stream=stream)
            def create_data_loader(self, dataset, collate_fn=None, sampler=None):
                return DataLoader(dataset, collate_fn=collate_fn, sampler=sampler, batch_size=None, pin_memory=False)
    """),
    # A dataset held on `cuda:0`.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Synthetic(Dataset):
            def __init__(self, n):
                self.x = torch.rand(n, 16).to("cuda:0")
            def __getitem__(self, i):
                return self.x[i]
            def __len__(self):
                return len(self.x)
        loader = DataLoader(Synthetic(1024), batch_size=64)
        for x in loader:
            model(x)
    """),
    # MONAI transforms that run on the GPU inside the dataset.
    Valid("""
        import torch
        from monai.data import ArrayDataset
        from monai.transforms import Compose, LoadImage, RandAffine
        affine = RandAffine(prob=1.0, spatial_size=(64, 64, 64), device=torch.device("cuda:0"))
        imtrans = Compose([LoadImage(image_only=True), affine])
        ds = ArrayDataset(images, imtrans, segs, imtrans)
        loader = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=0)
        for im, seg in loader:
            model(im.cuda())
    """),
    # One batch peeked at, its shapes printed.
    Valid("""
        import torch
        from monai.utils import first
        from torch.utils.data import DataLoader
        check_loader = DataLoader(check_ds, batch_size=2, num_workers=4)
        check_data = first(check_loader)
        print(check_data["img"].shape, check_data["seg"].shape)
        model = Net().to(torch.device("cuda"))
    """),
    # A loop that only times reading one batch.
    Valid("""
        import time
        import torch
        from torch.utils.data import DataLoader
        def bench(ds):
            loader = DataLoader(ds, batch_size=64, num_workers=8)
            for _ in range(10):
                start = time.perf_counter()
                next(iter(loader))
                print(time.perf_counter() - start)
        torch.cuda.synchronize()
    """),
    # Batches of indices into tensors already on the GPU (PyG's examples).
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        train_idx = data.train_mask.nonzero(as_tuple=False).view(-1)
        train_loader = DataLoader(train_idx, batch_size=16 * 1024, shuffle=True)
        edges = DataLoader(range(edge_index.size(1)), batch_size=8192, shuffle=True)
        for idx in train_loader:
            xs = [x[idx].to(device) for x in xs]
    """),
    # Batches sent back to the host (DLRM's dataset writer).
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        torch.cuda.set_device(0)
        for numerical, label in DataLoader(dataset, 1024):
            out.write(numerical.to(torch.float16).cpu().numpy().tobytes())
            labels.write(label.to(torch.bool).cpu().numpy().tobytes())
    """),
    # Batches of strings: pinning leaves them as they are.
    Valid("""
        from torch.utils.data import DataLoader
        prompts = ["a photo of a dog", "a photo of a cat"]
        loader = DataLoader(prompts, batch_size=2)
        for batch in loader:
            pipe(batch).images[0].cuda()
    """),
    # A validation loader unpinned on purpose while the training loader pins.
    Valid("""
        from torch.utils.data import DataLoader
        train = DataLoader(train_ds, batch_size=64, num_workers=4, pin_memory=True)
        val = DataLoader(val_ds, batch_size=64, num_workers=4, pin_memory=False)
        for x, y in val:
            x = x.cuda()
    """),
        # No accelerator in sight for the Trainer's loader.
    Valid("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_pin_memory=False)
    """),
]
INVALID = [
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        loader = DataLoader(ds, num_workers=2)
        for x in loader:
            x = x.to(device)
        """,
        message="`pin_memory` is not set but batches go to the GPU: copies from pageable memory block and cannot "
        "overlap compute; set `pin_memory=True`",
        fixed="""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(device)
        """,
        line=4,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=False)
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
        """,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        device = torch.accelerator.current_accelerator()
        loader = DataLoader(ds, num_workers=2)
        model.to(device)
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader
        device = torch.accelerator.current_accelerator()
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        model.to(device)
        """,
    ),
    Invalid(
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group(backend="nccl")
        loader = DataLoader(ds, num_workers=2, sampler=s)
        """,
        fixed="""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group(backend="nccl")
        loader = DataLoader(ds, num_workers=2, sampler=s, pin_memory=True)
        """,
    ),
    Invalid(
        """
        import argparse
        import torch
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda")
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=2)
        for x in loader:
            x = x.to(torch.device(args.device))
        """,
        fixed="""
        import argparse
        import torch
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda")
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(torch.device(args.device))
        """,
    ),
    Invalid(
        """
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_pin_memory=False)
        model.cuda()
        """,
        message="`dataloader_pin_memory=False` but the Trainer moves batches to the GPU: copies from pageable "
        "memory block and cannot overlap compute; set `dataloader_pin_memory=True`",
        fixed="""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_pin_memory=True)
        model.cuda()
        """,
    ),
]
