// Source of scale.ptx (the ptx_op example). Regenerate with:
//   nvcc -ptx -arch=compute_90 scale.cu -o scale.ptx      (nvcc 13.0: PTX ISA 9.0, loads on driver >= 580)
extern "C" __global__ void scale_f32(const float* x, float alpha, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
