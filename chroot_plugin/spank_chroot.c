/*
 * spank_chroot: every job step enters the shared root filesystem (the jail).
 *
 * slurmstepd itself enters it, before it opens the job's input and output files, changes
 * into the job's directory or starts a task (slurm_spank_init_post_opt, remote context), so
 * every path a job names resolves inside the jail and none reaches the pod's own files. Its
 * mount namespace gets the node-local pieces (/proc, /sys, /dev, the munge socket, the
 * slurmd spool with the batch script, the node's submounts, and read-only the node's name
 * service files, the project's library directory and, on GPU nodes, this node's staged
 * driver files), a /tmp and /dev/shm private to the job, and then the jail as `/`
 * (jail_mounts.c). If that fails the step gets an empty root instead and each task fails
 * with a message in its stderr and the slurmd log: a task never runs on the pod's own
 * filesystem by accident.
 *
 * Each task then loses every capability root in the jail does not need from its bounding
 * set, and a task of an ordinary user gets no_new_privs (task_limits.c). On GPU nodes the
 * task's PATH and LD_LIBRARY_PATH lead to the driver files first, so the jail's software
 * uses the driver that matches this node's kernel module.
 *
 * With gpus=FILE (GPU nodes without device cgroups) a step sees only its own GPUs: its /dev
 * has the device nodes of the GPUs Slurm gave it (CUDA_VISIBLE_DEVICES in the step's
 * environment: node indexes, which slurmstepd sets or unsets itself) and no other, and each
 * task's CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES number them as the task sees them
 * (gpu_devices.c).
 *
 * A host outside Kubernetes (externalNodes) that does not mount the jail runs jobs on its own
 * root filesystem, as any Slurm node does: its join script writes HOST_ROOT_MARKER, a file no
 * worker pod's image has, and the plugin then leaves every step where it is (a container
 * image is refused there: it is prepared in the jail's cache).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "container_image.h"
#include "gpu_devices.h"
#include "jail_args.h"
#include "jail_mounts.h"
#include "task_limits.h"

SPANK_PLUGIN(chroot, 1);

/* slurm_stack/paths.py OUTSIDE_HOST_ROOT_MARKER: only root on an outside host writes it. */
#define HOST_ROOT_MARKER "/etc/slurm-stack/jobs-on-host-root"

static struct jail_config cfg;
static int opted_out;
static int gpu_driver_bound; /* this step's jail has the node's GPU driver files */
static int in_container;     /* each task enters the image prepared at CONTAINER_ROOT */
static int jail_failed;	     /* entering the jail failed: every task of the step fails */
static int gpus_confined;    /* this step's /dev has only its GPUs, step_gpus */
static struct gpu_devices node_gpus, step_gpus;
/* Why every task of this step fails: room for an image reference and jail_error. */
static char failure[sizeof(jail_error) + CONTAINER_REF_MAX + 64];

static int opt_out(int val, const char *optarg, int remote)
{
	(void)val;
	(void)optarg;
	(void)remote;
	opted_out = 1;
	return 0;
}

static struct spank_option no_jail_option = {
	"no-jail", NULL,
	"Run this job on the node's own filesystem instead of the shared jail "
	"(only where the cluster allows it)",
	0, 0, opt_out,
};

/* --container-image=REF: the step's root is that image instead of the jail. */
static char container_image[CONTAINER_REF_MAX + 1];

static int choose_image(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || !container_ref_valid(optarg)) {
		slurm_error("--container-image: '%s' is not an image reference (registry/name:tag "
			    "or name@sha256:digest)",
			    optarg ? optarg : "");
		return -1;
	}
	snprintf(container_image, sizeof(container_image), "%s", optarg);
	return 0;
}

static struct spank_option container_image_option = {
	"container-image", "IMAGE",
	"Run the job's tasks in this OCI image (e.g. registry.example/team/app:1.0) instead of the "
	"jail, as yourself, with your home directory",
	1, 0, choose_image,
};

/* Report to the job's stderr (a task's) and the slurmd log, then fail. */
__attribute__((format(printf, 1, 2))) static int task_fail(const char *fmt, ...)
{
	char message[sizeof(failure) + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	slurm_error("chroot: %s", message);
	fprintf(stderr, "slurm-stack jail: %s; the task did not start\n", message);
	return -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[512];
	spank_context_t context = spank_context();

	if (jail_parse_args(ac, av, &cfg, err, sizeof(err)) != 0) {
		slurm_error("chroot: plugstack.conf: %s", err);
		return -1;
	}
	if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR)
		return 0;
	if (cfg.allow_opt_out && spank_option_register(sp, &no_jail_option) != ESPANK_SUCCESS) {
		slurm_error("chroot: cannot register --no-jail");
		return -1;
	}
	if (cfg.container_fetch[0] &&
	    spank_option_register(sp, &container_image_option) != ESPANK_SUCCESS) {
		slurm_error("chroot: cannot register --container-image");
		return -1;
	}
	return 0;
}

