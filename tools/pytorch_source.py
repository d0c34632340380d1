r"""Obtain the reference base of the patch series: PyTorch v2.6.0.

The source is Debian's source package ``pytorch`` ``2.6.0+dfsg-7`` (suite trixie), fetched
through apt with a source list and state of its own (the machine's apt setup is unchanged).
Only the upstream tarball is used; Debian's own patches are not applied. The tarball's sha256
is checked, it is unpacked into ``.cache/pytorch-v2.6.0/`` and committed as the one commit of a
git repository, with fixed author, committer and dates, so its hash is the same everywhere.

Usage::

    python tools/pytorch_source.py [--cache DIR]   # prints the base checkout's path
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytorch=2.6.0+dfsg-7"
SOURCE_LINE = (
    "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    "http://deb.debian.org/debian trixie main\n"
)
TARBALL = "pytorch_2.6.0+dfsg.orig.tar.xz"
SHA256 = "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"
SIZE = 27_212_640
BASE_DIR = "pytorch-v2.6.0"
COMMIT_MESSAGE = "PyTorch v2.6.0 (Debian pytorch 2.6.0+dfsg orig tarball)"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "torch_acc base",
    "GIT_AUTHOR_EMAIL": "base@torch-acc.invalid",
    "GIT_COMMITTER_NAME": "torch_acc base",
    "GIT_COMMITTER_EMAIL": "base@torch-acc.invalid",
    "GIT_AUTHOR_DATE": "2025-01-29T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-29T00:00:00+00:00",
}


class SourceError(RuntimeError):
    """The base could not be obtained; the message says which step failed."""


def _log(msg: str) -> None:
    print(f"[pytorch_source] {msg}", file=sys.stderr)


def _apt(apt_dir: Path, *args: str, cwd: Path | None = None) -> None:
    (apt_dir / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt_dir / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = apt_dir / "sources.list"
    sources.write_text(SOURCE_LINE)
    options = [
        f"-o=Dir::Etc::SourceList={sources}",
        "-o=Dir::Etc::SourceParts=/dev/null",
        f"-o=Dir::State::Lists={apt_dir / 'lists'}",
        f"-o=Dir::Cache={apt_dir}",
        "-o=APT::Get::Only-Source=true",
    ]
    proc = subprocess.run(
        ["apt-get", *options, *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SourceError(
            f"apt-get {' '.join(args)} failed (exit {proc.returncode}); the Debian package "
            f"registry must be reachable:\n{proc.stderr.strip()}"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_tarball(cache_dir: Path) -> Path:
    """The verified orig tarball, downloaded once into ``cache_dir/debian-src``."""
    src = cache_dir / "debian-src"
    tarball = src / TARBALL
    if not tarball.exists():
        src.mkdir(parents=True, exist_ok=True)
        _log("downloading the Debian source package pytorch 2.6.0+dfsg-7")
        _apt(src / "apt", "update")
        _apt(src / "apt", "source", "--download-only", PACKAGE, cwd=src)
    if tarball.stat().st_size != SIZE or _sha256(tarball) != SHA256:
        raise SourceError(
            f"{tarball}: expected {SIZE} bytes with sha256 {SHA256}, but got "
            f"{tarball.stat().st_size} bytes with sha256 {_sha256(tarball)}"
        )
    return tarball


def _git(base: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(
        ["git", "-C", str(base), *args], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def ensure_base(cache_dir: Path) -> Path:
    """The pristine base checkout (a git repository with one commit), made once."""
    base = cache_dir / BASE_DIR
    if (base / ".git").exists():
        if _git(base, "log", "-1", "--format=%s") == COMMIT_MESSAGE:
            return base
        raise SourceError(f"{base} is not the pristine base; remove it to start again")
    tarball = fetch_tarball(cache_dir)
    partial = cache_dir / (BASE_DIR + ".partial")
    if partial.exists():
        subprocess.run(["rm", "-rf", str(partial)], check=True)
    partial.mkdir(parents=True)
    _log(f"unpacking {tarball.name}")
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            member.name = str(Path(*parts[1:])) if len(parts) > 1 else ""
        tar.extractall(partial, members=[m for m in tar.getmembers() if m.name], filter="tar")
    _git(partial, "init", "--quiet")
    _git(partial, "config", "core.autocrlf", "false")
    _git(partial, "add", "--all", "--force")
    _git(partial, "commit", "--quiet", "--no-verify", "-m", COMMIT_MESSAGE)
    partial.rename(base)
    return base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache")
    args = parser.parse_args()
    try:
        base = ensure_base(args.cache.resolve())
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
