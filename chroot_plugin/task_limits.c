/* Capability bounding set and no_new_privs for a job's tasks. */
#include "task_limits.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

/*
 * Root in the jail administers the jail's files and users (apt, useradd, chown): these stay.
 * Gone are, among others, SYS_ADMIN (mounts, namespaces), SYS_CHROOT, SYS_PTRACE,
 * DAC_READ_SEARCH (open_by_handle_at reaches files outside any chroot), SYS_MODULE,
 * SYS_RAWIO, NET_ADMIN, NET_RAW, MKNOD, SETPCAP, SYS_NICE, SYS_RESOURCE and SYSLOG.
 */
static const int kept[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID,
	CAP_KILL,  CAP_SETGID,       CAP_SETUID, CAP_NET_BIND_SERVICE,
};

static int is_kept(int cap)
{
	for (size_t i = 0; i < sizeof(kept) / sizeof(*kept); i++)
		if (kept[i] == cap)
			return 1;
	return 0;
}

int task_limit_privileges(uid_t uid, char *err, size_t err_len)
{
	/* PR_CAPBSET_READ fails with EINVAL past the last capability this kernel knows. */
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
		if (is_kept(cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
			snprintf(err, err_len, "drop capability %d from the bounding set: %s", cap,
				 strerror(errno));
			return -1;
		}
	}
	if (uid != 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, err_len, "set no_new_privs: %s", strerror(errno));
		return -1;
	}
	return 0;
}
