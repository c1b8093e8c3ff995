"""The installed toolchains as the service sees them (service/toolchain_envs.py): what is offered,
what is refused and why, without compiling anything. The jobs that run on other toolchains are
tests/test_toolchains.py's."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from compiler.errors import Refused
from service import toolchain_envs
from service.jobs import Jobs, JobsConfig

INSTALLED = toolchain_envs.root()
LANGUAGES = ("pytorch", "triton", "gluon", "helion", "jax", "hlo")


def installed_names() -> list[str]:
    return [c.name for c in toolchain_envs.installed()]


def jobs(directory: str = "") -> Jobs:
    return Jobs(store=None, runner=None, config=JobsConfig(languages=LANGUAGES, max_source_bytes=1 << 16,
                                                           toolchains_dir=directory or INSTALLED))


def test_the_pinned_toolchains_are_installed_and_listed_with_what_they_serve():
    pinned = sorted(f[:-4] for f in os.listdir(toolchain_envs.LOCK_DIR) if f.endswith(".txt"))
    missing = [n for n in pinned if n not in installed_names()]
    assert not missing, f"./run.sh setup installs the pinned toolchains; missing here: {missing}"
    rows = {c.name: toolchain_envs.describe(c, LANGUAGES) for c in toolchain_envs.installed()}
    assert rows["default"]["default"] and rows["default"]["versions"]["torch"].startswith("2.13.0")
    torch = rows["torch-2.14.1"]
    # its versions are read from its own environment, not the project's
    assert torch["versions"]["torch"] == "2.14.1" and torch["versions"]["triton"] == "3.8.0"
    assert "pytorch" in torch["languages"] and "jax" not in torch["languages"]
    # the virtual GPU shim is the default's torch 2.13 alone; Triton's compile-only driver is not
    assert torch["supports"]["virtual_gpu"] is False and rows["default"]["supports"]["virtual_gpu"] is True
    assert torch["supports"]["triton_virtual_targets"] is True
    jax = rows["jax-0.9.2"]
    assert jax["versions"] == {"jax": "0.9.2", "jaxlib": "0.9.2"} and set(jax["languages"]) == {"jax", "hlo"}
    assert jax["supports"]["xla_gpu"] is False and rows["default"]["supports"]["xla_gpu"] is True
    # the environment's size on disk, from its manifest: a CUDA build of torch is gigabytes
    assert torch["size_bytes"] > 3 << 30 and jax["size_bytes"] < torch["size_bytes"]


def test_a_request_names_an_installed_toolchain_or_is_refused_with_those_that_can():
    j = jobs()
    request = j.parse({"language": "pytorch", "source": "x = 1\n", "options": {"toolchain": "torch-2.14.1"}})
    assert request.options["toolchain"] == "torch-2.14.1"
    # the default is left out of the options: a default job's key is what it was before toolchains
    assert "toolchain" not in j.parse({"language": "pytorch", "source": "x = 1\n",
                                       "options": {"toolchain": "default"}}).options
    with pytest.raises(Refused) as e:
        j.parse({"language": "pytorch", "source": "x = 1\n", "options": {"toolchain": "torch-2.9.0"}})
    assert "no toolchain 'torch-2.9.0' is installed" in e.value.message
    assert "default" in e.value.message and "torch-2.14.1" in e.value.message
    # a feature the release lacks, named, with the installed toolchains that have it
    with pytest.raises(Refused) as e:
        j.parse({"language": "pytorch", "source": "x = 1\n",
                 "options": {"toolchain": "torch-2.14.1", "target": "cuda:sm_90"}})
    assert "virtual GPU target cuda:sm_90 is built for torch 2.13" in e.value.message
    assert "torch 2.14.1" in e.value.message and e.value.message.endswith("Installed toolchains that can: default")
    with pytest.raises(Refused) as e:
        j.parse({"language": "jax", "source": "x = 1\n", "options": {"toolchain": "torch-2.14.1"}})
    assert "it has no jax, jaxlib installed" in e.value.message and "jax-0.9.2" in e.value.message
    with pytest.raises(Refused) as e:
        j.parse({"language": "jax", "source": "x = 1\n", "options": {"toolchain": "jax-0.9.2", "target": "cuda:h100"}})
    assert "XLA:GPU target cuda:h100 needs jax-cuda12-plugin 0.9.2" in e.value.message
    # a name that is not a toolchain's shape is the option's error, not a lookup
    with pytest.raises(Refused, match="option 'toolchain' takes"):
        j.parse({"language": "triton", "source": "x = 1\n", "options": {"toolchain": "../../etc"}})


def test_a_half_installed_toolchain_is_never_offered(tmp_path):
    complete = tmp_path / "triton-3.8.0"
    shutil.copytree(os.path.join(INSTALLED, "triton-3.8.0"), complete, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in ("lib", "include", "share")])
    (tmp_path / "triton-3.7.0").mkdir()  # an add that was interrupted: no manifest
    (tmp_path / "triton-3.7.0" / "bin").mkdir()
    broken = tmp_path / "jax-0.9.2"
    broken.mkdir()
    (broken / toolchain_envs.MANIFEST).write_text("{not json")  # a disk that filled while it was written
    assert [c.name for c in toolchain_envs.installed(str(tmp_path))] == ["default", "triton-3.8.0"]
    with pytest.raises(Refused, match="no toolchain 'triton-3.7.0' is installed on this server; installed: "
                                      "default, triton-3.8.0"):
        jobs(str(tmp_path)).parse({"language": "triton", "source": "x = 1\n",
                                   "options": {"toolchain": "triton-3.7.0"}})


def test_an_add_of_a_release_the_registries_lack_names_those_they_have(tmp_path):
    with pytest.raises(toolchain_envs.ToolchainError) as e:
        toolchain_envs.add("triton-3.99.0", str(tmp_path), progress=lambda text: None)
    assert "the package registries have no triton 3.99.0; they have triton" in str(e.value)
    assert "3.9.0" in str(e.value) and "3.7.0" in str(e.value)
    assert not os.listdir(tmp_path)  # nothing was created for it
    with pytest.raises(toolchain_envs.ToolchainError, match="named after its compiler and version"):
        toolchain_envs.add("latest", str(tmp_path), progress=lambda text: None)


def test_an_add_that_fails_in_pip_leaves_nothing_behind(tmp_path, monkeypatch):
    # the registries' index did not answer (pip index versions failed), so pip itself finds the gap,
    # after the environment was created: the error names what the registries have, and the
    # half-made environment is removed with it
    monkeypatch.setattr(toolchain_envs, "_check_available", lambda name: None)
    with pytest.raises(toolchain_envs.ToolchainError) as e:
        toolchain_envs.add("triton-3.99.0", str(tmp_path), progress=lambda text: None)
    assert "the package registries have no triton==3.99.0; they have:" in str(e.value) and "3.8.0" in str(e.value)
    assert not os.listdir(tmp_path)


def test_the_command_lists_the_toolchains_as_the_api_does():
    done = subprocess.run([sys.executable, "-m", "irscope", "toolchains", "list", "--json"], capture_output=True,
                          text=True, timeout=120, check=True)
    listed = {row["name"]: row for row in json.loads(done.stdout)["toolchains"]}
    assert listed.keys() == set(installed_names())
    assert listed["triton-3.7.0"]["versions"]["triton"] == "3.7.0"
    done = subprocess.run([sys.executable, "-m", "irscope", "toolchains", "remove", "default"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "cannot be removed" in done.stderr
