/* Stand-in CUDA driver (libcuda.so.1) for the eBPF tracer's tests.
 *
 * Exports the driver entry points the tracer attaches uprobes to, with the real
 * signatures (checked against cuda.h when compiled with -DSTANDIN_CHECK_HEADERS).
 * There is no GPU: launches do nothing, allocations hand out fake device addresses
 * from a bump allocator (distinct and non-overlapping, like real ones, so a tracer
 * keyed by address sees each allocation once), and the syncs sleep for a delay the
 * test sets, so sync time has a known lower bound.
 *
 * Test-only exports (prefix "standin"): the sync delay and per-entry-point call
 * counters, so tests can prove that each runtime call reached exactly one driver call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

/* Local ABI-equivalent types, so no CUDA toolkit is needed to build. With
 * STANDIN_CHECK_HEADERS the real cuda.h is included as well: the local types get a
 * prefix and are checked against the real ones by the static asserts, and the
 * functions below (written with the plain type names) are then compiled against the
 * real declarations, so any signature mismatch is a compile error. */
#ifdef STANDIN_CHECK_HEADERS
#include <cuda.h>
#define L(name) standin_##name
#else
#define L(name) name
#endif

typedef int L(CUresult); /* an enum in cuda.h: int-sized */
typedef unsigned long long L(CUdeviceptr);
typedef struct CUfunc_st *L(CUfunction);
typedef struct CUstream_st *L(CUstream);
typedef struct CUevent_st *L(CUevent);
typedef struct CUgraphExec_st *L(CUgraphExec);
typedef struct CUlaunchConfig_st L(CUlaunchConfig);

#ifdef STANDIN_CHECK_HEADERS
#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " != " #b)
_Static_assert(sizeof(standin_CUresult) == sizeof(CUresult), "CUresult size");
SAME(standin_CUdeviceptr, CUdeviceptr);
SAME(standin_CUfunction, CUfunction);
SAME(standin_CUstream, CUstream);
SAME(standin_CUevent, CUevent);
SAME(standin_CUgraphExec, CUgraphExec);
SAME(standin_CUlaunchConfig, CUlaunchConfig);
#endif

#define STANDIN_SUCCESS 0
#define STANDIN_ERROR_INVALID_VALUE 1

#define EXPORT __attribute__((visibility("default")))

/* ---- test-only state ------------------------------------------------------- */

enum entry {
    E_cuLaunchKernel, E_cuLaunchKernel_ptsz, E_cuLaunchKernelEx, E_cuLaunchCooperativeKernel,
    E_cuGraphLaunch, E_cuGraphLaunch_ptsz, E_cuMemAlloc_v2, E_cuMemAllocManaged,
    E_cuMemAllocAsync, E_cuMemFree_v2, E_cuMemFreeAsync, E_cuStreamSynchronize,
    E_cuStreamSynchronize_ptsz, E_cuCtxSynchronize, E_cuEventSynchronize, E_COUNT
};

static const char *const entry_names[E_COUNT] = {
    "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
    "cuGraphLaunch", "cuGraphLaunch_ptsz", "cuMemAlloc_v2", "cuMemAllocManaged",
    "cuMemAllocAsync", "cuMemFree_v2", "cuMemFreeAsync", "cuStreamSynchronize",
    "cuStreamSynchronize_ptsz", "cuCtxSynchronize", "cuEventSynchronize",
};

static unsigned long long calls[E_COUNT];
static unsigned long long sync_delay_ns;
/* Fake device addresses: a high, recognisable range, never dereferenced. */
static unsigned long long next_address = 0x7f0000000000ULL;

static void count(enum entry e) { __atomic_add_fetch(&calls[e], 1, __ATOMIC_RELAXED); }

EXPORT void standinSetSyncDelayNs(unsigned long long ns) {
    __atomic_store_n(&sync_delay_ns, ns, __ATOMIC_RELAXED);
}

/* Every driver entry call made so far in this process (all entry points). */
EXPORT unsigned long long standinDriverCalls(void) {
    unsigned long long total = 0;
    for (int i = 0; i < E_COUNT; i++) total += __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
    return total;
}

