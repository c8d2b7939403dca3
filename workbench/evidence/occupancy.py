"""Theoretical occupancy of a launch configuration, as the CUDA occupancy calculator computes it
from registers, shared memory and block size against the device's per-SM limits."""
from __future__ import annotations

import math

# Resident blocks per SM by architecture (CUDA programming guide, compute capability table).
MAX_BLOCKS_PER_SM = {"sm_70": 32, "sm_75": 16, "sm_80": 32, "sm_86": 16, "sm_87": 16,
                     "sm_89": 24, "sm_90": 32, "sm_100": 32, "sm_120": 32}
REG_ALLOC_UNIT = 256          # registers are allocated per warp in units of 256
SMEM_ALLOC_UNIT = 128
RESERVED_SMEM_PER_BLOCK = 1024  # the driver's share of each block's shared memory (sm_80+)


def threads_of(block) -> int:
    """Threads per block from a [x, y, z] list (the profiler's form) or an int."""
    if isinstance(block, (list, tuple)):
        return math.prod(int(b) for b in block)
    return int(block or 0)


def theoretical(registers: int | None, smem_bytes: int | None, block_threads: int,
                device: dict) -> dict | None:
    """{occupancy (0..1), blocks_per_sm, warps_per_sm, limiter} or None without the inputs."""
    max_threads = device.get("max_threads_per_sm")
    regs_per_sm = device.get("regs_per_sm")
    smem_per_sm = device.get("smem_per_sm")
    if not block_threads or not max_threads or registers is None or not regs_per_sm:
        return None
    warp = device.get("warp_size") or 32
    max_warps = max_threads // warp
    warps_per_block = math.ceil(block_threads / warp)
    limits = {"warps": max_warps // warps_per_block,
              "blocks": MAX_BLOCKS_PER_SM.get(device.get("arch", ""), 32)}
    if registers:
        regs_per_warp = math.ceil(registers * warp / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        limits["registers"] = (regs_per_sm // regs_per_warp) // warps_per_block
    if smem_per_sm and smem_bytes is not None:
        per_block = smem_bytes + RESERVED_SMEM_PER_BLOCK
        per_block = math.ceil(per_block / SMEM_ALLOC_UNIT) * SMEM_ALLOC_UNIT
        limits["shared memory"] = smem_per_sm // per_block
    blocks = max(0, min(limits.values()))
    limiter = min(limits, key=lambda k: (limits[k], k != "warps"))
    return {"occupancy": blocks * warps_per_block / max_warps, "blocks_per_sm": blocks,
            "warps_per_sm": blocks * warps_per_block, "limiter": limiter}
