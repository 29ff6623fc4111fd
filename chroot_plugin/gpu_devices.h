/* Which GPU device nodes a job step may see. No Slurm dependency, so it is unit-tested on
 * its own (tests/test_gpu_devices.c). */
#ifndef SLURM_STACK_GPU_DEVICES_H
#define SLURM_STACK_GPU_DEVICES_H

#include <stddef.h>

#define GPU_MAX 64       /* GPUs per node */
#define GPU_PATH_MAX 64  /* /dev/nvidiaN */

struct gpu_devices {
	size_t n;
	char path[GPU_MAX][GPU_PATH_MAX]; /* device nodes, in the order Slurm indexes them */
	int index[GPU_MAX];               /* each one's index among the node's GPUs */
};

/*
 * The node's GPUs from `gres_conf`, the gres.conf lines the node's entrypoint wrote: the
 * File= of each line, in order (Slurm numbers a node's GPUs in that order). A missing file is
 * a node without GPUs. Returns 0, or -1 with a message in err.
 */
int gpu_read_node(const char *gres_conf, struct gpu_devices *node, char *err, size_t err_len);

/*
 * The node's GPUs whose indexes `list` names ("0,2": Slurm's CUDA_VISIBLE_DEVICES of a step,
 * global indexes without device cgroups; "" for none). Returns 0, or -1 with a message in err
 * for anything but such a list of indexes the node has.
 */
int gpu_select(const struct gpu_devices *node, const char *list, struct gpu_devices *step,
	       char *err, size_t err_len);

/*
 * A task's CUDA_VISIBLE_DEVICES as the task sees its GPUs: its step's GPUs are the only ones in
 * its /dev, so CUDA numbers them from 0 in index order. `task_list` holds the node indexes
 * Slurm gave the task (NULL: all of the step's); an index the step does not have is left out.
 * Writes e.g. "0,1" to out. Returns 0, or -1 if `task_list` is malformed or out too short.
 */
int gpu_task_list(const struct gpu_devices *step, const char *task_list, char *out,
		  size_t out_len);

/* Whether /dev entry `name` is a GPU device node (nvidia followed by digits only). */
int gpu_is_device_name(const char *name);

/* Whether `name` (a /dev entry) is one of `visible`'s device nodes. */
int gpu_is_visible(const struct gpu_devices *visible, const char *name);

#endif
