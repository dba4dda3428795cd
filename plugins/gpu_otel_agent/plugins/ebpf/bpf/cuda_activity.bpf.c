// SPDX-License-Identifier: GPL-2.0
/* Per-process CUDA activity from uprobes on the CUDA runtime and driver APIs, and process
 * exec/exit from the scheduler's tracepoints.
 *
 * CO-RE: compiled once against a vmlinux.h generated from the build machine's BTF; libbpf
 * relocates the few kernel fields read here (task_struct pid/tgid) against the running kernel.
 * Counters live in the `stats` hash map that the agent reads once a cycle; only process
 * lifecycle goes through the ring buffer, so a busy process costs one map update per call and
 * no wake-up of the agent. Which function each program is attached to: plugins/ebpf/symbols.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cuda_activity.h"

char LICENSE[] SEC("license") = "GPL";

#define API_RUNTIME 1u
#define API_DRIVER 2u

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, struct cuda_stats);
} stats SEC(".maps");

struct allocation_key {
	__u32 tgid;
	__u32 reserved;
	__u64 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* resized by the agent before load (ebpf.max_allocations) */
	__type(key, struct allocation_key);
	__type(value, __u64); /* bytes */
} allocations SEC(".maps");

struct pending_allocation {
	__u64 out;  /* where the callee writes the address */
	__u64 size;
	__u32 api;
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid: the calling thread */
	__type(value, struct pending_allocation);
} pending_allocations SEC(".maps");

struct pending_sync {
	__u64 start_ns;
	__u32 api;
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct pending_sync);
} pending_syncs SEC(".maps");

/* The CUDA runtime library files being traced, by file system and inode (written by the agent
 * as it attaches them): a driver call made from code in one of them is the runtime's own. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct library_file);
	__type(value, __u8);
} runtime_files SEC(".maps");

/* The PIDs whose exec/exit the workload resolver wants (GPU processes it holds), written by
 * the agent as they change: every other process's events end here, not in user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WATCHED_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} watched_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct settings);
} settings SEC(".maps");

static __always_inline void count(__u32 index)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &index);
	if (value)
		__sync_fetch_and_add(value, 1);
}

static __always_inline struct cuda_stats *stats_of(__u32 tgid)
{
	struct cuda_stats *found = bpf_map_lookup_elem(&stats, &tgid);
	if (found)
		return found;
	struct cuda_stats zero = {};
	bpf_map_update_elem(&stats, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&stats, &tgid);
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

struct caller {
	__u64 address;
	__u32 in_runtime;
};

static long in_runtime_file(struct task_struct *task, struct vm_area_struct *vma,
			    struct caller *caller)
{
	struct file *file = BPF_CORE_READ(vma, vm_file);
	if (!file)
		return 0;
	struct library_file key = {
		.device = BPF_CORE_READ(file, f_inode, i_sb, s_dev),
		.inode = BPF_CORE_READ(file, f_inode, i_ino),
	};
	if (bpf_map_lookup_elem(&runtime_files, &key))
		caller->in_runtime = 1;
	return 0;
}

/* At a function's first instruction the return address is on top of the stack: a driver call
 * that returns into a traced CUDA runtime is the runtime forwarding one of its own calls, which
 * its probe has already counted. (The runtime never tail-calls the driver: it translates the
 * driver's result and keeps it as the thread's last error after the call returns.) A driver
 * call from anywhere else (the application, CuPy, a statically linked runtime) is counted. */
static __always_inline int called_by_runtime(struct pt_regs *ctx)
{
	struct caller caller = {};
	if (bpf_probe_read_user(&caller.address, sizeof(caller.address), (void *)PT_REGS_SP(ctx)))
		return 0;
	bpf_find_vma(bpf_get_current_task_btf(), caller.address, in_runtime_file, &caller, 0);
	return caller.in_runtime;
}

static __always_inline struct cuda_stats *counted(struct pt_regs *ctx, __u32 api)
{
	if (api == API_DRIVER && called_by_runtime(ctx))
		return 0;
	return stats_of(current_tgid());
}

