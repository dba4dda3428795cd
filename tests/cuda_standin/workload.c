/* Test workload for the CUDA tracer: a program linked against the stand-in
 * libcudart.so.12 (RUNPATH $ORIGIN) that also calls libcuda.so.1 directly through
 * dlsym, as CuPy does. A driver (driver.py) sends one command per line on stdin; each
 * command prints exactly one line, "ok ..." or "error <reason>", and flushes, so the
 * driver knows when the calls are done. At start it prints "ready <pid>" once both
 * libraries are mapped. Commands (N counts, BYTES sizes, ID allocation ids):
 *
 *   launch N [plain|ptsz|ex|coop]   cudaLaunchKernel (or a variant) N times -> ok N
 *   launch_driver N                 cuLaunchKernel N times                   -> ok N
 *   graph N [plain|ptsz]            cudaGraphLaunch N times                  -> ok N
 *   malloc|malloc_driver|managed|malloc_async BYTES  allocate               -> ok ID ADDRESS
 *   free|free_driver|free_async ID  release an allocation                   -> ok BYTES
 *   fail_malloc                     cudaMalloc of 0 bytes, which must fail   -> ok ERROR_CODE
 *   sync stream|stream_ptsz|device|event N DELAY_NS  N syncs, each sleeping
 *                                   DELAY_NS in the driver                  -> ok ELAPSED_NS
 *   spin N                          N cudaLaunchKernel back to back          -> ok ELAPSED_NS
 *   busy RATE SECONDS               cudaLaunchKernel at RATE/s for SECONDS   -> ok CALLS ELAPSED_NS
 *   driver_calls [NAME]             driver entry calls so far (all, or one) -> ok COUNT
 *   start_cgroup                    /proc/self/cgroup as read first thing in main,
 *                                   its lines joined by '|'                  -> ok LINES
 *   pid                             -> ok PID
 *   exit                            -> ok bye, then exits 0
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef STANDIN_CHECK_HEADERS
#include <cuda_runtime_api.h>
#else
typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct dim3 { unsigned int x, y, z; } dim3;
typedef struct cudaLaunchConfig_st {
    dim3 gridDim;
    dim3 blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    void *attrs;
    unsigned int numAttrs;
} cudaLaunchConfig_t;
cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **);
cudaError_t cudaLaunchCooperativeKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaMallocManaged(void **, size_t, unsigned int);
cudaError_t cudaMallocAsync(void **, size_t, cudaStream_t);
cudaError_t cudaFree(void *);
cudaError_t cudaFreeAsync(void *, cudaStream_t);
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaEventSynchronize(cudaEvent_t);
#endif
/* Not declared by the header unless CUDA_API_PER_THREAD_DEFAULT_STREAM is set, which
 * would rename the plain calls too; declared by hand so both can be called. */
cudaError_t cudaLaunchKernel_ptsz(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

/* Driver entry points called directly (dlsym, like CuPy's driver module). */
static struct {
    CUresult (*launch)(void *, unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int, void *, void **, void **);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    void (*set_sync_delay)(unsigned long long);
    unsigned long long (*calls)(void);
    unsigned long long (*call_count)(const char *);
} drv;

/* Stand-ins for handles a real program gets from the runtime; the stand-in driver
 * only checks they are not NULL. */
static void fake_kernel(void) {}
static char fake_graph_exec, fake_event;
#define KERNEL ((const void *)(size_t)&fake_kernel)
#define GRAPH ((cudaGraphExec_t)(void *)&fake_graph_exec)
#define EVENT ((cudaEvent_t)(void *)&fake_event)

static const dim3 grid = {1, 1, 1}, block = {32, 1, 1};

struct allocation {
    unsigned long long address;
    size_t bytes;
    int live;
};
static struct allocation *allocations;
static size_t n_allocations, cap_allocations;

static char start_cgroup[4096] = "unknown";

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}

