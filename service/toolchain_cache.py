"""The toolchain cache: what a language's jobs share, built once per toolchain and host by a trusted
warm-up job (the pipeline's own `warmup_source`, never user code) in the same sandbox, and seeded
read-only into later jobs (compiler/pytorch/toolchain_cache.py says what PyTorch keeps there)."""
from __future__ import annotations

import logging
import os
import shutil

from compiler import registry
from compiler.model import Request
from service import job_dir as job_dirs
from service import job_process, sandbox
from service.bundle_reader import BundleReader, BundleRuleError
from service.job_process import RunnerConfig

log = logging.getLogger(__name__)


def warm_toolchain(config: RunnerConfig, language: str, versions: dict[str, str]) -> bool:
    """Run the pipeline's own warm-up source in the sandbox and keep what it exports as the
    toolchain cache that later jobs of this language are seeded with. False when there is nothing
    to build (no warm-up source, or the cache exists) or the warm-up did not finish."""
    source = registry.get(language).warmup_source
    dest = job_process.toolchain_cache_dir(config, language, versions)
    if source is None or os.path.isdir(dest):
        return False
    job_dir = os.path.join(config.data_dir, "jobs", "warmup-" + language)
    job_dirs.prepare(job_dir, config.user, config.job_disk_bytes)
    job_process.write_job_file(job_dir, Request(language, source, {}), versions, config.job)
    export = ("/job" if config.use_bwrap else job_dir) + "/toolchain"
    # The cache does not exist yet (see above), so the warm-up is seeded from nothing.
    env, _ = job_process.environment(config, language, versions, IRSCOPE_EXPORT_TOOLCHAIN_CACHE=export)
    outcome = sandbox.run(job_process.spec(config, job_dir, env, []), config.job)
    reader = BundleReader(job_dir, config.job)
    try:
        manifest = reader.manifest()
    except BundleRuleError:
        manifest = None
    reader.close()
    built = os.path.join(job_dir, "toolchain")
    ok = outcome.limit is None and manifest is not None and manifest.status == "done" and os.path.isdir(built) \
        and not os.path.islink(built)
    if ok:
        # Copied, not moved: the job directory may be a tmpfs of its own. Links stay links.
        staging = dest + ".tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(built, staging, symlinks=True)
        os.replace(staging, dest)
    else:
        log.warning("toolchain warm-up for %s did not finish: %s", language, outcome.message or outcome.output[-500:])
    job_dirs.release(job_dir)
    return ok
