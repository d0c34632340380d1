# Owner(s): ["module: PrivateUse1"]
"""The tools behind the patch series: the Debian mirror and the generator's rules."""

import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import pytorch_source  # noqa: E402


class TestDebianMirror(TestCase):
    def _apt_etc(self, files: dict[str, str]) -> Path:
        """A fake apt configuration folder holding ``files`` (relative path -> text)."""
        root = Path(tempfile.mkdtemp(prefix="apt-etc-"))
        self.addCleanup(shutil.rmtree, root)
        (root / "sources.list.d").mkdir()
        for name, text in files.items():
            (root / name).write_text(textwrap.dedent(text))
        return root

    def test_one_line_sources_list(self):
        etc = self._apt_etc(
            {
                "sources.list": """\
                    # a comment
                    deb [arch=amd64 signed-by=/k.gpg] http://mirror.invalid/debian/ bookworm main
                    deb http://mirror.invalid/debian-security bookworm-security main
                """
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://mirror.invalid/debian")

    def test_deb822_sources(self):
        etc = self._apt_etc(
            {
                "sources.list.d/a-other.sources": """\
                    Types: deb
                    URIs: https://vendor.invalid/apt
                    Suites: nodistro
                    Components: main
                """,
                "sources.list.d/debian.sources": """\
                    Types: deb
                    # URIs: http://commented.invalid/debian
                    URIs: http://deb822.invalid/debian
                    Suites: bookworm bookworm-updates
                    Components: main

                    Types: deb
                    URIs: http://deb822.invalid/debian-security
                    Suites: bookworm-security
                    Components: main
                """,
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://deb822.invalid/debian")

    def test_disabled_and_ignored_files(self):
        etc = self._apt_etc(
            {
                "sources.list.d/debian.sources": """\
                    Enabled: no
                    Types: deb
                    URIs: http://disabled.invalid/debian
                    Suites: trixie
                    Components: main
                """,
                "sources.list.d/old.list.disabled": "deb http://ignored.invalid/debian sid main\n",
                "sources.list.d/z.list": "deb-src http://list.invalid/debian trixie main\n",
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://list.invalid/debian")

    def test_no_debian_source_is_an_error(self):
        etc = self._apt_etc(
            {"sources.list.d/vendor.sources": "Types: deb\nURIs: https://v.invalid\nSuites: x\n"}
        )
        with self.assertRaisesRegex(pytorch_source.SourceError, "no Debian archive in the apt"):
            pytorch_source.debian_mirror(etc)


if __name__ == "__main__":
    run_tests()
