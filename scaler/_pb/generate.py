"""Regenerate the gRPC stubs from protos/externalscaler.proto (``make proto``).

The stubs import each other by package path, so grpc_tools output is rewritten
from ``import externalscaler_pb2`` to a relative import.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "protos"
OUT_DIR = Path(__file__).resolve().parent


def generate(out_dir: Path = OUT_DIR) -> None:
    """Write externalscaler_pb2{,_grpc}.py and the .pyi into out_dir."""
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(PROTO_DIR / "externalscaler.proto"),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on protos/externalscaler.proto")
    grpc_file = out_dir / "externalscaler_pb2_grpc.py"
    text = grpc_file.read_text()
    text = re.sub(r"^import externalscaler_pb2", "from . import externalscaler_pb2", text, flags=re.M)
    grpc_file.write_text(text)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR)
