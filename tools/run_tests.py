r"""Run test files, each in its own process, and sum up the results.

Registration of a backend is process-global, so no two test files may share a process.
Each file runs under pytest in a subprocess of its own; the closing line adds up all files.

Usage::

    python tools/run_tests.py test                # every test/test_*.py
    python tools/run_tests.py test/test_guard.py  # some files
"""

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


def _files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("test_*.py")) if p.is_dir() else [p])
    return files


def _run(path: Path, junit: Path) -> dict[str, int]:
    """Run one file; return its counts (a file that ran no test counts as an error)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rs",
        f"--junitxml={junit}",
        str(path),
    ]
    proc = subprocess.run(cmd, check=False)
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    if not junit.exists():
        counts["errors"] = 1
        return counts
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests = int(suite.get("tests", 0))
    counts["failed"] = int(suite.get("failures", 0))
    counts["errors"] = int(suite.get("errors", 0))
    counts["skipped"] = int(suite.get("skipped", 0))
    counts["passed"] = tests - counts["failed"] - counts["errors"] - counts["skipped"]
    if proc.returncode not in (0, 1) or tests == 0:
        counts["errors"] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="test files or folders of test_*.py")
    args = parser.parse_args()
    files = _files(args.paths)
    if not files:
        print(f"no test files in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    total = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    bad: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            counts = _run(path, Path(tmp) / f"{i}.xml")
            for key, value in counts.items():
                total[key] += value
            if counts["failed"] or counts["errors"]:
                bad.append(str(path))
    if bad:
        print("files with failures or errors: " + ", ".join(bad))
    failed = total["failed"] + total["errors"]
    print(f"{total['passed']} passed, {failed} failed, {total['skipped']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
