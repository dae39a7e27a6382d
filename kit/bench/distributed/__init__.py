"""Data-parallel cells: one cell over N ranks with DistributedDataParallel (NCCL on GPUs, gloo on the CPU).

    kit.runner.isolate.run_data_parallel        (the runner: host side, no torch)
      starts N processes (its fork server), each kit.runner.isolate._child_main -> kit.bench.distributed.worker:run_rank
    run_rank (one per rank)
      init_process_group (a FileStore in the run folder: no TCP port to pick or race for)
      kit.bench.distributed.state.activate -> the engines' three hooks turn on:
          wrap_model   after Precision.wrap: DDP around the model (loss scaling stays per rank
                       and agrees, since every rank unscales the same all-reduced gradients)
          data_seed    each rank draws its own batches (rank 0 keeps the plain seed)
          repeat_done  a digest of the trained weights per repeat (the ranks must agree)
      kit.bench.api.run_cell (the plain cell code), then all ranks all_gather their records;
      rank 0 combines them (total and per-rank throughput, weight digests, all-reduce time)
      and is the only rank whose events, progress and result reach the runner.

Only this package and the engines' hooks import torch.distributed.
"""
