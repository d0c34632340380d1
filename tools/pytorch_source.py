r"""Obtain the reference base of the patch series: pristine PyTorch v2.6.0.

The source is Debian's source package ``pytorch`` ``2.6.0+dfsg-7`` (suite trixie), fetched
with ``apt-get source --download-only`` under an apt configuration of its own (a source list,
package lists and cache inside the cache folder), so the machine's apt setup is unchanged. The
mirror is the one the machine's apt configuration uses for Debian (see ``debian_mirror``): no
host name is written here.
Only the upstream ("orig") tarball is used: Debian's patches are not applied, so the base is
upstream v2.6.0 less the files Debian removed (DFSG). The tarball's size and sha256 are
checked against fixed values. It is unpacked, its top-level folder stripped, into
``<cache>/pytorch-v2.6.0/`` and committed as the only commit of a git repository, with fixed
author, committer and dates, so the commit hash is the same on every machine.

The tarball stays in ``<cache>/debian-src/``: making the base again does not download it. A
base that is already there, at the expected commit, is left as it is.

Usage::

    python tools/pytorch_source.py [--cache DIR]   # last line on stdout: the base's path

Other tools (with ``tools/`` on ``sys.path``)::

    from pytorch_source import ensure_base
    base = ensure_base(Path(".cache"))
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / ".cache"

#: The source package, and its suite. The mirror comes from the machine's apt configuration.
PACKAGE = "pytorch=2.6.0+dfsg-7"
SUITE = "trixie"
APT_ETC = Path("/etc/apt")
#: Suite names of Debian's main archive (codenames and aliases); an apt source with one of
#: them is a Debian mirror, which also serves trixie's sources.
DEBIAN_SUITES = frozenset(
    "buster bullseye bookworm trixie forky duke sid "
    "oldoldstable oldstable stable testing unstable".split()
)
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")

#: The one file of the source package that is used, and what it must be.
TARBALL = "pytorch_2.6.0+dfsg.orig.tar.xz"
TARBALL_TOP = "pytorch-v2.6.0"
SIZE = 27_212_640
SHA256 = "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"

#: The base checkout and its one commit.
BASE_DIR = "pytorch-v2.6.0"
BASE_COMMIT = "83e0b6245d40e6a8cb7c531bcb7f53128418d1ef"
COMMIT_MESSAGE = "PyTorch v2.6.0 (Debian pytorch 2.6.0+dfsg orig tarball)"
COMMIT_NAME = "torch_acc base"
COMMIT_EMAIL = "base@torch-acc.invalid"
COMMIT_DATE = "2025-01-29T00:00:00+00:00"

#: What apt says when it cannot check the Release file's signature.
SIGNATURE_ERRORS = ("NO_PUBKEY", "EXPKEYSIG", "is not signed", "couldn't be verified")


class SourceError(RuntimeError):
    """The base could not be obtained; the message names the step that failed."""


def log(message: str) -> None:
    """Report progress on stderr."""
    print(f"pytorch_source: {message}", file=sys.stderr, flush=True)


def _one_line_sources(text: str) -> list[tuple[list[str], list[str]]]:
    """The (URIs, suites) of each entry of a one-line ``sources.list`` text."""
    entries = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] not in ("deb", "deb-src"):
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2:
            entries.append(([words[0]], [words[1]]))
    return entries


def _deb822_sources(text: str) -> list[tuple[list[str], list[str]]]:
    """The (URIs, suites) of each enabled stanza of a deb822 ``.sources`` text."""
    entries = []
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key is not None:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if not {"deb", "deb-src"} & set(fields.get("types", "").split()):
            continue
        entries.append((fields.get("uris", "").split(), fields.get("suites", "").split()))
    return entries


def debian_mirror(apt_etc: Path = APT_ETC) -> str:
    """The URI of the Debian archive in the apt configuration under ``apt_etc``.

    Reads ``sources.list`` (one-line entries) and ``sources.list.d/*.list`` and ``*.sources``
    (deb822 stanzas), in apt's order, and returns the first URI of the first enabled entry
    whose suites include a Debian release (``DEBIAN_SUITES``): that mirror also serves
    ``SUITE``'s sources. Raises ``SourceError`` when there is none.
    """
    files = [apt_etc / "sources.list"]
    parts = apt_etc / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        parse = _deb822_sources if path.suffix == ".sources" else _one_line_sources
        for uris, suites in parse(text):
            if uris and DEBIAN_SUITES & set(suites):
                return uris[0].rstrip("/")
    raise SourceError(
        f"no Debian archive in the apt configuration ({apt_etc}/sources.list, "
        f"{apt_etc}/sources.list.d/*.list and *.sources): add the machine's Debian source "
        f"(an entry for a Debian release such as {SUITE}) so that the source package can be "
        "fetched"
    )


def apt_get(apt_dir: Path, source_option: str, *args: str, cwd: Path) -> None:
    """Run ``apt-get`` with the private configuration in ``apt_dir`` and a deb-src line.

    ``source_option`` is the bracketed option of the deb-src line (which keyring to trust).
    """
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    sources = apt_dir / "sources.list"
    mirror = debian_mirror()
    sources.write_text(f"deb-src [{source_option}] {mirror} {SUITE} main\n")
    command = [
        "apt-get",
        "-q",
        f"-oDir::Etc::SourceList={sources}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt_dir / 'lists'}",
        f"-oDir::Cache={apt_dir / 'cache'}",
        "-oAPT::Get::Only-Source=true",
        *args,
    ]
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise SourceError("apt-get is not installed; it fetches the Debian source package") from e
    if proc.returncode != 0:
        raise SourceError(
            f"`apt-get {' '.join(args)}` failed (exit {proc.returncode}). The Debian package "
            f"mirror ({mirror}, suite {SUITE}) must be reachable.\n{proc.stderr.strip()}"
        )


def download(src_dir: Path) -> None:
    """Download the source package into ``src_dir`` through the private apt configuration.

    The trixie Release file is checked with the machine's Debian archive keyring. Where that
    keyring cannot check it, the source list trusts the mirror instead; the tarball is then
    vouched for only by its pinned sha256, which ``fetch_tarball`` checks in either case.
    """
    apt_dir = src_dir / "apt"
    option = f"signed-by={KEYRING}"
    log(f"apt-get update ({SUITE} sources, private lists in {apt_dir})")
    try:
        apt_get(apt_dir, option, "update", "--error-on=any", cwd=src_dir)
    except SourceError as e:
        if not any(marker in str(e) for marker in SIGNATURE_ERRORS):
            raise
        log(f"{KEYRING} cannot check the {SUITE} Release file; relying on the pinned sha256")
        option = "trusted=yes"
        apt_get(apt_dir, option, "update", "--error-on=any", cwd=src_dir)
    log(f"apt-get source --download-only {PACKAGE}")
    apt_get(apt_dir, option, "source", "--download-only", PACKAGE, cwd=src_dir)


def sha256(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_tarball(cache_dir: Path) -> Path:
    """The checked orig tarball in ``cache_dir/debian-src``, downloaded there if missing."""
    src_dir = cache_dir / "debian-src"
    tarball = src_dir / TARBALL
    if not tarball.is_file():
        src_dir.mkdir(parents=True, exist_ok=True)
        download(src_dir)
        if not tarball.is_file():
            raise SourceError(f"apt-get source did not leave {TARBALL} in {src_dir}")
    size, digest = tarball.stat().st_size, sha256(tarball)
    if (size, digest) != (SIZE, SHA256):
        raise SourceError(
            f"{tarball} is {size} bytes with sha256 {digest}; expected {SIZE} bytes with "
            f"sha256 {SHA256}. Delete it to download it again."
        )
    return tarball


def strip_top(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Tar extraction filter: drop the top-level folder from each path, then apply "tar"."""
    top, _, rest = member.name.partition("/")
    if top != TARBALL_TOP:
        raise SourceError(f"{TARBALL}: {member.name!r} is outside {TARBALL_TOP}/")
    if not rest:
        return None
    linkname = member.linkname
    if member.islnk():
        linkname = linkname.partition("/")[2]
    return tarfile.tar_filter(member.replace(name=rest, linkname=linkname), dest)


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` apart from the user's and system's git setup; return its stdout."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_DATE=COMMIT_DATE,
        GIT_COMMITTER_DATE=COMMIT_DATE,
    )
    command = [
        "git",
        "-c",
        f"user.name={COMMIT_NAME}",
        "-c",
        f"user.email={COMMIT_EMAIL}",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgSign=false",
        "-C",
        str(repo),
        *args,
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SourceError(f"`git {' '.join(args)}` in {repo} failed:\n{proc.stderr.strip()}")
    return proc.stdout.strip()


def ensure_base(cache_dir: Path) -> Path:
    """The base checkout in ``cache_dir``: a git repository whose one commit is v2.6.0.

    Made on first use (downloading the tarball unless ``cache_dir/debian-src`` has it);
    afterwards only checked to be at ``BASE_COMMIT``.
    """
    cache_dir = cache_dir.resolve()
    base = cache_dir / BASE_DIR
    if (base / ".git").exists():
        head = git(base, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if head != BASE_COMMIT:
            raise SourceError(f"{base} is at {head}, not the base {BASE_COMMIT}; delete it")
        return base
    tarball = fetch_tarball(cache_dir)
    partial = cache_dir / f"{BASE_DIR}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    start = time.monotonic()
    log(f"unpacking {TARBALL} into {partial}")
    with tarfile.open(tarball) as tar:
        tar.extractall(partial, filter=strip_top)
    log(f"unpacked in {time.monotonic() - start:.1f} s; committing")
    start = time.monotonic()
    git(partial, "init", "--quiet")
    git(partial, "config", "core.autocrlf", "false")
    git(partial, "add", "-A", "-f")
    git(partial, "commit", "--quiet", "--no-verify", "-m", COMMIT_MESSAGE)
    head = git(partial, "rev-parse", "HEAD")
    if head != BASE_COMMIT:
        raise SourceError(
            f"the base committed in {partial} is {head}, not {BASE_COMMIT}: "
            "the unpacked tree differs from the expected one"
        )
    log(f"committed {head} in {time.monotonic() - start:.1f} s")
    partial.rename(base)
    return base


def main() -> int:
    """Command line: make or check the base, print its path; exit 2 when that fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help=f"cache folder (default: {DEFAULT_CACHE})"
    )
    args = parser.parse_args()
    try:
        base = ensure_base(args.cache)
    except SourceError as e:
        print(f"pytorch_source: error: {e}", file=sys.stderr)
        return 2
    print(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
