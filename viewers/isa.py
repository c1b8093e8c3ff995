"""Instruction help for PTX and SASS listings: the opcode of a line, and a one-line description of
it written for this project with a link to the vendor's reference (NVIDIA's PTX ISA, whose
sections are one per instruction; the CUDA Binary Utilities' SASS instruction set tables, one per
architecture). The code viewer wraps each line's opcode in a link that carries its description.

The descriptions say what the instruction does in the listings irscope shows, in our own words;
the vendor's text is the reference. Opcodes missing here are shown without help.
"""
from __future__ import annotations

import re

PTX_DOC = "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html"
SASS_DOC = "https://docs.nvidia.com/cuda/cuda-binary-utilities/index.html"

# A PTX instruction line: an optional guard predicate, then the mnemonic and its dotted modifiers.
_PTX_LINE = re.compile(r"^(\s*(?:@!?%\w+\s+)?)([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*)(?=[\s;{]|$)")
# A SASS line as nvdisasm or cuobjdump lists it: the address comment, a guard, the mnemonic.
_SASS_LINE = re.compile(r"^(\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P(?:T|\d+)\s+)?)([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")

# PTX ISA section (the anchor's prefix) per instruction family; the anchor is "<section>-<opcode>".
_INT, _FP, _HALF, _CMP, _LOGIC = ("integer-arithmetic-instructions", "floating-point-instructions",
                                  "half-precision-floating-point-instructions",
                                  "comparison-and-selection-instructions", "logic-and-shift-instructions")
_MOVE, _CONV, _CTRL, _SYNC = ("data-movement-and-conversion-instructions", "data-movement-and-conversion-instructions",
                              "control-flow-instructions", "parallel-synchronization-and-communication-instructions")
_MMA, _WGMMA, _TC5, _MISC = ("warp-level-matrix-instructions", "asynchronous-warpgroup-level-matrix-instructions",
                             "tensorcore-5th-generation-family-instructions", "miscellaneous-instructions")

_WHOLE_SECTIONS = (_WGMMA, _TC5)  # families whose instructions share sections named otherwise

