"""Do workers help a loader over pre-tokenized Hugging Face rows?  The
measurement behind LL201's silence there (rules/LL201.md).

    pip install datasets transformers
    python benchmarks/pretokenized.py                 # both shapes, 0, 1, 2 workers side by side
    loadlint verify benchmarks/pretokenized.py -- classification   # verify's own verdict

Two shapes, built offline (a word-level tokenizer made on the spot, no
download): sequence classification (MRPC's 3,668 rows of 10 to 128 tokens,
``DataCollatorWithPadding``, batch 8 as in Hugging Face's course) and causal
LM (2,000 blocks of 512 tokens, ``DataCollatorForLanguageModeling(mlm=False)``).
Each loader runs two epochs of 200 steady batches after 5 of warm-up; the
median time per batch is printed with its ratio to 0 workers.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from datasets import Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from torch.utils.data import DataLoader
from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding, PreTrainedTokenizerFast

VOCAB = {"[PAD]": 0, "[UNK]": 1, **{f"w{i}": i + 2 for i in range(28994)}}


def build(shape: str) -> tuple[Dataset, object]:
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(VOCAB, unk_token="[UNK]")), pad_token="[PAD]", unk_token="[UNK]"
    )
    rng = random.Random(0)
    if shape == "classification":
        lengths = [min(128, max(10, int(rng.gauss(50, 20)))) for _ in range(3668)]
        rows = {"input_ids": [[rng.randrange(2, 28996) for _ in range(n)] for n in lengths],
                "token_type_ids": [[0] * n for n in lengths], "attention_mask": [[1] * n for n in lengths],
                "labels": [rng.randrange(2) for _ in lengths]}
        collator: object = DataCollatorWithPadding(tokenizer)
    else:
        rows = {"input_ids": [[rng.randrange(2, 28996) for _ in range(512)] for _ in range(2000)],
                "attention_mask": [[1] * 512 for _ in range(2000)]}
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    tokenized = Dataset.from_dict(rows)
    tokenized.set_format("torch")
    return tokenized, collator


def ms_per_batch(dataset: Dataset, collator: object, workers: int) -> float:
    loader = DataLoader(dataset, shuffle=True, batch_size=8, collate_fn=collator, num_workers=workers,  # type: ignore[arg-type]
                        persistent_workers=workers > 0)
    times = []
    for _ in range(2):
        batches = iter(loader)
        for _ in range(5):
            next(batches)
        start, n = time.perf_counter(), 0
        for _ in batches:
            n += 1
            if n == 200:
                break
        times.append((time.perf_counter() - start) / n * 1000)
    return statistics.median(times)


SHAPE = sys.argv[1] if len(sys.argv) > 1 else None
if SHAPE is not None:
    # Under `loadlint verify`: the loader as a training script builds it.
    tokenized_datasets, collate = build(SHAPE)
    train_dataloader = DataLoader(tokenized_datasets, shuffle=True, batch_size=8, collate_fn=collate)  # type: ignore[arg-type]

if __name__ == "__main__" and SHAPE is None:
    for shape in ("classification", "causal"):
        dataset, collator = build(shape)
        base = ms_per_batch(dataset, collator, 0)
        cells = [f"0 workers {base:.2f} ms"]
        for workers in (1, 2):
            ms = ms_per_batch(dataset, collator, workers)
            cells.append(f"{workers} workers {ms:.2f} ms ({base / ms:.2f}x)")
        print(f"{shape:>14}: " + ", ".join(cells) + " per batch of 8")
