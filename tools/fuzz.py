r"""Differential fuzzer: random tensor programs on CPU and on a device, compared.

A thin command line over :mod:`torch_acc.testing.fuzz`::

    python tools/fuzz.py --device npy --seed 0 --programs 500 --out DIR

``--setup module:function`` names what makes the device exist (default: the NumPy reference
backend, ``torch_acc.backends.numpy:setup``). Each program runs in a worker process, so a crash
is a finding of kind ``crash``; each finding is minimised and written to ``DIR`` as a
reproducer script, with one JSON line in ``DIR/findings.jsonl``. The last line printed is the
campaign's figures as JSON; the exit status is 1 when anything was found.
"""

import sys

from torch_acc.testing.fuzz import main

if __name__ == "__main__":
    sys.exit(main())
