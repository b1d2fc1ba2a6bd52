"""Routing near-ties of a Mixture-of-Experts model, found in the trainer's own forward.

A token whose router logits for its k-th and (k+1)-th expert are nearly equal may have gone to a
different expert in vLLM (other kernels, other rounding: the gap is within the logits' rounding error): its log-prob then differs by more than the
sampler's usual mismatch. Such tokens are counted per step (`routing_near_tie_fraction`), with the share of
them that the ratio band masked (`routing_near_tie_masked_fraction`) and their k3 mismatch, so a reader can
tell whether near-ties drive the mismatch. They are masked by the same rule as every token (loss.py): a
flipped route that moves the log-prob outside the ratio band is masked there.

Forward hooks on the routers record, per decoder call, each position's smallest top-k margin over the
layers; the hooks do no work unless a forward asked for them (`start`), so backward's recomputation under
activation checkpointing adds nothing.
"""

from __future__ import annotations

from typing import Any

import torch

# a gap between the k-th and (k+1)-th router logit below this is a near-tie: a few units of the last place
# of logits of magnitude ~4 in the dtype the router computes in
TIE_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 4e-3}


def is_router(module: Any) -> bool:
    weight = getattr(module, "weight", None)
    return (type(module).__name__.endswith("Router") and isinstance(getattr(module, "top_k", None), int)
            and isinstance(weight, torch.Tensor) and weight.dim() == 2)


class RouterMargins:
    def __init__(self, model: Any, dtype: torch.dtype):
        self.routers = [m for m in model.modules() if is_router(m)]
        self.tolerance = TIE_TOLERANCE.get(dtype, TIE_TOLERANCE[torch.bfloat16])
        self.margins: list[torch.Tensor] | None = None
        self.near_tie: torch.Tensor | None = None  # the last forward's, one flag per loss token
        for router in self.routers:
            router.register_forward_hook(self._record)

    # outside dynamo: traced, the growing list would be a guard that recompiles every compiled layer
    @torch.compiler.disable
    def _record(self, module: Any, inputs: Any, output: Any) -> None:
        if self.margins is None:
            return
        logits = output[0] if isinstance(output, tuple) else output
        with torch.no_grad():
            top = logits.detach().float().topk(module.top_k + 1, dim=-1).values
            self.margins.append(top[:, module.top_k - 1] - top[:, module.top_k])

    def start(self) -> None:
        self.margins, self.near_tie = [], None

    def finish(self, call_shapes: list[tuple[int, int]], predicting: slice, rows: torch.Tensor,
               columns: torch.Tensor) -> None:
        """`call_shapes`: (batch, positions) of each decoder call in order (a shared prefix runs first, batch
        1); `predicting` the positions whose hidden states score tokens; rows/columns the loss tokens in them."""
        margins, self.margins = self.margins or [], None
        layers = len(self.routers)
        if not layers or len(margins) != layers * len(call_shapes):
            return
        grids = []
        for index, (batch, positions) in enumerate(call_shapes):
            smallest = torch.stack(margins[index * layers:(index + 1) * layers]).amin(0)
            grids.append(smallest.reshape(batch, positions))
        batch = call_shapes[-1][0]
        grid = torch.cat([g.expand(batch, -1) for g in grids], dim=1)
        self.near_tie = grid[:, predicting][rows, columns] < self.tolerance


def track_routing(model: Any, dtype: torch.dtype) -> RouterMargins | None:
    """Attach a RouterMargins to an MoE policy (`model.prime_router_margins`); None for a dense model."""
    margins = RouterMargins(model, dtype)
    if not margins.routers:
        return None
    model.prime_router_margins = margins
    return margins