# opcode (its dotted prefix where the family needs it) -> (description, PTX ISA section)
PTX: dict[str, tuple[str, str]] = {
    "add": ("Add two values (integer, or floating point with a rounding mode).", _INT),
    "sub": ("Subtract the second value from the first.", _INT),
    "mul": ("Multiply; .lo/.hi/.wide pick which half of the double-width product is kept.", _INT),
    "mad": ("Multiply and add in one instruction (a*b+c).", _INT),
    "mul24": ("Multiply the low 24 bits of two integers.", _INT),
    "div": ("Divide (integer; or floating point, .approx or IEEE-rounded).", _INT),
    "rem": ("Integer remainder of a division.", _INT),
    "abs": ("Absolute value.", _INT),
    "neg": ("Negate a value.", _INT),
    "min": ("The smaller of two values.", _INT),
    "max": ("The larger of two values.", _INT),
    "popc": ("Count the set bits of an integer.", _INT),
    "clz": ("Count the leading zero bits of an integer.", _INT),
    "brev": ("Reverse the bits of an integer.", _INT),
    "bfe": ("Extract a bit field from an integer.", _INT),
    "bfi": ("Insert a bit field into an integer.", _INT),
    "fma": ("Fused multiply-add: a*b+c rounded once (the FMA that Triton's fp fusion allows).", _FP),
    "rcp": ("Reciprocal 1/x (.approx is the fast hardware estimate).", _FP),
    "sqrt": ("Square root.", _FP),
    "rsqrt": ("Reciprocal square root 1/sqrt(x), approximate.", _FP),
    "ex2": ("Base-2 exponential 2^x, approximate; exp(x) is lowered to it times log2(e).", _FP),
    "lg2": ("Base-2 logarithm, approximate; log(x) is lowered to it.", _FP),
    "sin": ("Sine, approximate.", _FP),
    "cos": ("Cosine, approximate.", _FP),
    "tanh": ("Hyperbolic tangent, approximate (sm_75 and later).", _FP),
    "testp": ("Test a float for a property (NaN, infinite, finite, ...) into a predicate.", _FP),
    "copysign": ("The first value with the sign of the second.", _FP),
    "setp": ("Compare two values and write the result to a predicate register.", _CMP),
    "set": ("Compare two values and write the result as a number.", _CMP),
    "selp": ("Select one of two values by a predicate (a branch-free if).", _CMP),
    "slct": ("Select one of two values by the sign of a third.", _CMP),
    "and": ("Bitwise AND (also of predicates).", _LOGIC),
    "or": ("Bitwise OR (also of predicates).", _LOGIC),
    "xor": ("Bitwise exclusive OR.", _LOGIC),
    "not": ("Bitwise complement.", _LOGIC),
    "cnot": ("C-style logical not: 1 if the value is 0, else 0.", _LOGIC),
    "lop3": ("Any logic function of three inputs, chosen by an 8-bit truth table.", _LOGIC),
    "shf": ("Funnel shift: shift the 64-bit join of two registers and keep 32 bits.", _LOGIC),
    "shl": ("Shift left.", _LOGIC),
    "shr": ("Shift right (arithmetic for signed types, logical for unsigned).", _LOGIC),
    "mov": ("Copy a value, an address or a special register (%tid, %ctaid, ...) into a register.", _MOVE),
    "shfl": ("Exchange registers between the threads of a warp (.sync: with a member mask); the "
             "building block of warp reductions.", _MOVE),
    "prmt": ("Permute bytes from two registers into one.", _MOVE),
    "ld": ("Load from a state space (.global, .shared, .param, .local) into registers.", _MOVE),
    "ldu": ("Load a value that is the same for all threads of a warp, through the uniform cache.", _MOVE),
    "st": ("Store registers to a state space (.global, .shared, .local).", _MOVE),
    "st.async": ("Store to the shared memory of another block of the cluster, completing on an mbarrier.", _MOVE),
    "ld.global.nc": ("Load global memory through the read-only (non-coherent) data cache.", _MOVE),
    "prefetch": ("Bring a line into a cache level ahead of its use.", _MOVE),
    "cvta": ("Convert an address between the generic space and a state space (.to.global: generic "
             "to global).", _MOVE),
    "cvt": ("Convert between types (float widths, float and integer, with rounding and saturation).", _CONV),
    "cvt.pack": ("Convert and pack several narrow values into one register.", _CONV),
    "mapa": ("Map a shared-memory address to the same location in another block of the cluster.", _MOVE),
    "isspacep": ("Test whether a generic address lies in a given state space.", _MOVE),
    "cp.async": ("Copy global to shared memory asynchronously (Ampere's LDGSTS), waited for with "
                 "cp.async.wait_group.", _MOVE),
    "cp.async.bulk": ("Bulk copy between global and shared memory by the Tensor Memory Accelerator, "
                      "completing on an mbarrier.", _MOVE),
    "cp.async.bulk.tensor": ("TMA copy of a tile described by a tensor map, between global and shared "
                             "memory.", _MOVE),
    "cp.reduce.async.bulk": ("TMA copy that reduces into its destination (add, min, max).", _MOVE),
    "ldmatrix": ("Load 8x8 matrix fragments from shared memory into the registers mma expects.", _MMA),
    "stmatrix": ("Store 8x8 matrix fragments from registers to shared memory.", _MMA),
    "tensormap": ("Modify a TMA tensor map in memory.", _MOVE),
    "bra": ("Branch to a label (with a guard predicate: a conditional branch).", _CTRL),
    "brx": ("Indirect branch to one of a list of labels.", _CTRL),
    "call": ("Call a function (inlined helpers need none).", _CTRL),
    "ret": ("Return from the function.", _CTRL),
    "exit": ("End the thread.", _CTRL),
    "bar": ("Barrier: wait until the block's threads (or a named subset) arrive (__syncthreads).", _SYNC),
    "barrier": ("Barrier: wait until the block's threads (or a named subset) arrive.", _SYNC),
    "bar.warp": ("Synchronise the threads of a warp.", _SYNC),
    "membar": ("Memory barrier: order this thread's memory accesses at a scope.", _SYNC),
    "fence": ("Order memory accesses at a scope (.proxy.async: between the generic and async proxies).", _SYNC),
    "atom": ("Atomic read-modify-write of memory (add, max, exch, cas, ...), returning the old value.", _SYNC),
    "red": ("Atomic reduction into memory, returning nothing.", _SYNC),
    "vote": ("Combine a predicate across the warp (.all, .any, .ballot).", _SYNC),
    "match": ("Find the threads of a warp holding the same value.", _SYNC),
    "redux": ("Reduce an integer across the warp in one instruction (sm_80 and later).", _SYNC),
    "elect": ("Elect one thread of the warp (sm_90).", _SYNC),
    "mbarrier": ("An mbarrier object in shared memory: init, arrive, expect bytes, test or wait; TMA "
                 "and async copies complete on one.", _SYNC),
    "griddepcontrol": ("Programmatic dependent launch: let the next kernel start, or wait for the "
                       "previous one.", _SYNC),
    "getctarank": ("The rank in the cluster of the block owning a shared-memory address.", _SYNC),
    "mma": ("Warp-level matrix multiply-accumulate on tensor cores (HMMA in SASS).", _MMA),
    "wmma": ("Warp-level matrix multiply-accumulate through fragments (load, mma, store).", _MMA),
    "wgmma": ("Warpgroup-level matrix multiply-accumulate on Hopper's tensor cores (HGMMA in SASS): "
              "4 warps, operands from shared memory by descriptor.", _WGMMA),
    "wgmma.fence": ("Order register accesses before a wgmma.mma_async reads them.", _WGMMA),
    "wgmma.commit_group": ("Close the group of wgmma operations issued so far.", _WGMMA),
    "wgmma.wait_group": ("Wait until at most N groups of wgmma operations are in flight.", _WGMMA),
    "tcgen05": ("Blackwell's 5th-generation tensor-core instructions (UTCHMMA in SASS): MMA with the "
                "accumulator in tensor memory, allocation, copies.", _TC5),
    "activemask": ("The mask of the warp's threads that are currently active.", _MISC),
    "nanosleep": ("Suspend the thread for about the given number of nanoseconds.", _MISC),
    "trap": ("Abort the kernel with an error.", _MISC),
    "brkpt": ("Breakpoint.", _MISC),
    "pmevent": ("Trigger a performance-monitor event.", _MISC),
    "setmaxnreg": ("Raise or lower the registers a warpgroup may use (warp-specialised kernels, sm_90a).", _MISC),
}

