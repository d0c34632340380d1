# Owner(s): ["module: PrivateUse1"]
"""The main job: the demo trains on npy and CPU and the losses agree."""

import contextlib
import io

from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import demo


class TestDemo(TestCase):
    def test_losses_match_cpu(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = demo.main(["--steps", "5"])
        self.assertEqual(rc, 0)
        rows = [line.split() for line in out.getvalue().splitlines() if line[:4].strip().isdigit()]
        self.assertEqual(len(rows), 5)
        losses = [(float(r[1]), float(r[2])) for r in rows]
        for npy_loss, cpu_loss in losses:
            self.assertEqual(npy_loss, cpu_loss, atol=1e-5, rtol=1e-5)
        # Training makes progress.
        self.assertLess(losses[-1][1], losses[0][1])


if __name__ == "__main__":
    run_tests()
