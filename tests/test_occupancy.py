"""Theoretical occupancy (compiler/targets/occupancy.py) against figures NVIDIA publishes for its
architectures: a thread's registers, a block's shared memory and warps, and what limits them; the
resource table those figures are shown in (viewers/resources.py)."""
from __future__ import annotations

import re

from compiler.targets import occupancy


def test_registers_halve_an_a100s_occupancy_at_64_per_thread():
    # 256 threads a block. 32 registers: 64 warps fit (the SM's maximum), 8 blocks;
    # 64 registers: 65,536 / 64 = 1,024 threads, 32 warps, 50 %: limited by registers
    free = occupancy.nvidia(80, 8, 32, 0)
    assert (free["blocks_per_sm"], free["warps_per_sm"], free["percent"]) == (8, 64, 100.0)
    held = occupancy.nvidia(80, 8, 64, 0)
    assert (held["blocks_per_sm"], held["warps_per_sm"], held["percent"]) == (4, 32, 50.0)
    assert held["limited_by"] == ["registers"]


def test_registers_are_allocated_per_warp_in_units_of_256():
    # 33 registers a thread is 1,056 a warp, allocated as 1,280: 12 warps per scheduler, not 15
    assert occupancy.nvidia(90, 1, 33, 0)["limits_blocks"]["registers"] == 48
    assert occupancy.nvidia(90, 1, 40, 0)["limits_blocks"]["registers"] == 48  # 1,280 exactly


def test_shared_memory_limits_an_h100_kernel_with_its_reserved_kibibyte():
    # 100 KiB dynamic + 1 KiB reserved per block: two blocks in 228 KiB, 8 of 64 warps
    occ = occupancy.nvidia(90, 4, 32, 100 * 1024)
    assert (occ["blocks_per_sm"], occ["percent"], occ["limited_by"]) == (2, 12.5, ["shared memory"])
    # 113.5 KiB a block: with the reserved KiB two no longer fit
    assert occupancy.nvidia(90, 4, 32, 113 * 1024 + 512)["blocks_per_sm"] == 1
    # an sm_86 SM holds 48 warps and 100 KiB: the same kernel is one block there
    assert occupancy.nvidia(86, 4, 32, 50 * 1024)["blocks_per_sm"] == 1


def test_a_kernel_that_cannot_launch_says_why():
    over = occupancy.nvidia(90, 4, 32, 228 * 1024)
    assert over["blocks_per_sm"] == 0 and "over the 232,448 one block may have" in over["limited_by"][0]
    assert occupancy.nvidia(80, 64, 32, 0)["limited_by"] == ["2048 threads per block, over the 1024 allowed"]
    assert occupancy.nvidia(75, 4, 32, 0) is None  # an architecture not in the table: no figure, not a guess


def test_amd_occupancy_is_llvms_waves_per_simd():
    occ = occupancy.amd("gfx942", 4)
    assert occ["percent"] == 50.0 and "LLVM" in occ["model"]
    assert occupancy.amd("gfx942", None) is None


def test_a_triton_jobs_glance_says_its_kernels_registers_spills_and_occupancy(tmp_path):
    """The summary line of a Triton-family job gives its kernels what the compiler reported of them
    (the resource table), as CuTe's does, and leaves out what it did not report."""
    import json

    from compiler.model import Stage
    from tests.conftest import glance_of_bundle

    def row(kernel, registers, percent=None):
        return {"kernel": kernel, "stage": f"triton.metadata:{kernel}", "target": "cuda:sm_90",
                "registers": registers, "spill_stores_bytes": 0, "spill_loads_bytes": 0,
                **({"occupancy": {"percent": percent, "model": "nvidia"}} if percent else {})}
    texts = {"triton.source:add.0": "@triton.jit\n", "triton.source:add.1": "@triton.jit\n",
             "kernels.resources": json.dumps({"kernels": [row("add.0", 32, 100.0), row("add.1", 40, 75.0)]})}
    stages = [Stage(key, key, "Triton", "resources" if key == "kernels.resources" else "python", len(text))
              for key, text in texts.items()]
    items = glance_of_bundle(tmp_path, "triton", stages, texts.get)
    assert "1 kernel (2 configs): 32–40 registers, no spills, 75–100% theoretical occupancy" in [
        i["text"] for i in items], items
    texts["kernels.resources"] = json.dumps({"kernels": [row("add.0", None), row("add.1", None)]})
    (tmp_path / "unreported").mkdir()
    items = glance_of_bundle(tmp_path / "unreported", "triton", stages, texts.get)
    assert "1 kernel (2 configs): no spills" in [i["text"] for i in items], items


