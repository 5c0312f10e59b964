"""The machine's facts: what the host offers (host/) and its NVIDIA driver and GPUs (gpu/)."""
