/* Entering the jail: a private mount namespace in which the jail is the root. No Slurm
 * dependency, so a test harness runs it as root on its own (tests/test_jail_mounts.c). */
#ifndef SLURM_STACK_JAIL_MOUNTS_H
#define SLURM_STACK_JAIL_MOUNTS_H

#include <stddef.h>

#include "gpu_devices.h"
#include "jail_args.h"

/* Why the last call failed, for the slurmd log and the job's stderr. */
extern char jail_error[1024];

/*
 * In the calling process (slurmstepd, before it opens the job's files or changes into its
 * directory): a private mount namespace; the node-local pieces bound into the jail; a
 * private /tmp and /dev/shm for job `job_id`; then the jail becomes `/`. With `gpus`, the
 * jail's /dev is a fresh one with every entry of the pod's /dev but the GPU device nodes
 * other than these; without, it is the pod's /dev. Sets *gpu_bound when this node's GPU
 * driver files were bound in. Returns 0, or -1 with jail_error set.
 */
int jail_enter(const struct jail_config *cfg, unsigned int job_id, const struct gpu_devices *gpus,
	       int *gpu_bound);

/* Where a container step's image tree is mounted in its jail (its namespace only). */
#define CONTAINER_ROOT "/run/slurm-stack/container"

/*
 * As jail_enter (slurmstepd's root becomes the jail, so what it opens by path as root later,
 * its plugins, name service modules or PAM, never comes from a user's image), and the pod's
 * directory `rootfs` (an image's unpacked root, reached without following a symlink)
 * prepared at CONTAINER_ROOT for the step's tasks (--container-image): the same node-local
 * pieces, the jail's /home and, read-only, its /etc/passwd and /etc/group; the image's own
 * files read-only, nosuid and nodev. Each task then enters it with container_enter_task.
 * Returns 0, or -1 with jail_error set.
 */
int jail_enter_image(const struct jail_config *cfg, const char *rootfs, unsigned int job_id,
		     const struct gpu_devices *gpus, int *gpu_bound);

/* In a forked task, as root, before it becomes the job's user: chroot into CONTAINER_ROOT and
 * go to the same directory there. Returns 0, or -1 with jail_error set. */
int container_enter_task(void);

/*
 * After jail_enter failed: make `/` an empty, throwaway root with only the node-local pieces
 * slurmstepd itself needs (the munge socket, name service files, /proc), so that nothing the
 * step does next (open the job's files, change into its directory) reaches the pod's own
 * files, and the step can still report its tasks' failure. Keeps jail_error. Returns 0, or
 * -1 with jail_error set (the step must then fail).
 */
int jail_enter_void(const struct jail_config *cfg, unsigned int job_id);

#endif
