/* Arguments of the chroot SPANK plugin, as given in plugstack.conf. No Slurm dependency, so
 * the parser is unit-tested on its own (tests/test_jail_args.c). */
#ifndef SLURM_STACK_JAIL_ARGS_H
#define SLURM_STACK_JAIL_ARGS_H

#include <limits.h>
#include <stddef.h>

#define JAIL_MAX_BINDS 64

struct jail_bind {
	char source[PATH_MAX]; /* path outside the jail (node-local) */
	char target[PATH_MAX]; /* path inside the jail */
	int read_only;         /* ro_bind=: the job may read, never write */
	int user;              /* submount=: the user's, never over what the jail needs */
	int if_present;        /* client=: only over a path the jail already has */
};

struct jail_config {
	char jail[PATH_MAX];            /* jail=/mnt/jail (required) */
	char spool[PATH_MAX];           /* spool=/var/spool/slurmd: batch scripts live here */
	char munge[PATH_MAX];           /* munge=/run/munge: srun inside a job needs it */
	char gpu_driver[PATH_MAX];      /* gpu_driver=DIR: this node's staged driver files, if any */
	char gpus[PATH_MAX];            /* gpus=FILE: the node's gres.conf lines; a step sees its GPUs only */
	char job_tmp[PATH_MAX];         /* job_tmp=DIR: root-only; each job's /tmp is DIR/<job id> */
	char job_shm[PATH_MAX];         /* job_shm=DIR: the same for each job's /dev/shm */
	int allow_opt_out;              /* allow_opt_out=1: users may pass --no-jail */
	size_t n_binds;
	struct jail_bind binds[JAIL_MAX_BINDS]; /* submount=, bind=, ro_bind=SRC:DST, client=PATH */
};

/* Parse plugstack.conf arguments into cfg. Returns 0, or -1 with a message in err. */
int jail_parse_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t err_len);

#endif
