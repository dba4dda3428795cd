/* Stand-in CUDA runtime (libcudart.so.12) for the eBPF tracer's tests.
 *
 * Exports the runtime entry points the tracer attaches uprobes to, with the real
 * signatures (checked against cuda_runtime_api.h and cuda.h when compiled with
 * -DSTANDIN_CHECK_HEADERS). Like the real runtime it dlopens libcuda.so.1 on first
 * use (found by the normal loader search: LD_LIBRARY_PATH, then this library's
 * RUNPATH $ORIGIN) and forwards every call to the matching driver entry point, so a
 * tracer that probes both libraries sees the same nesting as with real CUDA and must
 * not count a call twice.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

/* Local ABI-equivalent types, so no CUDA toolkit is needed to build. With
 * STANDIN_CHECK_HEADERS the real headers are included as well: the local types get a
 * prefix and are checked against the real ones by the static asserts, and the
 * functions below (written with the plain type names) are then compiled against the
 * real declarations, so any signature mismatch is a compile error. */
#ifdef STANDIN_CHECK_HEADERS
#include <cuda.h>
#include <cuda_runtime_api.h>
#define L(name) standin_##name
#else
#define L(name) name
#endif

typedef int L(cudaError_t); /* enum cudaError: int-sized */
typedef int L(CUresult);    /* enum cudaError_enum: int-sized */
typedef unsigned long long L(CUdeviceptr);
typedef struct CUstream_st *L(cudaStream_t);
typedef struct CUstream_st *L(CUstream);
typedef struct CUevent_st *L(cudaEvent_t);
typedef struct CUevent_st *L(CUevent);
typedef struct CUgraphExec_st *L(cudaGraphExec_t);
typedef struct CUgraphExec_st *L(CUgraphExec);
typedef struct CUfunc_st *L(CUfunction);
typedef struct L(dim3) { unsigned int x, y, z; } L(dim3);
typedef struct L(cudaLaunchConfig_st) {
    L(dim3) gridDim;
    L(dim3) blockDim;
    size_t dynamicSmemBytes;
    L(cudaStream_t) stream;
    void *attrs; /* cudaLaunchAttribute *: passed through, never read */
    unsigned int numAttrs;
} L(cudaLaunchConfig_t);
typedef struct L(CUlaunchConfig_st) {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    L(CUstream) hStream;
    void *attrs; /* CUlaunchAttribute *: the runtime's cudaLaunchAttribute is the same */
    unsigned int numAttrs;
} L(CUlaunchConfig);

#ifdef STANDIN_CHECK_HEADERS
#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " != " #b)
#define SAME_FIELD(a, b, f)                                                    \
    _Static_assert(offsetof(a, f) == offsetof(b, f), #a "." #f " offset"); \
    _Static_assert(sizeof(((a *)0)->f) == sizeof(((b *)0)->f), #a "." #f " size")
_Static_assert(sizeof(standin_cudaError_t) == sizeof(cudaError_t), "cudaError_t size");
_Static_assert(sizeof(standin_CUresult) == sizeof(CUresult), "CUresult size");
SAME(standin_CUdeviceptr, CUdeviceptr);
SAME(standin_cudaStream_t, cudaStream_t);
SAME(standin_CUstream, CUstream);
SAME(standin_cudaEvent_t, cudaEvent_t);
SAME(standin_CUevent, CUevent);
SAME(standin_cudaGraphExec_t, cudaGraphExec_t);
SAME(standin_CUgraphExec, CUgraphExec);
SAME(standin_CUfunction, CUfunction);
_Static_assert(sizeof(standin_dim3) == sizeof(dim3), "dim3 size");
SAME_FIELD(standin_dim3, dim3, z);
_Static_assert(sizeof(standin_cudaLaunchConfig_t) == sizeof(cudaLaunchConfig_t), "config");
SAME_FIELD(standin_cudaLaunchConfig_t, cudaLaunchConfig_t, blockDim);
SAME_FIELD(standin_cudaLaunchConfig_t, cudaLaunchConfig_t, dynamicSmemBytes);
SAME_FIELD(standin_cudaLaunchConfig_t, cudaLaunchConfig_t, stream);
SAME_FIELD(standin_cudaLaunchConfig_t, cudaLaunchConfig_t, attrs);
SAME_FIELD(standin_cudaLaunchConfig_t, cudaLaunchConfig_t, numAttrs);
_Static_assert(sizeof(standin_CUlaunchConfig) == sizeof(CUlaunchConfig), "CUlaunchConfig");
SAME_FIELD(standin_CUlaunchConfig, CUlaunchConfig, sharedMemBytes);
SAME_FIELD(standin_CUlaunchConfig, CUlaunchConfig, hStream);
SAME_FIELD(standin_CUlaunchConfig, CUlaunchConfig, attrs);
SAME_FIELD(standin_CUlaunchConfig, CUlaunchConfig, numAttrs);
#endif

/* cudaSuccess, and the few error codes used here; the runtime's numbering. Driver
 * errors are passed through: CUDA_ERROR_INVALID_VALUE and _OUT_OF_MEMORY share the
 * runtime's numbers (1, 2). */
#define STANDIN_SUCCESS 0
#define STANDIN_ERROR_INVALID_VALUE 1
#define STANDIN_ERROR_INSUFFICIENT_DRIVER 35

#define EXPORT __attribute__((visibility("default")))

/* ---- the driver, loaded once on first use like the real runtime does --------------- */

#define LAUNCH_ARGS                                                                         \
    CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,       \
        unsigned int, unsigned int, CUstream, void **

static struct {
    CUresult (*launch)(LAUNCH_ARGS, void **);
    CUresult (*launch_ptsz)(LAUNCH_ARGS, void **);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*launch_coop)(LAUNCH_ARGS);
    CUresult (*graph)(CUgraphExec, CUstream);
    CUresult (*graph_ptsz)(CUgraphExec, CUstream);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free)(CUdeviceptr);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*stream_sync_ptsz)(CUstream);
    CUresult (*ctx_sync)(void);
    CUresult (*event_sync)(CUevent);
} drv;

