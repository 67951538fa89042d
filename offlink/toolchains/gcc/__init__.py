"""GCC's offload toolchain: its .gnu.offload_lto_* dialect, the nvptx-none target, libgomp."""