/* On a node whose pod has GPUs (cfg.gpus lists them): the step's own, from the environment
 * slurmstepd made for it. Returns 0, or -1 with `failure` and jail_failed set. */
static int select_step_gpus(spank_t sp)
{
	char list[1024], err[512];
	spank_err_t rc;

	if (!cfg.gpus[0])
		return 0;
	if (gpu_read_node(cfg.gpus, &node_gpus, err, sizeof(err)) != 0)
		goto failed;
	if (node_gpus.n == 0)
		return 0;
	rc = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", list, sizeof(list));
	if (rc == ESPANK_ENV_NOEXIST)
		list[0] = '\0';
	else if (rc != ESPANK_SUCCESS) {
		snprintf(err, sizeof(err), "cannot read the step's CUDA_VISIBLE_DEVICES: %s",
			 spank_strerror(rc));
		goto failed;
	}
	if (gpu_select(&node_gpus, list, &step_gpus, err, sizeof(err)) != 0)
		goto failed;
	gpus_confined = 1;
	return 0;
failed:
	snprintf(failure, sizeof(failure), "the step's GPUs: %s", err);
	jail_failed = 1;
	return -1;
}

/* The step's tasks run in the image the job named: fetched (or found in the node's cache) by
 * the node's fetch program, prepared inside the step's jail, entered by each task. A failure
 * fails every task with the image's name and the reason. */
static int enter_container(spank_t sp, uint32_t job_id)
{
	char rootfs[PATH_MAX], err[sizeof(jail_error)];
	const struct gpu_devices *gpus;

	if (select_step_gpus(sp) != 0)
		goto no_jail;
	gpus = gpus_confined ? &step_gpus : NULL;
	if (container_fetch(&cfg, container_image, rootfs, sizeof(rootfs), err, sizeof(err)) != 0) {
		snprintf(failure, sizeof(failure), "container image '%s': %s", container_image, err);
		jail_failed = 1;
	}
	if ((jail_failed ? jail_enter(&cfg, job_id, gpus, &gpu_driver_bound)
			 : jail_enter_image(&cfg, rootfs, job_id, gpus, &gpu_driver_bound)) != 0) {
		if (!jail_failed)
			snprintf(failure, sizeof(failure), "container image '%s': %s",
				 container_image, jail_error);
		jail_failed = 1;
		goto no_jail;
	}
	if (jail_failed)
		goto failed; /* in the jail: the tasks fail there */
	slurm_info("chroot: job %u runs in image '%s' (%s)", job_id, container_image, rootfs);
	in_container = 1;
	return 0;
failed:
	slurm_error("chroot: job %u: %s", job_id, failure);
	return 0;
no_jail:
	slurm_error("chroot: job %u: %s", job_id, failure);
	if (jail_enter_void(&cfg, job_id) != 0) {
		slurm_error("chroot: job %u: %s", job_id, jail_error);
		return -1;
	}
	return 0;
}

/* In slurmstepd, once the job's options are known and before any of its files is opened. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	uint32_t job_id = 0;

	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (access(HOST_ROOT_MARKER, F_OK) == 0) {
		if (!container_image[0]) {
			slurm_info("chroot: this host runs jobs on its own filesystem (%s)",
				   HOST_ROOT_MARKER);
			return 0;
		}
		snprintf(failure, sizeof(failure),
			 "--container-image runs on worker pods only; this host (%s) runs jobs on "
			 "its own filesystem",
			 HOST_ROOT_MARKER);
		jail_failed = 1;
		return 0;
	}
	if (opted_out && cfg.allow_opt_out && !container_image[0]) {
		slurm_info("chroot: the job asked for --no-jail; running on the node's filesystem");
		return 0;
	}
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) {
		slurm_error("chroot: cannot tell the job's id");
		return -1;
	}
	if (opted_out && container_image[0]) {
		slurm_error("chroot: job %u: --no-jail and --container-image exclude each other",
			    job_id);
		snprintf(failure, sizeof(failure),
			 "--no-jail and --container-image exclude each other");
		jail_failed = 1;
		return jail_enter_void(&cfg, job_id) != 0 ? -1 : 0;
	}
	if (container_image[0])
		return enter_container(sp, job_id);
	if (select_step_gpus(sp) == 0 &&
	    jail_enter(&cfg, job_id, gpus_confined ? &step_gpus : NULL, &gpu_driver_bound) == 0)
		return 0;
	if (!jail_failed)
		snprintf(failure, sizeof(failure), "%s", jail_error);
	jail_failed = 1;
	slurm_error("chroot: job %u: %s", job_id, failure);
	if (jail_enter_void(&cfg, job_id) != 0) {
		slurm_error("chroot: job %u: %s", job_id, jail_error);
		return -1;
	}
	return 0;
}

/* In each forked task, as root, right before it becomes the job's user. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	char err[256];
	uid_t uid;

	(void)ac;
	(void)av;
	if (!spank_remote(sp))
		return 0;
	if (jail_failed)
		return task_fail("%s", failure);
	if (in_container && container_enter_task() != 0)
		return task_fail("container image '%s': %s", container_image, jail_error);
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return task_fail("cannot tell the job's user");
	if (task_limit_privileges(uid, err, sizeof(err)) != 0)
		return task_fail("%s", err);
	return 0;
}

/* Put DIR/SUB first in the task's variable NAME (a colon-separated list), once: a step
 * started inside a job inherits the value. An unset NAME is set only if `when_unset`; an
 * unset PATH must stay unset, or the shell's default search path would be lost. */
