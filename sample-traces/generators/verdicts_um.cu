// Issue 40: a CUDA C program whose data lives in managed (unified) memory and whose host reads
// the results every iteration, so every page migrates to the host and back (run as `um managed`
// under Nsight Systems with the unified-memory page-fault options). `um both` times it against
// its twin in the same process: the same kernel on a device buffer, the results copied back
// with one cudaMemcpy per iteration into pinned memory. Prints a JSON line.
#include <cstdio>
#include <cstring>
#include <chrono>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__global__ void scale(float* a, size_t n, float s) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * s + 1.0f;
}

static const size_t N = 1u << 26;  // 256 MiB of float
static const int ITERS = 12;

static double host_sum(const float* a) {
    double s = 0;
    for (size_t i = 0; i < N; i += 1024) s += a[i];  // one read per 4 KiB page
    return s;
}

static std::vector<double> managed() {
    float* a;
    cudaMallocManaged(&a, N * sizeof(float));
    for (size_t i = 0; i < N; i++) a[i] = 1.0f;
    std::vector<double> ms;
    for (int it = 0; it < ITERS; it++) {
        auto t0 = std::chrono::steady_clock::now();
        scale<<<(N + 255) / 256, 256>>>(a, N, 0.5f);
        cudaDeviceSynchronize();
        volatile double s = host_sum(a);
        (void)s;
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    cudaFree(a);
    return ms;
}

static std::vector<double> explicit_copies() {
    float *d, *h;
    cudaMalloc(&d, N * sizeof(float));
    cudaMallocHost(&h, N * sizeof(float));
    for (size_t i = 0; i < N; i++) h[i] = 1.0f;
    cudaMemcpy(d, h, N * sizeof(float), cudaMemcpyHostToDevice);
    std::vector<double> ms;
    for (int it = 0; it < ITERS; it++) {
        auto t0 = std::chrono::steady_clock::now();
        scale<<<(N + 255) / 256, 256>>>(d, N, 0.5f);
        cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost);
        volatile double s = host_sum(h);
        (void)s;
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    cudaFree(d);
    cudaFreeHost(h);
    return ms;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "managed";
    cudaFree(0);
    if (!strcmp(mode, "managed")) {
        auto m = managed();
        printf("{\"managed_median_ms\": %.3f}\n", median(m));
    } else {
        managed();  // warm both paths once
        explicit_copies();
        auto m = managed();
        auto e = explicit_copies();
        printf("{\"managed_median_ms\": %.3f, \"explicit_median_ms\": %.3f, \"iterations\": %d, \"bytes\": %zu}\n",
               median(m), median(e), ITERS, N * sizeof(float));
    }
    return 0;
}
