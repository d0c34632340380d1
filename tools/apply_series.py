r"""Apply ``patches/`` to a PyTorch checkout with ``git am``: ``./build.sh patch [SRC]``.

With no argument the series goes onto a fresh clone of the reference base
(``.cache/pytorch-v2.6.0-patched``). On failure it names the patch and the hunk that failed
and leaves the checkout as it was (``git am --abort``).
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_series import apply_series, CheckFailed  # noqa: E402
from pytorch_source import ensure_base  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, help="a PyTorch git checkout")
    args = parser.parse_args()
    if args.src is None:
        tree = ROOT / ".cache" / "pytorch-v2.6.0-patched"
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(
            ["git", "clone", "--quiet", str(ensure_base(ROOT / ".cache")), str(tree)], check=True
        )
    else:
        tree = args.src.resolve()
        if not (tree / ".git").exists():
            print(f"error: {tree} is not a git checkout", file=sys.stderr)
            return 2
    try:
        apply_series(tree, ROOT / "patches")
    except CheckFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"applied {len((ROOT / 'patches' / 'series').read_text().split())} patches to {tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