static int prepend_path(spank_t sp, const char *name, const char *dir, const char *sub,
			int when_unset)
{
	/* As long as the kernel allows one variable to be; static: the task is single-threaded. */
	static char current[128 * 1024], value[128 * 1024 + PATH_MAX];
	spank_err_t rc = spank_getenv(sp, name, current, sizeof(current));
	size_t dir_len = strlen(dir), sub_len = strlen(sub);
	int n;

	if (rc == ESPANK_SUCCESS && current[0]) {
		if (!strncmp(current, dir, dir_len) && current[dir_len] == '/' &&
		    !strncmp(current + dir_len + 1, sub, sub_len) &&
		    (current[dir_len + 1 + sub_len] == ':' || current[dir_len + 1 + sub_len] == '\0'))
			return 0;
		n = snprintf(value, sizeof(value), "%s/%s:%s", dir, sub, current);
	} else if (rc == ESPANK_SUCCESS || rc == ESPANK_ENV_NOEXIST) {
		if (!when_unset)
			return 0;
		n = snprintf(value, sizeof(value), "%s/%s", dir, sub);
	} else {
		return task_fail("cannot read %s: %s", name, spank_strerror(rc));
	}
	if (n < 0 || (size_t)n >= sizeof(value) || spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS)
		return task_fail("cannot set %s for the GPU driver files", name);
	return 0;
}

/* The task's GPU variables as it sees its GPUs: Slurm gave node indexes, but the task's /dev
 * holds only its step's GPUs, which CUDA numbers from 0. No GPU: CUDA_VISIBLE_DEVICES unset
 * (Slurm unsets it too) and NVIDIA_VISIBLE_DEVICES=void, for container tools in the job. */
static int set_task_gpus(spank_t sp)
{
	char given[1024], local[4 * GPU_MAX];
	spank_err_t rc;

	if (step_gpus.n == 0) {
		spank_unsetenv(sp, "CUDA_VISIBLE_DEVICES");
		return spank_setenv(sp, "NVIDIA_VISIBLE_DEVICES", "void", 1) == ESPANK_SUCCESS
			       ? 0
			       : task_fail("cannot set NVIDIA_VISIBLE_DEVICES");
	}
	rc = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", given, sizeof(given));
	if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_NOEXIST)
		return task_fail("cannot read CUDA_VISIBLE_DEVICES: %s", spank_strerror(rc));
	if (gpu_task_list(&step_gpus, rc == ESPANK_SUCCESS ? given : NULL, local, sizeof(local)))
		return task_fail("the task's CUDA_VISIBLE_DEVICES '%s' is not a list of GPU indexes",
				 given);
	if (spank_setenv(sp, "CUDA_VISIBLE_DEVICES", local, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "NVIDIA_VISIBLE_DEVICES", local, 1) != ESPANK_SUCCESS)
		return task_fail("cannot set the task's GPU variables");
	return 0;
}

/* Runs in the same forked task right before exec, where the task's environment is final. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!spank_remote(sp))
		return 0;
	if (gpus_confined && set_task_gpus(sp))
		return -1;
	if (!gpu_driver_bound)
		return 0;
	if (prepend_path(sp, "PATH", cfg.gpu_driver, "bin", 0) ||
	    prepend_path(sp, "LD_LIBRARY_PATH", cfg.gpu_driver, "lib", 1))
		return -1;
	return 0;
}
