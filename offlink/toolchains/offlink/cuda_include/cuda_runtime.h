/* Deliberately empty.  offlink compiles CUDA code that `offlink cc` preprocessed with nvcc, so
 * cuda_runtime.h is already expanded in it; nvcc force-includes cuda_runtime.h into every
 * CUDA compile, and this directory, first on the include path, makes that second copy a
 * no-op (offlink/toolchains/offlink/cuda.py). */
