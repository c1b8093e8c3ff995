"""The toolchain cache: what a language's jobs share, built once per toolchain and host by a trusted
warm-up in the same sandbox (never user code), and seeded read-only into later jobs
(compiler/pytorch/toolchain_cache.py says what PyTorch keeps there). The warm-up is the warm-up
of the language's first spare template where the pipeline allows it (builds_toolchain_in_template:
the jobs that waited for it then fork from a warm process), else a job of the pipeline's own
`warmup_source`."""
from __future__ import annotations

import logging
import os
import shutil
from typing import Callable

from compiler import registry
from compiler.model import Request
from service import job_dir as job_dirs
from service import job_process, sandbox
from service.bundle_reader import BundleReader, BundleRuleError
from service.job_process import RunnerConfig
from service.toolchain_envs import Toolchain

log = logging.getLogger(__name__)

# Where a warm-up exports the cache, in its job directory (a template's: its control directory).
EXPORT_DIR = "toolchain"


def warm_toolchain(config: RunnerConfig, language: str, versions: dict[str, str],
                   in_template: Callable[[], str | None] | None = None, chain: Toolchain | None = None) -> bool:
    """Build the toolchain cache that later jobs of this language are seeded with, when it does not
    exist: in the warm-up of the language's first spare template where `in_template` is given
    (it starts that template, waits for it to be ready and returns the directory it exported to,
    or None when it did not get ready), else, or when that failed, by running the pipeline's own
    warm-up source in the sandbox. False when there is nothing to build (no warm-up source, or the
    cache exists) or the warm-up did not finish. `chain`: the installed toolchain whose
    interpreter runs the warm-up (None: the default; `versions` are that toolchain's)."""
    source = registry.get(language).warmup_source
    dest = job_process.toolchain_cache_dir(config, language, versions)
    if source is None or os.path.isdir(dest):
        return False
    if in_template is not None:
        built = in_template()
        if built is not None and _keep(built, dest):
            return True
        log.warning("the spare template of %s did not build the toolchain cache: running the warm-up job", language)
    job_dir = os.path.join(config.data_dir, "jobs", "warmup-" + language + ("" if chain is None else "-" + chain.name))
    job_dirs.prepare(job_dir, config.user, config.job_disk_bytes)
    job_process.write_job_file(job_dir, Request(language, source, {}), versions, config.job)
    export = ("/job" if config.use_bwrap else job_dir) + "/" + EXPORT_DIR
    # The cache does not exist yet (see above), so the warm-up is seeded from nothing.
    env, _ = job_process.environment(config, language, versions, chain, IRSCOPE_EXPORT_TOOLCHAIN_CACHE=export)
    outcome = sandbox.run(job_process.spec(config, job_dir, env, [], chain), config.job)
    reader = BundleReader(job_dir, config.job)
    try:
        manifest = reader.manifest()
    except BundleRuleError:
        manifest = None
    reader.close()
    ok = outcome.limit is None and manifest is not None and manifest.status == "done" and \
        _keep(os.path.join(job_dir, EXPORT_DIR), dest)
    if not ok:
        log.warning("toolchain warm-up for %s did not finish: %s", language, outcome.message or outcome.output[-500:])
    job_dirs.release(job_dir)
    return ok


def _keep(built: str, dest: str) -> bool:
    """Copy what a warm-up exported (a directory, not a link) to `dest`, atomically. Copied, not
    moved: the job directory may be a tmpfs of its own. Links stay links."""
    if not os.path.isdir(built) or os.path.islink(built):
        return False
    staging = dest + ".tmp"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(built, staging, symlinks=True)
    os.replace(staging, dest)
    return True
