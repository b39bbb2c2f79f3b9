"""fxremat: liveness-optimal activation checkpointing for torch.compile."""
