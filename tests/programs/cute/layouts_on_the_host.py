"""Layouts on the host: a @cute.jit function that only builds and prints layouts while it is traced
(no kernel), then a function compiled for a tensor made under PyTorch's FakeTensorMode, which has
a shape and no memory, and called on a real one.

    python layouts_on_the_host.py
    python layouts_on_the_host.py --tv
"""
import argparse

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.jit
def show_layouts(thread_value: cutlass.Constexpr[bool]):
    if cutlass.const_expr(thread_value):
        threads = cute.make_ordered_layout((4, 32), order=(1, 0))
        values = cute.make_ordered_layout((4, 1), order=(1, 0))
        tiler, tv = cute.make_layout_tv(threads, values)
        print(f"tiler {tiler}, thread-value layout {tv}")
    else:
        row_major = cute.make_layout((4, 8), stride=(8, 1))
        print(f"row-major {row_major}, its size {cute.size(row_major)}")
        print(f"column-major {cute.make_layout((4, 8))}")


@cute.jit
def show_tensor(t: cute.Tensor):
    cute.print_tensor(t)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tv", action="store_true", help="a thread-value layout instead")
    args = parser.parse_args()
    show_layouts(args.tv)

    with FakeTensorMode():  # compile for the shape and dtype only: nothing is allocated
        fake = torch.zeros((3, 4), dtype=torch.float32)
        compiled = cute.compile(show_tensor, from_dlpack(fake))
    compiled(from_dlpack(torch.arange(12, dtype=torch.float32).reshape(3, 4)))
    cutlass.cuda.stream_sync(cutlass.cuda.default_stream())


if __name__ == "__main__":
    main()
