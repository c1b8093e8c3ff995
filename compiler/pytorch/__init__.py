"""PyTorch: torch.compile (Dynamo, AOTAutograd, Inductor) and the export path, captured from PyTorch's own
structured trace and logs."""
