"""The `deepinfer` console script: the C++ command shipped inside the package, run with the same arguments."""

from __future__ import annotations

import os
import sys


def binary() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "deepinfer")


def main() -> None:
    path = binary()
    if not os.access(path, os.X_OK):
        sys.exit(f"deepinfer: the command is missing from the package ({path})")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
