"""A process that writes and promotes models into a directory store forever, printing each
version once `put` has returned: the test SIGKILLs it mid-write (python -m tests.integration.
store_writer ROOT)."""

from __future__ import annotations

import sys
from pathlib import Path

from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.store_artefacts import fitted

KEY = StoreKey("gpu", "llm-serve", "s0-llm")
PADDING = ["x" * 1000] * 4000
"""About 4 MB of metadata, so a write takes long enough to be interrupted."""


def main() -> None:
    store = DirectoryStore(Path(sys.argv[1]), keep=100)
    data = fitted()
    while True:
        champion = store.champion_version(KEY)
        version = store.put(KEY, data, {"padding": PADDING})
        print(f"stored {version}", flush=True)
        if store.promote(KEY, version, expected=champion):
            print(f"promoted {version}", flush=True)


if __name__ == "__main__":
    main()
