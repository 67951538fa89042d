"""offlink's own toolchain: the `offlink cc` payload dialect, the host and CUDA (nvcc) targets."""