/* Calls of one entry point by its exported name; -1 (all bits) for an unknown name. */
EXPORT unsigned long long standinDriverCallCount(const char *name) {
    for (int i = 0; i < E_COUNT; i++)
        if (name && strcmp(name, entry_names[i]) == 0)
            return __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
    return ~0ULL;
}

/* ---- behaviour --------------------------------------------------------------- */

static CUresult sync_wait(void) {
    unsigned long long ns = __atomic_load_n(&sync_delay_ns, __ATOMIC_RELAXED);
    if (ns == 0) return STANDIN_SUCCESS;
    /* An absolute monotonic deadline, so a signal cannot shorten the wait: tests rely
     * on sync time being at least the delay. */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    unsigned long long total = (unsigned long long)deadline.tv_nsec + ns;
    deadline.tv_sec += (time_t)(total / 1000000000ULL);
    deadline.tv_nsec = (long)(total % 1000000000ULL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
    }
    return STANDIN_SUCCESS;
}

static CUresult allocate(CUdeviceptr *dptr, size_t bytesize) {
    /* Like the real driver: zero bytes or no out pointer fail and write nothing. */
    if (dptr == NULL || bytesize == 0) return STANDIN_ERROR_INVALID_VALUE;
    unsigned long long rounded = ((unsigned long long)bytesize + 255ULL) & ~255ULL;
    *dptr = __atomic_fetch_add(&next_address, rounded, __ATOMIC_RELAXED);
    return STANDIN_SUCCESS;
}

static CUresult release(CUdeviceptr dptr) {
    return dptr == 0 ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

/* ---- driver API ------------------------------------------------------------------ */

#define LAUNCH_PARAMS                                                                        \
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,  \
        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,             \
        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams

#define UNUSED_LAUNCH                                                                        \
    (void)f, (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, \
        (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams

EXPORT CUresult cuLaunchKernel(LAUNCH_PARAMS, void **extra) {
    UNUSED_LAUNCH, (void)extra;
    count(E_cuLaunchKernel);
    return f == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_PARAMS, void **extra) {
    UNUSED_LAUNCH, (void)extra;
    count(E_cuLaunchKernel_ptsz);
    return f == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                    void **kernelParams, void **extra) {
    (void)config, (void)kernelParams, (void)extra;
    count(E_cuLaunchKernelEx);
    return f == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_PARAMS) {
    UNUSED_LAUNCH;
    count(E_cuLaunchCooperativeKernel);
    return f == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    (void)hStream;
    count(E_cuGraphLaunch);
    return hGraphExec == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    (void)hStream;
    count(E_cuGraphLaunch_ptsz);
    return hGraphExec == NULL ? STANDIN_ERROR_INVALID_VALUE : STANDIN_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    count(E_cuMemAlloc_v2);
    return allocate(dptr, bytesize);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    (void)flags;
    count(E_cuMemAllocManaged);
    return allocate(dptr, bytesize);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    (void)hStream;
    count(E_cuMemAllocAsync);
    return allocate(dptr, bytesize);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    count(E_cuMemFree_v2);
    return release(dptr);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    (void)hStream;
    count(E_cuMemFreeAsync);
    return release(dptr);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    (void)hStream;
    count(E_cuStreamSynchronize);
    return sync_wait();
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    (void)hStream;
    count(E_cuStreamSynchronize_ptsz);
    return sync_wait();
}

EXPORT CUresult cuCtxSynchronize(void) {
    count(E_cuCtxSynchronize);
    return sync_wait();
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    count(E_cuEventSynchronize);
    return hEvent == NULL ? STANDIN_ERROR_INVALID_VALUE : sync_wait();
}

#ifdef STANDIN_CHECK_HEADERS
/* cuda.h declares the _ptsz entry points only under CUDA_API_PER_THREAD_DEFAULT_STREAM,
 * where they replace the plain names; they share the plain ones' signatures. */
SAME(__typeof__(cuLaunchKernel_ptsz), __typeof__(cuLaunchKernel));
SAME(__typeof__(cuGraphLaunch_ptsz), __typeof__(cuGraphLaunch));
SAME(__typeof__(cuStreamSynchronize_ptsz), __typeof__(cuStreamSynchronize));
#endif
