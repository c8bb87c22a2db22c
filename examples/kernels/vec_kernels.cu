// Kernels of the driver-API examples (driver_module_leaks.cpp). The PTX the
// examples embed (vec_kernels_ptx.h) was made from this file with
//   nvcc -ptx -arch=sm_90 vec_kernels.cu
// and meson builds a cubin from it too when nvcc is installed.
extern "C" __device__ unsigned int launch_count = 0;

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
  if (i == 0) atomicAdd(&launch_count, 1u);
}

extern "C" __global__ void scale(float *x, float factor, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