# SASS opcode -> description (the CUDA Binary Utilities' tables, by architecture, are the reference)
SASS: dict[str, str] = {
    "FADD": "FP32 add.", "FMUL": "FP32 multiply.", "FFMA": "FP32 fused multiply-add.",
    "FMNMX": "FP32 minimum or maximum (chosen by a predicate operand).",
    "FSETP": "Compare FP32 values into a predicate.",
    "FSET": "Compare FP32 values into a register.", "FSEL": "Select one of two FP32 values by a predicate.",
    "FCHK": "Check whether an FP32 division needs the slow, exact path.",
    "FRND": "Round an FP32 value to an integer value.",
    "MUFU": "Multi-function unit: approximate EX2, LG2, RCP, RSQ, SIN, COS, TANH, SQRT.",
    "DADD": "FP64 add.", "DMUL": "FP64 multiply.", "DFMA": "FP64 fused multiply-add.",
    "DSETP": "Compare FP64 values into a predicate.",
    "HADD2": "Add two pairs of FP16 (or BF16) values at once.", "HMUL2": "Multiply two pairs of FP16 values at once.",
    "HFMA2": "Fused multiply-add of two pairs of FP16 values at once (also moves constants).",
    "HMNMX2": "Minimum or maximum of two pairs of FP16 values.", "HSETP2": "Compare two pairs of FP16 values.",
    "HMMA": "Warp-level tensor-core matrix multiply-accumulate (PTX mma).",
    "HGMMA": "Hopper warpgroup tensor-core matrix multiply-accumulate (PTX wgmma.mma_async).",
    "UTCHMMA": "Blackwell tensor-core MMA with the accumulator in tensor memory (PTX tcgen05.mma).",
    "UTCBAR": "Blackwell: arrive on an mbarrier when earlier tcgen05 operations complete.",
    "IMMA": "Integer tensor-core matrix multiply-accumulate.",
    "IADD3": "Add three integers.", "IADD": "Integer add.", "IMAD": "Integer multiply-add (also used as a move).",
    "IMUL": "Integer multiply.", "IABS": "Integer absolute value.", "IMNMX": "Integer minimum or maximum.",
    "ISETP": "Compare integers into a predicate.", "ISCADD": "Scale an integer by a power of two and add.",
    "LEA": "Load effective address: a shifted add that forms addresses.", "LEA.HI": "The high part of an LEA.",
    "LOP3": "Any logic function of three inputs by an 8-bit truth table.", "LOP": "Logic operation.",
    "SHF": "Funnel shift of a 64-bit pair of registers.", "SHL": "Shift left.", "SHR": "Shift right.",
    "POPC": "Count the set bits.", "FLO": "Find the leading one bit.", "BREV": "Reverse the bits.",
    "BMSK": "Make a bit mask.", "SGXT": "Sign-extend a bit field.", "PRMT": "Permute bytes of two registers.",
    "SEL": "Select one of two values by a predicate.", "PLOP3": "Logic function of three predicates.",
    "P2R": "Copy predicates into a register.", "R2P": "Copy a register's bits into predicates.",
    "I2F": "Convert an integer to floating point.", "F2I": "Convert floating point to an integer.",
    "F2F": "Convert between floating-point widths.", "F2FP": "Convert and pack two floats into narrow pairs.",
    "I2FP": "Convert an integer to FP32 (the ALU form).", "F2IP": "Convert and pack floats into narrow integers.",
    "FRCP": "Reciprocal (a MUFU variant).",
    "MOV": "Copy a register or a constant.", "UMOV": "Copy a uniform (warp-wide) register.",
    "S2R": "Read a special register (thread id SR_TID, block id SR_CTAID, lane id, clock) into a register.",
    "S2UR": "Read a special register into a uniform register.", "CS2R": "Read a special register pair (fast).",
    "R2UR": "Copy a register into a uniform register.", "SHFL": "Exchange registers across the warp's lanes.",
    "LDC": "Load from constant memory (kernel parameters live in c[0x0][...]).",
    "ULDC": "Load from constant memory into a uniform register.",
    "LDG": "Load from global memory (.E: 64-bit address; .128: a 16-byte vector).",
    "STG": "Store to global memory.", "LDS": "Load from shared memory.", "STS": "Store to shared memory.",
    "LDSM": "Load matrix fragments from shared memory (PTX ldmatrix).",
    "STSM": "Store matrix fragments to shared memory (PTX stmatrix).",
    "LDL": "Load from local memory (a register spill, or an array the compiler could not keep in registers).",
    "STL": "Store to local memory (a register spill, or a local array).",
    "LDGSTS": "Copy global to shared memory asynchronously (PTX cp.async).",
    "LDGDEPBAR": "Mark a group of LDGSTS copies to wait for.", "DEPBAR": "Wait on a dependency barrier count.",
    "UBLKCP": "Bulk asynchronous copy by the TMA (PTX cp.async.bulk).",
    "UTMALDG": "TMA tile load from global to shared memory (PTX cp.async.bulk.tensor).",
    "UTMASTG": "TMA tile store from shared to global memory.", "UTMAPF": "TMA prefetch of a tile.",
    "UTMACMDFLUSH": "Flush the TMA commands issued so far.",
    "ATOM": "Atomic operation on generic memory.", "ATOMG": "Atomic operation on global memory.",
    "ATOMS": "Atomic operation on shared memory.", "RED": "Atomic reduction into global memory.",
    "REDUX": "Integer reduction across the warp.", "VOTE": "Combine a predicate across the warp.",
    "VOTEU": "Combine a predicate across the warp into a uniform register.", "MATCH": "Find lanes with equal values.",
    "BAR": "Block-wide barrier (__syncthreads).", "MEMBAR": "Memory barrier.", "FENCE": "Memory fence.",
    "ERRBAR": "Error barrier.", "CCTL": "Cache control.", "WARPSYNC": "Synchronise the lanes of a warp.",
    "SYNCS": "mbarrier operations in shared memory (arrive, expect bytes, try-wait; sm_90).",
    "ELECT": "Elect one lane of the warp.", "WARPGROUP": "Warpgroup synchronisation around HGMMA (arrive, depbar).",
    "UCGABAR_ARV": "Arrive on the cluster-wide barrier.", "UCGABAR_WAIT": "Wait on the cluster-wide barrier.",
    "ACQBULK": "Acquire the result of bulk copies.", "USETMAXREG": "Change the registers a warpgroup may use.",
    "BRA": "Branch.", "BRX": "Indirect branch.", "JMP": "Jump.", "CALL": "Call a function.", "RET": "Return.",
    "EXIT": "End the thread.", "BSSY": "Push a convergence barrier before divergent code.",
    "BSYNC": "Wait at a convergence barrier until the diverged threads reconverge.",
    "BREAK": "Leave a convergence region.",
    "BPT": "Breakpoint or trap.", "KILL": "Kill the thread.",
    "NOP": "No operation (padding after the last instruction).",
    "YIELD": "Let another warp run.", "NANOSLEEP": "Sleep for about N nanoseconds.",
    "UIADD3": "Add three uniform integers.", "UIMAD": "Uniform integer multiply-add.", "ULEA": "Uniform LEA.",
    "ULOP3": "Uniform three-input logic operation.", "USHF": "Uniform funnel shift.", "USEL": "Uniform select.",
    "UISETP": "Compare uniform integers into a uniform predicate.", "UPRMT": "Uniform byte permute.",
    "UFLO": "Uniform find leading one.", "UPOPC": "Uniform population count.", "USHL": "Uniform shift left.",
    "USGXT": "Uniform sign-extend of a bit field.",
    "USHR": "Uniform shift right.", "UPLOP3": "Logic function of three uniform predicates.",
    "ULDC.64": "Load 64 bits of constant memory into uniform registers.", "R2B": "Move a register to a barrier.",
    "B2R": "Move a barrier state to a register.", "CLMAD": "Carry-less multiply-add.", "UMNMX": "Uniform min or max.",
    "QSPC": "Query the state space of a generic address.", "VIADD": "Integer add (the vector ALU form).",
    "VIMNMX": "Integer minimum or maximum (the vector ALU form).", "VHMNMX": "FP16 minimum or maximum pairs.",
    "FMNMX3": "FP32 minimum or maximum of three values.", "FADD2": "Add two pairs of FP32 values.",
    "FMUL2": "Multiply two pairs of FP32 values.", "FFMA2": "Fused multiply-add of two pairs of FP32 values.",
    "LDTM": "Load from tensor memory into registers (tcgen05.ld).", "STTM": "Store registers to tensor memory.",
    "UTCATOMSWS": "Tensor memory allocation bookkeeping (tcgen05.alloc).",
}


def opcode(line: str, dialect: str) -> tuple[int, int, str] | None:
    """Where the line's instruction mnemonic is (start, end in the line) and the mnemonic, or None
    for a line that holds no instruction (a directive, a label, a comment, a brace)."""
    m = (_PTX_LINE if dialect == "ptx" else _SASS_LINE).match(line)
    if not m:
        return None
    return m.start(2), m.end(2), m.group(2)


def describe(mnemonic: str, dialect: str) -> tuple[str, str] | None:
    """(one-line description, link to the vendor's reference) of a mnemonic with its modifiers:
    the longest dotted prefix the table knows, or None."""
    parts = mnemonic.split(".")
    table = PTX if dialect == "ptx" else SASS
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in table:
            if dialect == "ptx":
                text, section = PTX[key]
                if section in _WHOLE_SECTIONS:  # one section for the family: its anchor
                    return text, f"{PTX_DOC}#{section}"
                return text, f"{PTX_DOC}#{section}-{key.replace('.', '-')}"
            return SASS[key], f"{SASS_DOC}#instruction-set-reference"
    return None
