/* What a job's task may still do once it runs the user's program. No Slurm dependency, so the
 * test harness checks it as root on its own (tests/test_jail_mounts.c). */
#ifndef SLURM_STACK_TASK_LIMITS_H
#define SLURM_STACK_TASK_LIMITS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * In a task about to exec the user's program: every capability but those root in the jail
 * needs to manage its files and users leaves the bounding set, so no program the task runs
 * (root's included, setuid ones included) can hold CAP_SYS_ADMIN and the like; a task of an
 * ordinary user also gets no_new_privs, so setuid programs do not raise its privileges.
 * Returns 0, or -1 with the reason in `err`.
 */
int task_limit_privileges(uid_t uid, char *err, size_t err_len);

#endif
