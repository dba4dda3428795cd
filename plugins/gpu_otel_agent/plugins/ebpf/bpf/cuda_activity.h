/* Layouts shared by the BPF programs (cuda_activity.bpf.c) and the agent, which mirrors them in
 * plugins/ebpf/layout.py; a test compares the two, so change both together. */
#ifndef CUDA_ACTIVITY_H
#define CUDA_ACTIVITY_H

/* A library file: the kernel's dev_t of its file system (MKDEV(major, minor), major shifted by
 * 20) and its inode, as /proc/PID/maps shows them. */
struct library_file {
	__u64 device;
	__u64 inode;
};

struct cuda_stats {
	__u64 kernel_launches;
	__u64 graph_launches;
	__u64 sync_ns;      /* time spent inside stream, device and event synchronisation */
	__u64 syncs;
	__s64 allocated;    /* bytes allocated and not yet freed through traced calls */
	__u64 peak;         /* the most `allocated` has been */
	__u64 allocations;
	__u64 frees;
	__u64 untracked_frees; /* frees of addresses whose allocation was never seen */
};

#define EVENT_EXEC 1u
#define EVENT_EXIT 2u

/* One process start (exec) or end, through the ring buffer. `has_stats` says `stats` holds the
 * process's final CUDA counters (it had some), which the program removes from the map at the
 * same moment, so the agent can fold them into its container's totals. */
struct lifecycle_event {
	__u32 kind;
	__u32 tgid;
	__u32 has_stats;
	__u32 reserved;
	struct cuda_stats stats;
};

/* Indexes of the `counters` array map: what the programs could not do. */
#define COUNTER_EVENTS_LOST 0      /* ring buffer full: an exec/exit the agent did not see */
#define COUNTER_ALLOCATIONS_FULL 1 /* allocation table full: an allocation not tracked */
#define COUNTER_PENDING_FULL 2     /* too many calls in flight to pair entry and return */
#define COUNTERS 3
#define WATCHED_PIDS 16384 /* more GPU processes than this: every process's exec/exit is sent */

/* Index 0 of the `settings` array map, written by the agent after loading. */
struct settings {
	__u32 lifecycle_all; /* 1: send exec/exit of every process (the resolver's event source) */
	__u32 lifecycle_watched; /* 1: and of the processes in `watched_pids` (the resolver's) */
};

#endif
