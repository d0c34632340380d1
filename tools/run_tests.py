r"""Run test files, each in its own process, and sum up the results.

Registration of a backend is process-global, so no two test files may share a process.
Each file runs under pytest in a subprocess of its own, ``--jobs`` of them at a time (one
per CPU by default); a file's output is printed whole when it finishes, with its time, and
the closing lines repeat every failure (a CI log may keep only its tail) and add up all files.

Usage::

    python tools/run_tests.py test                # every test/test_*.py
    python tools/run_tests.py test/test_guard.py  # some files
    python tools/run_tests.py --jobs 1 test       # one file at a time
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_KEYS = ("passed", "failed", "skipped", "errors")
# How much of one failure's report the closing lines repeat.
_FAILURE_CHARS = 4000


def _files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("test_*.py")) if p.is_dir() else [p])
    return files


def _counts(returncode: int, junit: Path) -> dict[str, int]:
    """A file's counts from its JUnit report (a file that ran no test counts as an error)."""
    counts = dict.fromkeys(_KEYS, 0)
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
    if returncode not in (0, 1) or tests == 0:
        counts["errors"] += 1
    return counts


def _failures(junit: Path) -> list[str]:
    """The failed and erroneous tests of a JUnit report, each with the end of its report."""
    if not junit.exists():
        return []
    reports = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for outcome in (*case.findall("failure"), *case.findall("error")):
            text = outcome.text or outcome.get("message", "")
            if len(text) > _FAILURE_CHARS:
                text = "...\n" + text[-_FAILURE_CHARS:]
            name = f"{case.get('classname')}.{case.get('name')}"
            reports.append(f"--- {name} ({outcome.tag})\n{text}")
    return reports


def _run(path: Path, junit: Path, lock: threading.Lock) -> tuple[dict[str, int], list[str]]:
    """Run one file; print its output when it ends; return its counts and failures."""
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
    start = time.monotonic()
    # The fault handler from the start, not only while pytest runs: a crash at interpreter
    # exit then prints its stacks too.
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, env=env
    )
    counts = _counts(proc.returncode, junit)
    summary = ", ".join(f"{counts[k]} {k}" for k in _KEYS if counts[k])
    with lock:
        print(f"=== {path} ({time.monotonic() - start:.1f} s): {summary}", flush=True)
        print(proc.stdout, end="", flush=True)
    failures = _failures(junit)
    failed_unreported = (counts["failed"] or counts["errors"]) and not failures
    if proc.returncode not in (0, 1) or failed_unreported:
        # A crash at exit leaves a report whose tests all passed: the end of the output
        # (pytest's faulthandler writes the stacks there) says where the process died.
        failures.append(
            f"--- {path}: {_status(proc.returncode)}\n{proc.stdout[-_FAILURE_CHARS:]}"
        )
    return counts, failures


def _status(returncode: int) -> str:
    """How a test process ended, as a person reads it."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="test files or folders of test_*.py")
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="files run at once (default: the number of CPUs)",
    )
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs expects a positive number, but got {args.jobs}")
    files = _files(args.paths)
    if not files:
        print(f"no test files in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    start = time.monotonic()
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(_run, path, Path(tmp) / f"{i}.xml", lock) for i, path in enumerate(files)
        ]
        results = [f.result() for f in futures]
    total = {key: sum(counts[key] for counts, _ in results) for key in _KEYS}
    bad = [str(p) for p, (_, failures) in zip(files, results, strict=True) if failures]
    for path, (_, failures) in zip(files, results, strict=True):
        for report in failures:
            print(f"=== failure in {path}\n{report}")
    if bad:
        print("files with failures or errors: " + ", ".join(bad))
    failed = total["failed"] + total["errors"]
    print(
        f"{total['passed']} passed, {failed} failed, {total['skipped']} skipped "
        f"({len(files)} files, {args.jobs} at a time, {time.monotonic() - start:.0f} s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