#ifdef STANDIN_CHECK_HEADERS
/* The driver pointers match cuda.h's declarations (the _ptsz ones share their
 * plain twins' signatures). */
SAME(__typeof__(*drv.launch), __typeof__(cuLaunchKernel));
SAME(__typeof__(*drv.launch_ptsz), __typeof__(cuLaunchKernel));
SAME(__typeof__(*drv.launch_ex), __typeof__(cuLaunchKernelEx));
SAME(__typeof__(*drv.launch_coop), __typeof__(cuLaunchCooperativeKernel));
SAME(__typeof__(*drv.graph), __typeof__(cuGraphLaunch));
SAME(__typeof__(*drv.graph_ptsz), __typeof__(cuGraphLaunch));
SAME(__typeof__(*drv.alloc), __typeof__(cuMemAlloc_v2));
SAME(__typeof__(*drv.alloc_managed), __typeof__(cuMemAllocManaged));
SAME(__typeof__(*drv.alloc_async), __typeof__(cuMemAllocAsync));
SAME(__typeof__(*drv.free), __typeof__(cuMemFree_v2));
SAME(__typeof__(*drv.free_async), __typeof__(cuMemFreeAsync));
SAME(__typeof__(*drv.stream_sync), __typeof__(cuStreamSynchronize));
SAME(__typeof__(*drv.stream_sync_ptsz), __typeof__(cuStreamSynchronize));
SAME(__typeof__(*drv.ctx_sync), __typeof__(cuCtxSynchronize));
SAME(__typeof__(*drv.event_sync), __typeof__(cuEventSynchronize));
#endif

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static int drv_ok;

static void *need(void *lib, const char *name) {
    void *sym = dlsym(lib, name);
    if (sym == NULL) fprintf(stderr, "libcudart stand-in: libcuda.so.1 lacks %s\n", name);
    return sym;
}

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        fprintf(stderr, "libcudart stand-in: %s\n", dlerror());
        return;
    }
    /* Function pointers from dlsym: POSIX guarantees the conversion. */
    *(void **)&drv.launch = need(lib, "cuLaunchKernel");
    *(void **)&drv.launch_ptsz = need(lib, "cuLaunchKernel_ptsz");
    *(void **)&drv.launch_ex = need(lib, "cuLaunchKernelEx");
    *(void **)&drv.launch_coop = need(lib, "cuLaunchCooperativeKernel");
    *(void **)&drv.graph = need(lib, "cuGraphLaunch");
    *(void **)&drv.graph_ptsz = need(lib, "cuGraphLaunch_ptsz");
    *(void **)&drv.alloc = need(lib, "cuMemAlloc_v2");
    *(void **)&drv.alloc_managed = need(lib, "cuMemAllocManaged");
    *(void **)&drv.alloc_async = need(lib, "cuMemAllocAsync");
    *(void **)&drv.free = need(lib, "cuMemFree_v2");
    *(void **)&drv.free_async = need(lib, "cuMemFreeAsync");
    *(void **)&drv.stream_sync = need(lib, "cuStreamSynchronize");
    *(void **)&drv.stream_sync_ptsz = need(lib, "cuStreamSynchronize_ptsz");
    *(void **)&drv.ctx_sync = need(lib, "cuCtxSynchronize");
    *(void **)&drv.event_sync = need(lib, "cuEventSynchronize");
    void **slots = (void **)&drv;
    for (size_t i = 0; i < sizeof drv / sizeof(void *); i++)
        if (slots[i] == NULL) return;
    drv_ok = 1;
}

/* Driver error codes that matter here (invalid value, out of memory) have the same
 * numbers in the runtime's enum, so the mapping is a cast. */
/* Like the real runtime, every call keeps the driver's failure as the thread's last error
 * (cudaGetLastError). That work after the driver returns is also why the runtime never
 * tail-calls the driver: the driver call returns into the runtime, which is how the tracer
 * tells the runtime's own driver calls from the application's. */
