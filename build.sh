#!/usr/bin/env bash
# Set up a fresh machine and run torch_acc.
#
#   ./build.sh               set up, build, run the demo (python -m torch_acc.demo)
#   ./build.sh test          set up, build, run every test (each file in its own process)
#   ./build.sh patch [SRC]   apply patches/ to a PyTorch checkout (default: the reference base)
#
# TORCH_VERSION chooses the torch wheel (default 2.13.0); each version gets its own
# virtual environment (.venv for the default, .venv-<version> otherwise) and build folder.
set -euo pipefail
cd "$(dirname "$0")"

TORCH_VERSION=${TORCH_VERSION:-2.13.0}
if [[ $TORCH_VERSION == 2.13.0 ]]; then VENV=.venv; else VENV=.venv-$TORCH_VERSION; fi
PY=$VENV/bin/python
REQUIREMENTS=(
  "torch==$TORCH_VERSION" numpy ml_dtypes scipy tqdm matplotlib pybind11 ninja cmake pytest expecttest ruff setuptools wheel
  "jax[cpu]"  # the jax backend (torch_acc[jax]), tested in CI
  clang-format==23.1.5
)

# Each line carries the time, so that a CI log shows where its time went.
log() { printf '[build.sh %s] %s\n' "$(date +%T)" "$*" >&2; }

setup_env() {
  if [[ ! -x $PY ]]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp=$VENV/.torch_acc-requirements
  if [[ ! -f $stamp || "$(cat "$stamp")" != "${REQUIREMENTS[*]}" ]]; then
    log "installing ${REQUIREMENTS[*]}"
    "$PY" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
    printf '%s' "${REQUIREMENTS[*]}" >"$stamp"
  fi
}

build() {
  # Each torch version builds into its own folders; the extension is then copied next to
  # the sources (torch_acc/_C*.so), which the editable install points at.
  log "building torch_acc._C against torch $TORCH_VERSION"
  # Without autoload: torch would import this package's entry points, whose torch_acc._C may
  # still be the build for another torch version.
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" setup.py --quiet build_ext --inplace \
    --build-lib "build/lib-torch$TORCH_VERSION" --build-temp "build/temp-torch$TORCH_VERSION"
  # The compile commands of this build, for clangd and clang-tidy: the core's headers resolve
  # through build/include (torch/csrc/acc -> csrc/acc, see setup.py).
  "$VENV/bin/ninja" -C "build/temp-torch$TORCH_VERSION" -t compdb >compile_commands.json
  if ! "$PY" -m pip show --quiet torch_acc >/dev/null 2>&1; then
    TORCH_ACC_SKIP_EXTENSION=1 "$PY" -m pip install --quiet --disable-pip-version-check \
      --no-build-isolation --no-deps -e .
  fi
}

ensure_compile_deps() {
  # For the series' compile check: torch/csrc/Module.cpp includes <fmt/core.h>, which the
  # torch wheel does not ship; the series' c10 build uses fmt, and its c10 tests googletest.
  if ! dpkg -s libfmt-dev libgtest-dev >/dev/null 2>&1; then
    log "installing libfmt-dev and libgtest-dev (for the series' compile check)"
    apt-get update -qq && apt-get install -y -qq libfmt-dev libgtest-dev >/dev/null
  fi
}

case "${1:-main}" in
  main)
    setup_env
    build
    "$PY" -m torch_acc.demo
    ;;
  test)
    setup_env
    build
    "$PY" -m ruff check torch_acc test tools bench setup.py
    "$VENV/bin/clang-format" --dry-run --Werror csrc/acc/*.cpp csrc/acc/*.h csrc/standalone.cpp \
      test/cpp/*.cpp
    log "running the tests on torch $TORCH_VERSION"
    "$PY" tools/run_tests.py test
    if [[ $TORCH_VERSION == 2.13.0 ]]; then
      # The series is checked once, against its own torch 2.6.0 environment.
      ensure_compile_deps
      log "checking the patch series"
      "$PY" tools/check_series.py
    fi
    log "done with torch $TORCH_VERSION"
    ;;
  patch)
    setup_env
    shift
    "$PY" tools/apply_series.py "$@"
    ;;
  *)
    echo "usage: $0 [main|test|patch [PYTORCH_SRC]]" >&2
    exit 2
    ;;
esac
