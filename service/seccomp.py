"""The seccomp filter every job runs under, built with libseccomp (the `pyseccomp` bindings over
Debian's libseccomp2) and handed to bubblewrap as compiled BPF (`bwrap --seccomp FD`), which loads
it just before it runs the job's first program: bubblewrap itself sets up the namespaces first,
and everything in the job (setpriv dropping to the sandbox user, the worker, the compilers and
the user's code) runs under it.

What it denies (each with EPERM, so the program is told, not killed):

- the kernel keyring (`add_key`, `keyctl`, `request_key`): keys belong to a uid, not a sandbox,
  and every job runs as the same one, so a key one job added would be readable by the next;
- new namespaces (`unshare`, `setns`, `clone` with a CLONE_NEW* flag; `clone3`, whose flags a
  filter cannot read, answers ENOSYS so that glibc falls back to `clone`): a user namespace would
  give the job capabilities over its own mounts;
- io_uring (`io_uring_setup`, `_enter`, `_register`): a large kernel surface whose operations a
  filter cannot see one by one;
- `personality` other than the default and the query (ADDR_NO_RANDOMIZE would turn off address
  randomisation for what the job runs next);
- `ptrace`, `process_vm_readv`/`writev` (another process's memory), `move_pages`/`migrate_pages`
  (another process's pages), `bpf`, `perf_event_open`,
  `userfaultfd`, `mount`/`umount2`/`pivot_root`/the new mount API, `kexec_*`, `*_module`, `swapon`/
  `swapoff`, `reboot`, `acct`, `quotactl`, `lookup_dcookie`, `keyctl`, `iopl`/`ioperm`,
  `settimeofday`/`clock_settime`, `sethostname`/`setdomainname`.

Everything else is allowed: the compilers (Python, PyTorch's threads and subprocesses, g++, ptxas,
XLA) need the rest. tests/test_security.py tries each denial from inside a job.

A spare template (compiler/spare_template.py) is the one process that runs under a looser filter,
`TEMPLATE_FILTER`: new namespaces and mounts are allowed to it, because each job process it forks
makes a sandbox of its own with them (a user namespace, fresh mounts) and then loads this whole
filter itself, before anything of its job runs. The template runs irscope's code only.
"""
from __future__ import annotations

import errno
import os
import tempfile

# Syscalls a job is refused, by the reason it is refused (the module docstring says each why).
DENIED = {
    "keyring": ("add_key", "keyctl", "request_key"),
    "namespaces": ("unshare", "setns"),
    "other processes": ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "move_pages",
                        "migrate_pages"),
    # io_uring: a large kernel surface whose operations (opening files, sockets) a filter cannot
    # see, one submission at a time; no compiler irscope runs uses it
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "kernel": ("bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
               "finit_module", "delete_module", "iopl", "ioperm", "swapon", "swapoff", "reboot", "acct",
               "quotactl", "lookup_dcookie"),
    "mounts": ("mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
               "open_tree", "mount_setattr"),
    "host clock and name": ("settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
                            "setdomainname"),
}
# clone's flags that make a namespace (a job may clone threads and processes, never namespaces)
_CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
              "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
              "CLONE_NEWNET": 0x40000000}


# personality(): the kernel reads its argument's low 32 bits; 0 (Linux, the default) and 0xffffffff
# (the query) are allowed, every other value (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...) refused.
# A rule compares one argument once, so "neither" is spelled bit by bit: some bit below 31 set
# with bit 31 clear, or bit 31 set with some bit below it clear.
_BIT31 = 1 << 31
_PERSONALITY_CHANGES = tuple((_BIT31 | 1 << b, 1 << b) for b in range(31)) + \
    tuple((_BIT31 | 1 << b, _BIT31) for b in range(31))


def available() -> str | None:
    """None when a filter can be built here, else why not (the library or its bindings missing)."""
    try:
        import pyseccomp  # noqa: F401 - the bindings, over libseccomp.so.2
        build_bpf()
    except (ImportError, OSError, RuntimeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None


# What a spare template may do that its forked jobs may not (the module docstring says why).
TEMPLATE_ALLOWS = ("namespaces", "mounts")


def build_bpf(allowed: tuple[str, ...] = ()) -> bytes:
    """The filter as BPF bytes for this machine's architecture; `allowed`: categories of DENIED
    left out (TEMPLATE_ALLOWS for a spare template, whose forks load the whole filter)."""
    import pyseccomp as seccomp
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    for category, names in DENIED.items():
        if category in allowed:
            continue
        for name in names:
            try:
                f.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (ValueError, RuntimeError, OSError):
                continue  # a syscall this architecture does not have (iopl on arm64, ...)
    for flag in _CLONE_NEW.values() if "namespaces" not in allowed else ():  # any of them refuses the clone
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for mask, value in _PERSONALITY_CHANGES:
        f.add_rule(seccomp.ERRNO(errno.EPERM), "personality", seccomp.Arg(0, seccomp.MASKED_EQ, mask, value))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


class CompiledFilter:
    """The BPF of the filter, built once per process, given to each sandbox as a file descriptor
    (bubblewrap reads the program from it)."""

    def __init__(self, allowed: tuple[str, ...] = ()) -> None:
        self.allowed = allowed
        self._bpf: bytes | None = None

    def bpf(self) -> bytes:
        if self._bpf is None:
            self._bpf = build_bpf(self.allowed)
        return self._bpf

    def fd(self) -> int:
        """A new readable fd holding the program (the caller passes it to bwrap and closes it)."""
        read_fd, write_fd = os.pipe()
        os.write(write_fd, self.bpf())  # a few KiB: well under a pipe's buffer
        os.close(write_fd)
        return read_fd


FILTER = CompiledFilter()
TEMPLATE_FILTER = CompiledFilter(TEMPLATE_ALLOWS)
