"""The machine a loader runs on: detected (CPUs, memory, /dev/shm, GPUs) or declared with --target."""