/* -- launches ------------------------------------------------------------------------------ */

static __always_inline int launch(struct pt_regs *ctx, __u32 api, int graph)
{
	struct cuda_stats *s = counted(ctx, api);
	if (!s)
		return 0;
	if (graph)
		__sync_fetch_and_add(&s->graph_launches, 1);
	else
		__sync_fetch_and_add(&s->kernel_launches, 1);
	return 0;
}

SEC("uprobe")
int runtime_launch(struct pt_regs *ctx) { return launch(ctx, API_RUNTIME, 0); }

SEC("uprobe")
int runtime_graph(struct pt_regs *ctx) { return launch(ctx, API_RUNTIME, 1); }

SEC("uprobe")
int driver_launch(struct pt_regs *ctx) { return launch(ctx, API_DRIVER, 0); }

SEC("uprobe")
int driver_graph(struct pt_regs *ctx) { return launch(ctx, API_DRIVER, 1); }

/* -- memory -------------------------------------------------------------------------------- */

/* Entry: remember where the address will be written; return: if the call succeeded, read it. */
static __always_inline int allocation_entry(struct pt_regs *ctx, __u32 api)
{
	if (!counted(ctx, api))
		return 0;
	struct pending_allocation pending = {
		.out = PT_REGS_PARM1(ctx), .size = PT_REGS_PARM2(ctx), .api = api,
	};
	__u64 thread = bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&pending_allocations, &thread, &pending, BPF_ANY))
		count(COUNTER_PENDING_FULL);
	return 0;
}

static __always_inline int allocation_return(struct pt_regs *ctx, __u32 api)
{
	__u64 thread = bpf_get_current_pid_tgid();
	struct pending_allocation *pending = bpf_map_lookup_elem(&pending_allocations, &thread);
	if (!pending || pending->api != api)
		return 0; /* a nested driver call inside a runtime call: the runtime's return counts */
	struct pending_allocation call = *pending;
	bpf_map_delete_elem(&pending_allocations, &thread);
	if (PT_REGS_RC(ctx) != 0 || call.size == 0)
		return 0; /* failed: nothing was allocated */
	struct allocation_key key = { .tgid = thread >> 32 };
	if (bpf_probe_read_user(&key.address, sizeof(key.address), (void *)call.out))
		return 0;
	struct cuda_stats *s = stats_of(key.tgid);
	if (!s)
		return 0;
	if (bpf_map_update_elem(&allocations, &key, &call.size, BPF_ANY)) {
		count(COUNTER_ALLOCATIONS_FULL);
		return 0; /* untracked: its free would not find it, so it is not added either */
	}
	__s64 now = __sync_fetch_and_add(&s->allocated, call.size) + call.size;
	if (now > 0 && (__u64)now > s->peak)
		s->peak = now; /* racy between threads; a peak is a peak within a few calls */
	__sync_fetch_and_add(&s->allocations, 1);
	return 0;
}

static __always_inline int release(struct pt_regs *ctx, __u32 api)
{
	__u64 address = PT_REGS_PARM1(ctx);
	struct cuda_stats *s = counted(ctx, api);
	if (!s || address == 0)
		return 0;
	struct allocation_key key = { .tgid = current_tgid(), .address = address };
	__u64 *size = bpf_map_lookup_elem(&allocations, &key);
	if (!size) {
		__sync_fetch_and_add(&s->untracked_frees, 1);
		return 0;
	}
	__u64 bytes = *size;
	if (bpf_map_delete_elem(&allocations, &key) == 0) { /* two threads freeing: one wins */
		__sync_fetch_and_add(&s->allocated, -(__s64)bytes);
		__sync_fetch_and_add(&s->frees, 1);
	}
	return 0;
}

SEC("uprobe")
int runtime_alloc(struct pt_regs *ctx) { return allocation_entry(ctx, API_RUNTIME); }

SEC("uretprobe")
int runtime_alloc_ret(struct pt_regs *ctx) { return allocation_return(ctx, API_RUNTIME); }