static __thread cudaError_t last_error;

static cudaError_t rt(CUresult r) {
    cudaError_t e = (cudaError_t)r;
    if (e != 0)
        last_error = e;
    return e;
}

EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = 0;
    return e;
}

/* Evaluates to an error return when the driver cannot be loaded. */
#define DRIVER                                                          \
    do {                                                                \
        pthread_once(&drv_once, load_driver);                           \
        if (!drv_ok) return STANDIN_ERROR_INSUFFICIENT_DRIVER;          \
    } while (0)

/* ---- runtime API ------------------------------------------------------------------------ */

/* The real runtime maps a host stub to its CUfunction; here the stub pointer itself
 * stands for the function handle (the stand-in driver never dereferences it). */
#define KERNEL(func) ((CUfunction)(void *)(func))
#define DIMS(g, b) g.x, g.y, g.z, b.x, b.y, b.z

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream) {
    DRIVER;
    return rt(drv.launch(KERNEL(func), DIMS(gridDim, blockDim), (unsigned int)sharedMem, stream, args,
                      NULL));
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream) {
    DRIVER;
    return rt(drv.launch_ptsz(KERNEL(func), DIMS(gridDim, blockDim), (unsigned int)sharedMem, stream,
                           args, NULL));
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                       void **args) {
    if (config == NULL) return STANDIN_ERROR_INVALID_VALUE;
    DRIVER;
    /* The real runtime translates the configuration the same way. */
    L(CUlaunchConfig) cfg = {
        DIMS(config->gridDim, config->blockDim),
        (unsigned int)config->dynamicSmemBytes,
        config->stream,
        (void *)config->attrs,
        config->numAttrs,
    };
    return rt(drv.launch_ex((const CUlaunchConfig *)(const void *)&cfg, KERNEL(func), args, NULL));
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                               void **args, size_t sharedMem,
                                               cudaStream_t stream) {
    DRIVER;
    return rt(drv.launch_coop(KERNEL(func), DIMS(gridDim, blockDim), (unsigned int)sharedMem, stream,
                           args));
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    DRIVER;
    return rt(drv.graph(graphExec, stream));
}

EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
    DRIVER;
    return rt(drv.graph_ptsz(graphExec, stream));
}

/* Allocations: a NULL out pointer fails here without reaching the driver; a zero size
 * reaches the driver, which fails it. Either way nothing is written, and a tracer must
 * count neither as an allocation. */
EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
    if (devPtr == NULL) return STANDIN_ERROR_INVALID_VALUE;
    DRIVER;
    CUdeviceptr d = 0;
    CUresult r = drv.alloc(&d, size);
    if (r == STANDIN_SUCCESS) *devPtr = (void *)(size_t)d;
    return rt(r);
}

EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
    if (devPtr == NULL) return STANDIN_ERROR_INVALID_VALUE;
    DRIVER;
    CUdeviceptr d = 0;
    CUresult r = drv.alloc_managed(&d, size, flags);
    if (r == STANDIN_SUCCESS) *devPtr = (void *)(size_t)d;
    return rt(r);
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream) {
    if (devPtr == NULL) return STANDIN_ERROR_INVALID_VALUE;
    DRIVER;
    CUdeviceptr d = 0;
    CUresult r = drv.alloc_async(&d, size, hStream);
    if (r == STANDIN_SUCCESS) *devPtr = (void *)(size_t)d;
    return rt(r);
}

/* cudaFree(NULL) is a successful no-op in the real runtime (programs call it to
 * create the context), so it does not reach the driver here either. */
EXPORT cudaError_t cudaFree(void *devPtr) {
    DRIVER;
    if (devPtr == NULL) return STANDIN_SUCCESS;
    return rt(drv.free((CUdeviceptr)(size_t)devPtr));
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
    DRIVER;
    if (devPtr == NULL) return STANDIN_SUCCESS;
    return rt(drv.free_async((CUdeviceptr)(size_t)devPtr, hStream));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    DRIVER;
    return rt(drv.stream_sync(stream));
}

EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
    DRIVER;
    return rt(drv.stream_sync_ptsz(stream));
}

EXPORT cudaError_t cudaDeviceSynchronize(void) {
    DRIVER;
    return rt(drv.ctx_sync());
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    DRIVER;
    return rt(drv.event_sync(event));
}

#ifdef STANDIN_CHECK_HEADERS
/* cuda_runtime_api.h declares the _ptsz entry points only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, where they replace the plain names; they share
 * the plain ones' signatures. */
SAME(__typeof__(cudaLaunchKernel_ptsz), __typeof__(cudaLaunchKernel));
SAME(__typeof__(cudaGraphLaunch_ptsz), __typeof__(cudaGraphLaunch));
SAME(__typeof__(cudaStreamSynchronize_ptsz), __typeof__(cudaStreamSynchronize));
#endif
