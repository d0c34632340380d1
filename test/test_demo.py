# Owner(s): ["module: PrivateUse1"]
"""The main job: the demo trains an MLP and a CNN on npy and CPU, and the losses agree."""

import contextlib
import io
import os
import tempfile
from unittest import mock

from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import demo

EPOCHS = 2


class TestDemo(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # One two-epoch run of the demo, as a user runs it (both models, with a plot).
        cls.tmp = tempfile.TemporaryDirectory()
        cls.plot = os.path.join(cls.tmp.name, "losses.png")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cls.rc = demo.main(["--epochs", str(EPOCHS), "--no-progress", "--plot", cls.plot])
        cls.output = out.getvalue()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        super().tearDownClass()

    def epoch_rows(self):
        """{model: [(npy loss, cpu loss), ...]} from the printed per-epoch tables."""
        rows, model = {}, None
        for line in self.output.splitlines():
            if line.startswith(demo.MODELS):
                model = line.split(":")[0]
                rows[model] = []
            elif model and line[:5].strip().isdigit():
                fields = line.split()
                rows[model].append((float(fields[1]), float(fields[2])))
        return rows

    def test_exit_code(self):
        self.assertEqual(self.rc, 0, self.output)
        self.assertIn("losses match cpu at every step", self.output)

    def test_epoch_losses_match_cpu(self):
        rows = self.epoch_rows()
        self.assertEqual(sorted(rows), sorted(demo.MODELS))
        for model, losses in rows.items():
            self.assertEqual(len(losses), EPOCHS, model)
            for npy_loss, cpu_loss in losses:
                self.assertEqual(npy_loss, cpu_loss, atol=1e-5, rtol=1e-4, msg=model)

    def test_step_losses_match_cpu_and_make_progress(self):
        for model in demo.MODELS:
            result = demo.train(model, "npy", EPOCHS, seed=1)
            npy_losses, cpu_losses = result.step_losses["npy"], result.step_losses["cpu"]
            self.assertEqual(len(npy_losses), EPOCHS * result.steps_per_epoch)
            self.assertEqual(npy_losses, cpu_losses, atol=demo.ATOL, rtol=demo.RTOL, msg=model)
            self.assertEqual(result.mismatches(), [])
            # Training makes progress: the last epoch's mean loss is well below the first's.
            first, last = result.epoch_losses("npy")[0], result.epoch_losses("npy")[-1]
            self.assertLess(last, 0.9 * first, model)

    def test_mismatch_fails(self):
        result = demo.Result("mlp", 1, {"npy": [1.0, 2.0], "cpu": [1.0, 2.1]}, {})
        self.assertEqual(result.mismatches(), [1])
        self.assertAlmostEqual(result.max_difference(), 0.1, places=6)

    def test_exit_code_on_mismatch(self):
        # A tolerance nothing meets: every step is a mismatch, and the exit status says so.
        out = io.StringIO()
        with mock.patch.object(demo, "ATOL", -1.0), contextlib.redirect_stdout(out):
            rc = demo.main(["--epochs", "1", "--model", "mlp", "--no-progress"])
        self.assertEqual(rc, 1)
        self.assertIn("FAILED", out.getvalue())

    def test_plot_is_png(self):
        self.assertIn(f"loss curves saved to {self.plot}", self.output)
        with open(self.plot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    run_tests()
