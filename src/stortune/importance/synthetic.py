"""A dataset whose answer is known by construction, to check the rankings end to end.

``throughput = 100 - 7*[journal == "journal"] + 3*log2(block_kb)
+ 5*[journal == "writeback" and barrier == "off"] + noise`` (noise ~ N(0, `noise`)): the
journal mode and the block size matter on their own (PI ~ 16.2 and 11.25), the barrier only
through its interaction with the journal mode (CPI given the journal mode ~ 6.25, PI ~ 0.7),
and six null parameters of every kind (continuous, with and without zeros and negatives,
categorical, boolean, few-valued numeric) do not matter at all. Rows are random configurations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stortune.datasets import Dataset, from_frame

STRONG = ("journal", "block_kb")
INTERACTING = "barrier"
NULL = ("readahead", "skew", "queue_depth", "scheduler", "discard", "inode_size")


def additive_dataset(n_rows: int = 2000, seed: int = 0, noise: float = 1.0) -> Dataset:
    """`n_rows` random configurations of the model in the module doc; higher is better."""
    rng = np.random.default_rng(seed)
    journal = rng.choice(["ordered", "writeback", "journal"], n_rows)
    block_kb = rng.choice([1, 2, 4, 8], n_rows)
    barrier = rng.choice(["on", "off"], n_rows)
    throughput = (
        100.0
        - 7.0 * (journal == "journal")
        + 3.0 * np.log2(block_kb)
        + 5.0 * ((journal == "writeback") & (barrier == "off"))
        + rng.normal(0.0, noise, n_rows)
    )
    frame = pd.DataFrame(
        {
            "journal": journal,
            "block_kb": block_kb,
            "barrier": barrier,
            "readahead": rng.uniform(0.1, 1.0, n_rows),
            "skew": rng.uniform(-1.0, 1.0, n_rows),
            "queue_depth": rng.integers(0, 10, n_rows),
            "scheduler": rng.choice(["none", "mq-deadline", "bfq", "kyber"], n_rows),
            "discard": rng.choice([True, False], n_rows),
            "inode_size": rng.choice([128, 256, 512], n_rows),
            "throughput+": throughput,
        }
    )
    return from_frame(frame, source="synthetic")
