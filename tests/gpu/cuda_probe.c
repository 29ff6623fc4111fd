/*
 * cuda-probe: a CUDA program without the CUDA toolkit. It loads the driver's libcuda.so.1
 * (the node's, which the jail plugin puts first on LD_LIBRARY_PATH), counts the GPUs the
 * process can use, and on each one allocates device memory, copies 1 MiB there and back and
 * compares. Prints "devices N", then "gpu I NAME ok" per GPU; exits 0 when every GPU passed
 * (also with no GPU: "devices 0"), 1 on any CUDA error, 2 when libcuda cannot be loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_ERROR_NO_DEVICE 100
#define BYTES (1 << 20)

static void *lib;

static void *need(const char *name)
{
	void *symbol = dlsym(lib, name);

	if (!symbol) {
		fprintf(stderr, "cuda-probe: libcuda has no %s\n", name);
		exit(2);
	}
	return symbol;
}

static int check(CUresult rc, const char *what)
{
	if (rc != 0)
		fprintf(stderr, "cuda-probe: %s failed: CUDA error %d\n", what, rc);
	return rc != 0;
}

int main(void)
{
	CUresult (*init)(unsigned int), (*count)(int *), (*get)(CUdevice *, int);
	CUresult (*name)(char *, int, CUdevice), (*create)(CUcontext *, unsigned int, CUdevice);
	CUresult (*destroy)(CUcontext), (*alloc)(CUdeviceptr *, size_t), (*release)(CUdeviceptr);
	CUresult (*to_device)(CUdeviceptr, const void *, size_t);
	CUresult (*to_host)(void *, CUdeviceptr, size_t);
	unsigned char *sent = malloc(BYTES), *back = malloc(BYTES);
	int n = 0, failed = 0;
	CUresult rc;

	lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "cuda-probe: %s\n", dlerror());
		return 2;
	}
	*(void **)&init = need("cuInit");
	*(void **)&count = need("cuDeviceGetCount");
	*(void **)&get = need("cuDeviceGet");
	*(void **)&name = need("cuDeviceGetName");
	*(void **)&create = need("cuCtxCreate_v2");
	*(void **)&destroy = need("cuCtxDestroy_v2");
	*(void **)&alloc = need("cuMemAlloc_v2");
	*(void **)&release = need("cuMemFree_v2");
	*(void **)&to_device = need("cuMemcpyHtoD_v2");
	*(void **)&to_host = need("cuMemcpyDtoH_v2");

	rc = init(0);
	if (rc == CUDA_ERROR_NO_DEVICE) {
		printf("devices 0\n");
		return 0;
	}
	if (check(rc, "cuInit") || check(count(&n), "cuDeviceGetCount"))
		return 1;
	printf("devices %d\n", n);
	for (int i = 0; i < BYTES; i++)
		sent[i] = (unsigned char)(i * 7 + 3);
	for (int i = 0; i < n; i++) {
		char model[256] = "?";
		CUdevice device;
		CUcontext context;
		CUdeviceptr memory = 0;

		if (check(get(&device, i), "cuDeviceGet") ||
		    check(name(model, sizeof(model), device), "cuDeviceGetName") ||
		    check(create(&context, 0, device), "cuCtxCreate")) {
			failed = 1;
			continue;
		}
		memset(back, 0, BYTES);
		if (check(alloc(&memory, BYTES), "cuMemAlloc") ||
		    check(to_device(memory, sent, BYTES), "cuMemcpyHtoD") ||
		    check(to_host(back, memory, BYTES), "cuMemcpyDtoH") || memcmp(sent, back, BYTES)) {
			failed = 1;
			printf("gpu %d %s failed\n", i, model);
		} else {
			printf("gpu %d %s ok\n", i, model);
		}
		if (memory)
			release(memory);
		destroy(context);
	}
	return failed;
}