SEC("uprobe")
int driver_alloc(struct pt_regs *ctx) { return allocation_entry(ctx, API_DRIVER); }

SEC("uretprobe")
int driver_alloc_ret(struct pt_regs *ctx) { return allocation_return(ctx, API_DRIVER); }

SEC("uprobe")
int runtime_free(struct pt_regs *ctx) { return release(ctx, API_RUNTIME); }

SEC("uprobe")
int driver_free(struct pt_regs *ctx) { return release(ctx, API_DRIVER); }

/* -- synchronisation ----------------------------------------------------------------------- */

static __always_inline int sync_entry(struct pt_regs *ctx, __u32 api)
{
	if (!counted(ctx, api))
		return 0;
	struct pending_sync pending = { .start_ns = bpf_ktime_get_ns(), .api = api };
	__u64 thread = bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&pending_syncs, &thread, &pending, BPF_ANY))
		count(COUNTER_PENDING_FULL);
	return 0;
}

static __always_inline int sync_return(__u32 api)
{
	__u64 thread = bpf_get_current_pid_tgid();
	struct pending_sync *pending = bpf_map_lookup_elem(&pending_syncs, &thread);
	if (!pending || pending->api != api)
		return 0;
	__u64 elapsed = bpf_ktime_get_ns() - pending->start_ns;
	bpf_map_delete_elem(&pending_syncs, &thread);
	struct cuda_stats *s = stats_of(thread >> 32);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->sync_ns, elapsed);
	__sync_fetch_and_add(&s->syncs, 1);
	return 0;
}

SEC("uprobe")
int runtime_sync(struct pt_regs *ctx) { return sync_entry(ctx, API_RUNTIME); }

SEC("uretprobe")
int runtime_sync_ret(struct pt_regs *ctx) { return sync_return(API_RUNTIME); }

SEC("uprobe")
int driver_sync(struct pt_regs *ctx) { return sync_entry(ctx, API_DRIVER); }

SEC("uretprobe")
int driver_sync_ret(struct pt_regs *ctx) { return sync_return(API_DRIVER); }

/* -- process lifecycle --------------------------------------------------------------------- */

static long forget_allocation(struct bpf_map *map, struct allocation_key *key, __u64 *size,
			      __u32 *tgid)
{
	if (key->tgid == *tgid)
		bpf_map_delete_elem(map, key);
	return 0;
}

/* Sends the event; a process with CUDA counters hands them over and leaves the maps. */
static __always_inline void lifecycle(__u32 kind, __u32 tgid)
{
	struct cuda_stats *s = bpf_map_lookup_elem(&stats, &tgid);
	__u32 zero = 0;
	struct settings *config = bpf_map_lookup_elem(&settings, &zero);
	if (!s && !(config && (config->lifecycle_all ||
			       (config->lifecycle_watched &&
				bpf_map_lookup_elem(&watched_pids, &tgid)))))
		return;
	struct lifecycle_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		count(COUNTER_EVENTS_LOST);
		return; /* the counters stay in the map; the agent's reconciliation finds them */
	}
	event->kind = kind;
	event->tgid = tgid;
	event->reserved = 0;
	if (s) {
		event->has_stats = 1;
		__builtin_memcpy(&event->stats, s, sizeof(event->stats));
		bpf_map_delete_elem(&stats, &tgid);
		bpf_for_each_map_elem(&allocations, forget_allocation, &tgid, 0);
	} else {
		event->has_stats = 0;
		__builtin_memset(&event->stats, 0, sizeof(event->stats));
	}
	bpf_ringbuf_submit(event, 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(process_exec, struct task_struct *task)
{
	lifecycle(EVENT_EXEC, BPF_CORE_READ(task, tgid));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *task)
{
	if (BPF_CORE_READ(task, pid) != BPF_CORE_READ(task, tgid))
		return 0; /* a thread, not the process */
	lifecycle(EVENT_EXIT, BPF_CORE_READ(task, tgid));
	return 0;
}
