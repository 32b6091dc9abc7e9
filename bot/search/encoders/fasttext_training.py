"""Training the compact fastText model, in a child process so the same seed gives the same model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.errors import SearchBackendError
from bot.optional import optional_import
from bot.search.background import child_nice
from bot.search.encoders.base import DENSE_HINT


@dataclass(frozen=True)
class FastTextParams:
    """How the compact fastText model is trained on the knowledge (see config.yaml retrieval.dense.fasttext)."""

    dim: int = 50
    epoch: int = 20  # the minimum; with ``target_tokens`` a small corpus gets more (see epochs_for)
    minn: int = 1
    maxn: int = 2
    bucket: int = 200_000
    ws: int = 20
    lr: float = 0.05
    min_count: int = 1
    threads: int = 1
    seed: int = 0
    subsample: float = 1e-3  # fastText's ``t``; its 1e-4 default drops most tokens of a small knowledge base
    neg: int = 3
    # Word vector = input + output vector (in-vocabulary words of a model trained here); False: input only.
    output_vectors: bool = True
    # Epochs so that training sees about this many tokens, between ``epoch`` and ``max_epoch``; 0 = ``epoch``.
    target_tokens: int = 300_000
    max_epoch: int = 1000

    def epochs_for(self, tokens: int) -> int:
        """Epochs for a corpus of ``tokens`` tokens: ceil(target_tokens / tokens), clamped to [epoch, max_epoch].

        A very small knowledge base at a fixed ``epoch`` gives training few word pairs to learn from; one of more
        than target_tokens / epoch tokens keeps ``epoch`` (BENCHMARKS.md "fastText trained on the knowledge").
        """
        if self.target_tokens <= 0:
            return self.epoch
        return max(self.epoch, min(self.max_epoch, math.ceil(self.target_tokens / max(tokens, 1))))


def _import_fasttext():
    return optional_import("fasttext", "the fastText encoder (retrieval.dense.encoder: fasttext)", DENSE_HINT)


# Training runs in a child process. fastText 0.9.3 initialises only the first tenth of its input matrix
# (DenseMatrix::uniform with thread=1) and leaves the rest as whatever the allocator returns; in a
# long-lived process that is recycled heap, so two trainings with the same seed differ (or hit NaN).
# A fresh process that takes every large block straight from the kernel (zeroed pages) is deterministic.
_TRAIN_CHILD = r"""
import ctypes, json, sys
try:
    ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD, fixed: large blocks are fresh pages
except (OSError, AttributeError):
    pass
import fasttext
from fasttext import FastText as ft
job = json.load(sys.stdin)
args = job["args"]
if job.get("nice"):  # started by an index worker: requests get the CPU first
    import os
    try:
        os.nice(job["nice"])
    except OSError:
        pass
try:
    if job["seed"] == 0:  # fastText's own default seed
        model = fasttext.train_unsupervised(**args)
    else:  # train_unsupervised() does not accept seed (0.9.3): build its arguments the way it does
        a = ft._build_args({**ft.unsupervised_default, **args, "seed": job["seed"]}, set(args) | {"seed"})
        model = ft._FastText(args=a)
        ft.fasttext.train(model.f, a)
except RuntimeError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3 if "NaN" in str(exc) else 2)
model.save_model(job["out"])
"""
NAN_EXIT = 3


def _train_skipgram(corpus: str, p: FastTextParams, out: Path) -> bool:
    """Train into ``out`` in a child process; False when fastText hit NaN (too few training pairs)."""
    args = {
        "input": corpus,
        "model": "skipgram",
        "dim": p.dim,
        "epoch": p.epoch,
        "minn": p.minn,
        "maxn": p.maxn,
        "bucket": p.bucket,
        "ws": p.ws,
        "lr": p.lr,
        "minCount": p.min_count,
        "thread": p.threads,
        "t": p.subsample,
        "neg": p.neg,
        "verbose": 0,
    }
    job = json.dumps({"args": args, "seed": p.seed, "out": str(out), "nice": child_nice()})
    done = subprocess.run([sys.executable, "-c", _TRAIN_CHILD], input=job, capture_output=True, text=True, check=False)
    if done.returncode == NAN_EXIT:
        return False
    if done.returncode != 0:
        raise SearchBackendError(f"fastText training failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return True
