/* Unit tests of the plugstack.conf argument parser (prints "N passed, N failed"). */
#include "../jail_args.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static int parse(struct jail_config *cfg, char *err, int argc, char **argv)
{
	return jail_parse_args(argc, argv, cfg, err, 256);
}

int main(void)
{
	struct jail_config cfg;
	char err[256];

	char *full[] = {"jail=/mnt/jail", "spool=/var/spool/slurmd", "munge=/run/munge",
			"submount=/mnt/submounts/scratch:/scratch", "bind=/opt/x:/opt/x",
			"allow_opt_out=1"};
	CHECK(parse(&cfg, err, 6, full) == 0);
	CHECK(strcmp(cfg.jail, "/mnt/jail") == 0);
	CHECK(strcmp(cfg.spool, "/var/spool/slurmd") == 0);
	CHECK(strcmp(cfg.munge, "/run/munge") == 0);
	CHECK(cfg.n_binds == 2);
	CHECK(strcmp(cfg.binds[0].source, "/mnt/submounts/scratch") == 0);
	CHECK(strcmp(cfg.binds[0].target, "/scratch") == 0);
	CHECK(cfg.allow_opt_out == 1);

	char *read_only[] = {"jail=/mnt/jail", "bind=/opt/x:/opt/x", "ro_bind=/etc/hosts:/etc/hosts"};
	CHECK(parse(&cfg, err, 3, read_only) == 0);
	CHECK(cfg.n_binds == 2 && cfg.binds[0].read_only == 0 && cfg.binds[1].read_only == 1);
	CHECK(strcmp(cfg.binds[1].source, "/etc/hosts") == 0);
	CHECK(strcmp(cfg.binds[1].target, "/etc/hosts") == 0);

	/* The node's Slurm client: read-only, at the same path, only where the jail has it. */
	char *client[] = {"jail=/mnt/jail", "client=/usr/bin/srun"};
	CHECK(parse(&cfg, err, 2, client) == 0);
	CHECK(cfg.n_binds == 1 && cfg.binds[0].read_only == 1 && cfg.binds[0].if_present == 1);
	CHECK(strcmp(cfg.binds[0].source, "/usr/bin/srun") == 0);
	CHECK(strcmp(cfg.binds[0].target, "/usr/bin/srun") == 0);
	char *client_relative[] = {"jail=/mnt/jail", "client=usr/bin/srun"};
	CHECK(parse(&cfg, err, 2, client_relative) == -1);
	CHECK(strstr(err, "absolute") != NULL);

	char *read_only_bad[] = {"jail=/mnt/jail", "ro_bind=/etc/hosts"};
	CHECK(parse(&cfg, err, 2, read_only_bad) == -1);
	CHECK(strstr(err, "SOURCE:TARGET") != NULL);

	char *over_etc[] = {"jail=/mnt/jail", "submount=/mnt/x:/etc/site"};
	CHECK(parse(&cfg, err, 2, over_etc) == -1);
	CHECK(strstr(err, "submount target '/etc/site' would cover /etc") != NULL);
	char *over_spool[] = {"jail=/mnt/jail", "submount=/mnt/x:/var/spool",
			      "spool=/var/spool/slurmd"};
	CHECK(parse(&cfg, err, 3, over_spool) == -1);
	CHECK(strstr(err, "would cover /var/spool/slurmd") != NULL);
	char *beside_etc[] = {"jail=/mnt/jail", "submount=/mnt/x:/etcetera", "bind=/etc/x:/etc/x"};
	CHECK(parse(&cfg, err, 3, beside_etc) == 0); /* our own binds may go there */

	char *minimal[] = {"jail=/mnt/jail"};
	CHECK(parse(&cfg, err, 1, minimal) == 0);
	CHECK(cfg.allow_opt_out == 0 && cfg.n_binds == 0 && cfg.spool[0] == '\0');
	CHECK(cfg.gpu_driver[0] == '\0');

	char *gpu[] = {"jail=/mnt/jail", "gpu_driver=/run/slurm-stack/gpu-driver"};
	CHECK(parse(&cfg, err, 2, gpu) == 0);
	CHECK(strcmp(cfg.gpu_driver, "/run/slurm-stack/gpu-driver") == 0);

	char *job_dirs[] = {"jail=/mnt/jail", "job_tmp=/var/lib/slurm-stack/job-tmp",
			    "job_shm=/dev/shm/slurm-stack-jobs"};
	CHECK(parse(&cfg, err, 3, job_dirs) == 0);
	CHECK(strcmp(cfg.job_tmp, "/var/lib/slurm-stack/job-tmp") == 0);
	CHECK(strcmp(cfg.job_shm, "/dev/shm/slurm-stack-jobs") == 0);

	char *gpu_relative[] = {"jail=/mnt/jail", "gpu_driver=run/gpu"};
	CHECK(parse(&cfg, err, 2, gpu_relative) == -1);
	CHECK(strstr(err, "gpu_driver=run/gpu") != NULL);

	CHECK(parse(&cfg, err, 0, NULL) == -1);
	CHECK(strstr(err, "jail=PATH is required") != NULL);

	char *root[] = {"jail=/"};
	CHECK(parse(&cfg, err, 1, root) == -1);

	char *relative[] = {"jail=mnt/jail"};
	CHECK(parse(&cfg, err, 1, relative) == -1);
	CHECK(strstr(err, "absolute") != NULL);

	char *dotdot[] = {"jail=/mnt/jail", "submount=/mnt/x:/scratch/../etc"};
	CHECK(parse(&cfg, err, 2, dotdot) == -1);

	char *dot[] = {"jail=/mnt/./jail"};
	CHECK(parse(&cfg, err, 1, dot) == -1);

	char *hidden_ok[] = {"jail=/mnt/jail", "submount=/mnt/.cache:/.cache"};
	CHECK(parse(&cfg, err, 2, hidden_ok) == 0);

	char *no_colon[] = {"jail=/mnt/jail", "submount=/scratch"};
	CHECK(parse(&cfg, err, 2, no_colon) == -1);
	CHECK(strstr(err, "SOURCE:TARGET") != NULL);

	char *over_root[] = {"jail=/mnt/jail", "bind=/x:/"};
	CHECK(parse(&cfg, err, 2, over_root) == -1);

	char *bad_flag[] = {"jail=/mnt/jail", "allow_opt_out=yes"};
	CHECK(parse(&cfg, err, 2, bad_flag) == -1);

	char *unknown[] = {"jail=/mnt/jail", "jial=/x"};
	CHECK(parse(&cfg, err, 2, unknown) == -1);
	CHECK(strstr(err, "unknown argument 'jial=/x'") != NULL);

	char *prefix[] = {"jailx=/mnt/jail"};
	CHECK(parse(&cfg, err, 1, prefix) == -1);

	/* A path of PATH_MAX bytes or more is refused; so are arguments that do not fit the
	 * parser's copy of them altogether, and the parse before them is not disturbed. */
	static char long_path[PATH_MAX + 8], near_max[PATH_MAX], *many[JAIL_MAX_BINDS];
	static char long_err[2 * PATH_MAX + 64]; /* the message quotes the argument */
	memset(long_path, 'a', sizeof(long_path) - 1);
	memcpy(long_path, "jail=/", 6);
	char *too_long[] = {long_path};
	CHECK(jail_parse_args(1, too_long, &cfg, long_err, sizeof(long_err)) == -1);
	CHECK(strstr(long_err, "the path is too long") != NULL);
	memset(near_max, 'b', sizeof(near_max) - 1);
	memcpy(near_max, "client=/", 8);
	many[0] = "jail=/mnt/jail";
	for (int i = 1; i < JAIL_MAX_BINDS; i++)
		many[i] = near_max;
	CHECK(jail_parse_args(JAIL_MAX_BINDS, many, &cfg, long_err, sizeof(long_err)) == -1);
	CHECK(strstr(long_err, "too long altogether") != NULL);
	CHECK(parse(&cfg, err, 17, many) == 0 && cfg.n_binds == 16);
	CHECK(strcmp(cfg.jail, "/mnt/jail") == 0 && cfg.binds[15].target == cfg.binds[15].source);

	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