/* A whole non-negative number, or -1. */
static long long number(const char *s) {
    if (s == NULL || *s == '\0') return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return (*end != '\0' || errno || v < 0) ? -1 : v;
}

static void *need(void *lib, const char *name) {
    void *sym = dlsym(lib, name);
    if (sym == NULL) {
        fprintf(stderr, "workload: %s\n", dlerror());
        exit(2);
    }
    return sym;
}

static int launch_once(const char *variant) {
    if (strcmp(variant, "plain") == 0)
        return cudaLaunchKernel(KERNEL, grid, block, NULL, 0, NULL);
    if (strcmp(variant, "ptsz") == 0)
        return cudaLaunchKernel_ptsz(KERNEL, grid, block, NULL, 0, NULL);
    if (strcmp(variant, "coop") == 0)
        return cudaLaunchCooperativeKernel(KERNEL, grid, block, NULL, 0, NULL);
    cudaLaunchConfig_t config;
    memset(&config, 0, sizeof config);
    config.gridDim = grid;
    config.blockDim = block;
    return cudaLaunchKernelExC(&config, KERNEL, NULL);
}

static void cmd_launch(long long n, const char *variant) {
    static const char *const variants[] = {"plain", "ptsz", "ex", "coop"};
    int known = 0;
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++)
        known |= strcmp(variant, variants[i]) == 0;
    if (!known) return reply("error unknown launch variant %s", variant);
    for (long long i = 0; i < n; i++) {
        int r = launch_once(variant);
        if (r != 0) return reply("error launch %s returned %d after %lld", variant, r, i);
    }
    reply("ok %lld", n);
}

