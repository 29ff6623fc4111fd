/* Arguments of the chroot SPANK plugin, as given in plugstack.conf. No Slurm dependency, so
 * the parser is unit-tested on its own (tests/test_jail_args.c). */
#ifndef SLURM_STACK_JAIL_ARGS_H
#define SLURM_STACK_JAIL_ARGS_H

#include <limits.h>
#include <stddef.h>

#define JAIL_MAX_BINDS 64
#define JAIL_STRINGS_MAX (64 * 1024) /* all paths of one plugstack.conf line, copied */

/* Paths are never NULL: "" where plugstack.conf does not give one. */
struct jail_bind {
	const char *source; /* path outside the jail (node-local) */
	const char *target; /* path inside the jail */
	int read_only;      /* ro_bind=: the job may read, never write */
	int user;           /* submount=: the user's, never over what the jail needs */
	int if_present;     /* client=: only over a path the jail already has */
};

/*
 * Compact on purpose: srun and every slurmstepd parse this afresh, and each page the parse
 * touches is a page fault of that process. Path-sized arrays per field made the plugin's
 * zeroed data 540 KiB, which cost a step about 1.5 ms (benchmarks/sandbox_bench.py).
 */
struct jail_config {
	const char *jail;       /* jail=/mnt/jail (required) */
	const char *spool;      /* spool=/var/spool/slurmd: batch scripts live here */
	const char *munge;      /* munge=/run/munge: srun inside a job needs it */
	const char *gpu_driver; /* gpu_driver=DIR: this node's staged driver files, if any */
	const char *gpus;       /* gpus=FILE: the node's gres.conf lines; a step sees its GPUs only */
	const char *job_tmp;    /* job_tmp=DIR: root-only; each job's /tmp is DIR/<job id> */
	const char *job_shm;    /* job_shm=DIR: the same for each job's /dev/shm */
	int allow_opt_out;      /* allow_opt_out=1: users may pass --no-jail */
	const char *container_fetch;    /* container_fetch=PROGRAM: --container-image is offered */
	const char *container_cache;    /* container_cache=DIR: where PROGRAM unpacks images */
	const char *container_insecure; /* container_insecure=HOST:PORT,...: plain-HTTP registries */
	size_t n_binds;
	struct jail_bind binds[JAIL_MAX_BINDS]; /* submount=, bind=, ro_bind=SRC:DST, client=PATH */
	size_t strings_used;                    /* must stay the last two fields: not zeroed */
	char strings[JAIL_STRINGS_MAX];         /* where the paths above point */
};

/* Parse plugstack.conf arguments into cfg. Returns 0, or -1 with a message in err. */
int jail_parse_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t err_len);

#endif
