"""Which targets a `scaler retrain` run trains: the ScaledObjects of a file or of the cluster
whose trigger points at this scaler, each target once, and this run's shard of them (--shard,
or an Indexed Job's JOB_COMPLETION_INDEX of --shards).

Must not: fit, or read or write the model store (retrain.py does).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
from dataclasses import dataclass

from scaler.errors import ConfigError
from scaler.kube import targets as manifests
from scaler.kube.targets import Problem, Target
from scaler.store.base import StoreKey

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shard:
    """`--shard I/N`: this run trains the targets whose key hashes to I (1-based) of N."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count <= 100_000:
            raise ConfigError(
                f"--shard {self.index}/{self.count}: give I/N with 1 <= I <= N <= 100000"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, slash, count = text.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ConfigError(f"--shard {text!r}: give I/N, e.g. 1/4 (the first of four)")
        return cls(int(index), int(count))

    def holds(self, key: StoreKey) -> bool:
        """Stable across runs and machines: a hash of the key, not its place in a list."""
        bucket = int(hashlib.sha256(str(key).encode()).hexdigest()[:16], 16) % self.count
        return bucket == self.index - 1


def shard_of(text: str | None, shards: int, job_index: str | None) -> Shard:
    """--shard, else JOB_COMPLETION_INDEX (0-based) of --shards, else 1/1."""
    if text:
        return Shard.parse(text)
    if job_index is None:
        if shards > 1:
            # Every pod of a plain Job would train the whole fleet, each as shard 1/1.
            raise ConfigError(
                f"--shards {shards} (or SCALER_SHARDS) is set but neither --shard nor "
                "JOB_COMPLETION_INDEX says which shard this is: run it as an Indexed Job "
                "(deploy/retrain/sharded), or give --shard I/N"
            )
        return Shard(1, 1)
    if not job_index.isdigit() or shards < 1:
        raise ConfigError(
            f"JOB_COMPLETION_INDEX={job_index!r} is set but --shards is {shards}: set --shards "
            "(or SCALER_SHARDS) to the Indexed Job's completions"
        )
    if int(job_index) >= shards:
        raise ConfigError(
            f"JOB_COMPLETION_INDEX={job_index} is past --shards {shards} (indexes 0-{shards - 1}): "
            "set --shards (or SCALER_SHARDS) to the Indexed Job's completions"
        )
    return Shard(int(job_index) + 1, shards)


def read_targets(args: argparse.Namespace) -> tuple[list[Target], list[Problem]]:
    args.scaler_address = manifests.scaler_address(args.scaler_address)
    if args.targets is not None:
        objects = manifests.read_file(args.targets)
        if not objects:
            raise ConfigError(f"{args.targets}: no ScaledObject in it")
        found, problems = manifests.from_objects(objects, scaler_address=args.scaler_address)
        if not found and not problems:
            why = manifests.nothing_to_serve(len(objects), args.scaler_address)
            # a wrong file or address would otherwise train nothing and exit 0
            raise ConfigError(
                f"{args.targets}: {why}; give the ScaledObjects whose trigger points at this scaler"
            )
        return found, problems
    if not args.scaler_address:
        raise ConfigError(
            "give --targets FILE, or --scaler-address to find the cluster's ScaledObjects "
            "whose trigger points at this scaler"
        )
    from scaler.kube import api
    from scaler.kube.scaledobjects import ScaledObjects

    listed, _ = ScaledObjects(api.connect(args.kubeconfig)).list(args.namespace)
    return manifests.from_objects(listed, scaler_address=args.scaler_address)


def unique(found: list[Target]) -> list[Target]:
    """The first of the triggers that are one target (the same ScaledObject and the same
    metadata: one store key), each other one logged. Trained twice side by side, the second
    fit lost the promotion race to the first and stored a version nothing serves."""
    first: dict[StoreKey, Target] = {}
    for target in found:
        kept = first.setdefault(target.key, target)
        if kept is not target:
            logger.warning(
                "%s: trigger %d is the same target as trigger %d (the same metadata); trained once",
                target.spec.label,
                target.trigger,
                kept.trigger,
            )
    return list(first.values())
