#!/usr/bin/env python3
"""NCCL's own all-reduce figures on this machine, through PyTorch's NCCL process group, for
the sizes bench_data_parallel measures through the engine's communicator: float32 sum,
time per call (mean of the timed calls after warm-up), algorithm bandwidth (bytes / time)
and bus bandwidth (algbw * 2 (n-1) / n, as nccl-tests' all_reduce_perf reports it).

usage: python3 bench/reference_allreduce_torch.py [--ranks N]   (default: every GPU)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    n = 1 << 20
    while n <= 256 << 20:  # 4 MiB .. 1 GiB of float32
        x = torch.ones(n, dtype=torch.float32, device="cuda")
        reps = 5 if n >= 64 << 20 else 20
        for _ in range(3):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3 / reps
        if rank == 0:
            algbw = n * 4 / (ms * 1e-3) / 1e9
            print(f"  {n * 4 / 2**20:8.1f} MiB  {ms:8.3f} ms  algbw {algbw:7.1f} GB/s  "
                  f"busbw {algbw * 2 * (world - 1) / world:7.1f} GB/s", flush=True)
        n *= 4
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=torch.cuda.device_count())
    a = p.parse_args()
    print(f"all-reduce (sum, float32) through torch {torch.__version__}, NCCL "
          f"{'.'.join(map(str, torch.cuda.nccl.version()))}, {a.ranks} ranks: size, time, algbw, busbw")
    mp.spawn(run, args=(a.ranks, 29600 + os.getpid() % 1000), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
