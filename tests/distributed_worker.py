"""One rank of a 2-rank CPU (gloo) training run, compiled per block with polyduct.

Run by tests/test_distributed.py as `python distributed_worker.py MODE RANK WORLD PORT` with MODE
`fsdp` (torch.distributed.fsdp.fully_shard on each block and the root) or `ddp`
(DistributedDataParallel). Each rank trains on its own slice of one global batch and checks, at
every step, its loss, its gradients and (after the optimiser step) its parameters against an
eager model trained on the whole batch in the same process. Exits non-zero with the first
mismatch.
"""

from __future__ import annotations

import copy
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

STEPS = 3
DIM = 16
BATCH = 4  # per rank


class Block(nn.Module):
    """Pre-norm MLP block: layer norm, GELU, residual (forward and backward through polyduct)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up, self.down = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(DIM, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x).mean((1, 2))


def _full(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's (FSDP2 shard's) whole value; a plain tensor as is."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _wrap(mode: str, model: Net, graphs: list[object]) -> nn.Module:
    for block in model.blocks:  # per block, as FSDP2 is used in practice
        block.compile(backend="polyduct", options={"observer": graphs.append})
    if mode == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _check(what: str, got: torch.Tensor, want: torch.Tensor, step: int) -> None:
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
        err = (got - want).abs().max().item()
        raise SystemExit(f"step {step}: {what} differs from eager (max abs error {err:.3g})")


def main(mode: str, rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # A rank that stops at a mismatch leaves the other waiting in a collective: bound the wait.
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    eager = Net()
    graphs: list[object] = []
    model = _wrap(mode, copy.deepcopy(eager), graphs)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(eager.parameters(), lr=0.1)
    for step in range(STEPS):
        data = torch.randn(world * BATCH, 5, DIM, generator=torch.Generator().manual_seed(step))
        target = data.sum((1, 2)).sin()
        mine = slice(rank * BATCH, (rank + 1) * BATCH)
        # Ranks average gradients, so the eager model's loss is the mean over the whole batch.
        loss = (model(data[mine]) - target[mine]).square().mean()
        loss.backward()
        ref = (eager(data) - target).square().mean()
        ref.backward()
        named = {n.removeprefix("module."): p for n, p in model.named_parameters()}
        for name, p in eager.named_parameters():
            _check(f"gradient of {name}", _full(named[name].grad), p.grad, step)
        opt.step()
        opt_ref.step()
        opt.zero_grad()
        opt_ref.zero_grad()
        for name, p in eager.named_parameters():
            _check(f"parameter {name}", _full(named[name].detach()), p.detach(), step)
    if len(graphs) < 2:
        raise SystemExit(f"polyduct compiled {len(graphs)} graphs, expected forward and backward")
    dist.barrier()  # no collective is in flight past here
    dist.destroy_process_group()
    print(f"{mode} rank {rank}: {STEPS} steps equal eager", flush=True)
    # Skip interpreter finalisation: FSDP can still hold gloo work objects whose tensors are then
    # freed during teardown, which now and then aborts the process (SIGABRT, "terminate called
    # without an active exception") after every check has passed.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