static void cmd_launch_driver(long long n) {
    for (long long i = 0; i < n; i++) {
        int r = drv.launch((void *)(size_t)&fake_kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        if (r != 0) return reply("error cuLaunchKernel returned %d after %lld", r, i);
    }
    reply("ok %lld", n);
}

static void cmd_graph(long long n, const char *variant) {
    int ptsz = strcmp(variant, "ptsz") == 0;
    if (!ptsz && strcmp(variant, "plain") != 0)
        return reply("error unknown graph variant %s", variant);
    for (long long i = 0; i < n; i++) {
        int r = ptsz ? cudaGraphLaunch_ptsz(GRAPH, NULL) : cudaGraphLaunch(GRAPH, NULL);
        if (r != 0) return reply("error graph launch returned %d after %lld", r, i);
    }
    reply("ok %lld", n);
}

static void cmd_malloc(const char *kind, long long bytes) {
    if (bytes <= 0) return reply("error %s needs a positive size", kind);
    void *p = NULL;
    CUdeviceptr d = 0;
    int r;
    if (strcmp(kind, "malloc") == 0) r = cudaMalloc(&p, (size_t)bytes);
    else if (strcmp(kind, "managed") == 0) r = cudaMallocManaged(&p, (size_t)bytes, 1);
    else if (strcmp(kind, "malloc_async") == 0) r = cudaMallocAsync(&p, (size_t)bytes, NULL);
    else r = drv.alloc(&d, (size_t)bytes);
    if (r != 0) return reply("error %s returned %d", kind, r);
    if (p != NULL) d = (CUdeviceptr)(size_t)p;
    if (n_allocations == cap_allocations) {
        cap_allocations = cap_allocations ? cap_allocations * 2 : 64;
        allocations = realloc(allocations, cap_allocations * sizeof *allocations);
        if (allocations == NULL) {
            perror("workload: realloc");
            exit(2);
        }
    }
    allocations[n_allocations] = (struct allocation){d, (size_t)bytes, 1};
    reply("ok %zu 0x%llx", n_allocations++, d);
}

static void cmd_free(const char *kind, long long id) {
    if (id < 0 || (size_t)id >= n_allocations) return reply("error no allocation %lld", id);
    struct allocation *a = &allocations[id];
    if (!a->live) return reply("error allocation %lld already freed", id);
    int r;
    if (strcmp(kind, "free") == 0) r = cudaFree((void *)(size_t)a->address);
    else if (strcmp(kind, "free_async") == 0) r = cudaFreeAsync((void *)(size_t)a->address, NULL);
    else r = drv.free(a->address);
    if (r != 0) return reply("error %s returned %d", kind, r);
    a->live = 0;
    reply("ok %zu", a->bytes);
}

static void cmd_fail_malloc(void) {
    void *p = (void *)(size_t)0x5a5a;
    int r = cudaMalloc(&p, 0);
    if (r == 0) return reply("error cudaMalloc of 0 bytes succeeded");
    if (p != (void *)(size_t)0x5a5a) return reply("error failed cudaMalloc wrote its pointer");
    reply("ok %d", r);
}

static void cmd_sync(const char *kind, long long n, long long delay) {
    int k = strcmp(kind, "stream") == 0        ? 0
            : strcmp(kind, "stream_ptsz") == 0 ? 1
            : strcmp(kind, "device") == 0      ? 2
            : strcmp(kind, "event") == 0       ? 3
                                               : -1;
    if (k < 0) return reply("error unknown sync kind %s", kind);
    drv.set_sync_delay((unsigned long long)delay);
    unsigned long long t0 = now_ns();
    for (long long i = 0; i < n; i++) {
        int r = k == 0   ? cudaStreamSynchronize(NULL)
                : k == 1 ? cudaStreamSynchronize_ptsz(NULL)
                : k == 2 ? cudaDeviceSynchronize()
                         : cudaEventSynchronize(EVENT);
        if (r != 0) {
            drv.set_sync_delay(0);
            return reply("error sync %s returned %d after %lld", kind, r, i);
        }
    }
    unsigned long long elapsed = now_ns() - t0;
    drv.set_sync_delay(0);
    reply("ok %llu", elapsed);
}

static void cmd_spin(long long n) {
    unsigned long long t0 = now_ns();
    for (long long i = 0; i < n; i++)
        if (cudaLaunchKernel(KERNEL, grid, block, NULL, 0, NULL) != 0)
            return reply("error cudaLaunchKernel failed after %lld", i);
    reply("ok %llu", now_ns() - t0);
}

/* Paced launches: every millisecond tick, catch up to RATE * elapsed calls, then sleep
 * to the next tick, so the program's own CPU stays small and the tracer's share of a
 * core at that rate can be measured. */
static void cmd_busy(double rate, double seconds) {
    const unsigned long long tick = 1000000ULL;
    unsigned long long t0 = now_ns(), end = t0 + (unsigned long long)(seconds * 1e9);
    unsigned long long made = 0, now = t0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (now < end) {
        unsigned long long due = (unsigned long long)(rate * (double)(now - t0) / 1e9);
        for (; made < due; made++)
            if (cudaLaunchKernel(KERNEL, grid, block, NULL, 0, NULL) != 0)
                return reply("error cudaLaunchKernel failed after %llu", made);
        next.tv_nsec += (long)tick;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec += 1;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
        now = now_ns();
    }
    reply("ok %llu %llu", made, now - t0);
}

static void run(char *line) {
    char *save = NULL;
    char *cmd = strtok_r(line, " \t\r\n", &save);
    char *a1 = strtok_r(NULL, " \t\r\n", &save);
    char *a2 = strtok_r(NULL, " \t\r\n", &save);
    char *a3 = strtok_r(NULL, " \t\r\n", &save);
    char *extra = strtok_r(NULL, " \t\r\n", &save);
    long long n1 = number(a1);
    if (cmd == NULL) return reply("error empty command");
    if (extra != NULL) return reply("error too many arguments");
#define ARGS(k) ((k) >= 1) == (a1 != NULL) && ((k) >= 2) == (a2 != NULL) && ((k) >= 3) == (a3 != NULL)
    if (strcmp(cmd, "launch") == 0 && a3 == NULL && n1 >= 0)
        return cmd_launch(n1, a2 ? a2 : "plain");
    if (strcmp(cmd, "launch_driver") == 0 && ARGS(1) && n1 >= 0) return cmd_launch_driver(n1);
    if (strcmp(cmd, "graph") == 0 && a3 == NULL && n1 >= 0) return cmd_graph(n1, a2 ? a2 : "plain");
    if ((strcmp(cmd, "malloc") == 0 || strcmp(cmd, "malloc_driver") == 0 ||
         strcmp(cmd, "managed") == 0 || strcmp(cmd, "malloc_async") == 0) &&
        ARGS(1) && n1 >= 0)
        return cmd_malloc(cmd, n1);
    if ((strcmp(cmd, "free") == 0 || strcmp(cmd, "free_driver") == 0 ||
         strcmp(cmd, "free_async") == 0) &&
        ARGS(1) && n1 >= 0)
        return cmd_free(cmd, n1);
    if (strcmp(cmd, "fail_malloc") == 0 && ARGS(0)) return cmd_fail_malloc();
    if (strcmp(cmd, "sync") == 0 && ARGS(3) && number(a2) >= 0 && number(a3) >= 0)
        return cmd_sync(a1, number(a2), number(a3));
    if (strcmp(cmd, "spin") == 0 && ARGS(1) && n1 >= 0) return cmd_spin(n1);
    if (strcmp(cmd, "busy") == 0 && ARGS(2)) {
        char *e1, *e2;
        double rate = strtod(a1, &e1), seconds = strtod(a2, &e2);
        if (*e1 || *e2 || !(rate > 0) || !(seconds >= 0) || seconds > 3600)
            return reply("error busy needs RATE > 0 and 0 <= SECONDS <= 3600");
        return cmd_busy(rate, seconds);
    }
    if (strcmp(cmd, "driver_calls") == 0 && a2 == NULL) {
        unsigned long long c = a1 ? drv.call_count(a1) : drv.calls();
        if (c == ~0ULL) return reply("error no driver entry point %s", a1);
        return reply("ok %llu", c);
    }
    if (strcmp(cmd, "start_cgroup") == 0 && ARGS(0)) return reply("ok %s", start_cgroup);
    if (strcmp(cmd, "pid") == 0 && ARGS(0)) return reply("ok %d", (int)getpid());
    if (strcmp(cmd, "exit") == 0 && ARGS(0)) {
        reply("ok bye");
        exit(0);
    }
    reply("error bad command or arguments: %s", cmd);
}

int main(void) {
    /* Recorded before anything else runs, so tests can tell in which cgroup the
     * process was when the loader mapped libcudart (a DT_NEEDED of this program). */
    FILE *cg = fopen("/proc/self/cgroup", "r");
    if (cg != NULL) {
        size_t got = fread(start_cgroup, 1, sizeof start_cgroup - 1, cg);
        start_cgroup[got] = '\0';
        /* One reply line: the file's lines joined by '|'. */
        for (char *c = start_cgroup; *c; c++)
            if (*c == '\n') *c = c[1] ? '|' : '\0';
        fclose(cg);
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        fprintf(stderr, "workload: %s\n", dlerror());
        return 2;
    }
    *(void **)&drv.launch = need(lib, "cuLaunchKernel");
    *(void **)&drv.alloc = need(lib, "cuMemAlloc_v2");
    *(void **)&drv.free = need(lib, "cuMemFree_v2");
    *(void **)&drv.set_sync_delay = need(lib, "standinSetSyncDelayNs");
    *(void **)&drv.calls = need(lib, "standinDriverCalls");
    *(void **)&drv.call_count = need(lib, "standinDriverCallCount");
    reply("ready %d", (int)getpid());
    char line[512];
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (strchr(line, '\n') == NULL && !feof(stdin)) {
            int c;
            while ((c = getchar()) != EOF && c != '\n') {
            }
            reply("error line too long");
            continue;
        }
        run(line);
    }
    return 0;
}
