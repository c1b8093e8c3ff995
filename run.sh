#!/usr/bin/env bash
# irscope's one entry point on a fresh Debian machine with Python 3.11:
#   ./run.sh serve [--host H] [--port P] [...]   set everything up, then start the server
#   ./run.sh worker [--queues Q] [...]            set everything up, then start a worker of the worker tier
#   ./run.sh test  [pytest args]                 set everything up, then run the whole test suite
# Set-up is idempotent and quick when nothing changed: Debian packages (bubblewrap, graphviz,
# chromium for the browser tests, redis-server and postgresql for the worker tier) and the sandbox
# user when run as root, ./.venv with the pinned
# packages of requirements.lock, and irscope itself.
set -euo pipefail
cd "$(dirname "$0")"

need_debs=()
command -v bwrap >/dev/null 2>&1 || need_debs+=(bubblewrap)
command -v dot >/dev/null 2>&1 || need_debs+=(graphviz)
# The browser tests drive Debian's Chromium (Playwright's own browser download is not used).
[ -x /usr/bin/chromium ] || need_debs+=(chromium)
# The worker tier's broker and shared store (README, "Scale out"); its tests start their own.
command -v redis-server >/dev/null 2>&1 || need_debs+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_debs+=(postgresql)
# The jobs' seccomp filter is built with libseccomp (service/seccomp.py).
compgen -G "/usr/lib/*/libseccomp.so.2" >/dev/null || need_debs+=(libseccomp2)
if [ ${#need_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "run.sh: installing Debian packages: ${need_debs[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_debs[@]}" >/dev/null
  else
    echo "run.sh: missing Debian packages: ${need_debs[*]}; install them with: sudo apt-get install ${need_debs[*]}" >&2
    echo "run.sh: (without bubblewrap the server refuses to run user code unless started with --insecure-no-sandbox;" >&2
    echo "run.sh:  without chromium the browser tests are skipped; without redis-server and postgresql, the worker tier's)" >&2
  fi
fi

# Every job runs as this unprivileged user when the server runs as root (setting sandbox_user).
sandbox_user=${IRSCOPE_SANDBOX_USER:-irscope-sandbox}
if [ "$(id -u)" = 0 ] && [[ "$sandbox_user" != *:* ]] && ! id "$sandbox_user" >/dev/null 2>&1; then
  echo "run.sh: creating the unprivileged user $sandbox_user that jobs run as" >&2
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$sandbox_user"
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
  echo "run.sh: irscope needs Python 3.11 (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.irscope-installed
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "run.sh: installing Python packages into ./.venv (the first time takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
  echo "$want" > "$stamp"
fi

# The toolchains the repository pins (toolchain_locks/NAME.txt: other releases of torch, Triton and
# JAX that jobs may choose, docs/toolchains.md), each in its own environment in ./toolchains/NAME
# (setting toolchains_dir). Their warm-up runs on their first job; the default toolchain's below.
tc_dir=${IRSCOPE_TOOLCHAINS_DIR:-toolchains}
tc_want=$(cat toolchain_locks/*.txt 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ "$(cat "$tc_dir/.irscope-installed" 2>/dev/null)" != "$tc_want" ]; then
  locked=$(find toolchain_locks -name '*.txt' -printf '%f\n' 2>/dev/null | sed 's/\.txt$//' | sort)
  if [ -n "$locked" ]; then
    echo "run.sh: installing the pinned toolchains into ./$tc_dir: $(echo $locked)" >&2
    # shellcheck disable=SC2086
    .venv/bin/irscope toolchains add $locked --no-warm >&2
  fi
  mkdir -p "$tc_dir" && echo "$tc_want" > "$tc_dir/.irscope-installed"
fi

cmd=${1:-}
shift || true
# The default toolchain's trusted warm-up for the server's data directory (the CPU probes and the
# precompiled header every PyTorch job is seeded with): the first job after `./run.sh serve` is
# warm. Quick when it was built before; a machine that cannot sandbox jobs says so and goes on.
if [ "$cmd" = serve ] || [ "$cmd" = setup ]; then
  .venv/bin/irscope toolchains warm default >&2 || echo "run.sh: the warm-up did not run; the first job will run it" >&2
fi
case "$cmd" in
  serve) exec .venv/bin/irscope serve "$@" ;;
  worker) exec .venv/bin/irscope worker "$@" ;;
  # The linter first (pyproject.toml's [tool.ruff]): a tree that is not clean runs no test.
  test) .venv/bin/ruff check . && exec .venv/bin/python -m pytest -q "$@" ;;
  setup) ;;
  *) echo "usage: ./run.sh serve [--host H] [--port P] | ./run.sh worker [--queues Q] | ./run.sh test [pytest args]" >&2; exit 2 ;;
esac
