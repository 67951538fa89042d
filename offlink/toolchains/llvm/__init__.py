"""LLVM's offload toolchain: its OffloadBinary dialect, the OpenMP and CUDA targets, libLTO,
and the libomptarget and CUDA runtime registrations."""