def test_the_resource_table_shows_inductors_bytes_estimate_only_where_a_row_has_one():
    """Inductor's kernels carry its scheduler's estimate of the bytes each reads and writes: a
    sortable column of its own, said on hover to be an estimate; a table without any (Triton's,
    Helion's, CuTe's kernels) has no such column."""
    import json

    import viewers

    def table(*estimates):
        return json.dumps({"kernels": [
            {"kernel": f"triton_poi_fused_{n}.0", "stage": f"triton.metadata:triton_poi_fused_{n}.0",
             "target": "cuda:sm_90", "registers": 16, **({"estimated_bytes": b} if b is not None else {})}
            for n, b in enumerate(estimates)]})

    html = viewers.render("resources", table(266240, None), {})
    header = re.search(r'<th class="num" title="([^"]*)"><button[^>]*>traffic</button></th>', html)
    assert header and "Inductor" in header.group(1) and "not a measurement" in header.group(1), html
    cells = re.findall(r'<td class="num estimated-bytes"[^>]*>(.*?)</td>', html)
    assert cells[0] == "260.0 KiB" and 'class="na"' in cells[1], cells
    assert 'data-sort="266240"' in html
    assert ">traffic<" not in viewers.render("resources", table(None, None), {})


def test_a_row_without_stages_or_config_shows_a_dash_that_says_why():
    """A kernel with no config (a CuTe kernel, a Triton kernel with no constexpr) has a muted dash in
    its config cell, never an empty <code></code>; its hover says why: the row's `why_empty` where the
    pipeline says it (CuTe: no software-pipelining stages, no autotune config), else in general."""
    import json

    import viewers
    from compiler.cute.stages import WHY_EMPTY

    def table(**row):
        return json.dumps({"kernels": [{"kernel": "add/add_kernel", "stage": "cute.metadata:add",
                                        "target": "cuda:sm_90", "num_warps": 8, "registers": 16, **row}]})

    html = viewers.render("resources", table(config={}, why_empty=WHY_EMPTY), {})
    assert "<code></code>" not in html
    config = re.search(r'<td class="config">(.*?)</td>', html).group(1)
    assert config == viewers.cells.na(WHY_EMPTY["config"]) and "CuTe" in WHY_EMPTY["config"], config
    assert f'<td class="num">{viewers.cells.na(WHY_EMPTY["stages"])}</td>' in html
    plain = viewers.render("resources", table(), {})  # no reason given: the general one
    assert "<code></code>" not in plain and re.search(r'<td class="config"><span class="na" title="[^"]+">-</span>',
                                                      plain)
    given = viewers.render("resources", table(config={"BLOCK": 64}, num_stages=3), {})
    assert '<td class="config"><code>BLOCK=64</code></td>' in given and '<td class="num">3</td>' in given


def test_a_kernels_bytes_estimate_is_its_own_scheduler_nodes():
    """estimates.kernel_bytes: a kernel's figure is that of the scheduler node it was generated from
    (the row's `kernel`, not every kernel its FX nodes fed: `kernels`); a kernel generated from nodes
    whose figures differ gives none, one reused with the same figure gives it."""
    from compiler.pytorch.estimates import GraphEstimates, kernel_bytes

    def node(kernel, n):
        return {"node": "op", "kernels": ["extern_kernels.mm", "triton_a_0"], "bytes_read_and_written": n,
                **({"kernel": kernel} if kernel else {})}
    forward = GraphEstimates("0/0", False, 0, [node(None, 100), node("triton_a_0", 200), node("triton_b_1", 5),
                                               node("triton_c_2", 7), node("triton_c_2", 7)])
    backward = GraphEstimates("0/0", True, 0, [node("triton_b_1", 6), node("triton_e_0", 9)])
    assert kernel_bytes([forward, backward]) == {"triton_a_0": 200, "triton_c_2": 7, "triton_e_0": 9}
