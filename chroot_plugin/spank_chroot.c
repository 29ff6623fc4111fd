/*
 * spank_chroot: every task of every job enters the shared root filesystem (the jail).
 *
 * In the forked task, before privileges drop: a private mount namespace, the node-local
 * pieces bound into the jail (/proc, /sys, /dev, /tmp, the munge socket, the slurmd spool
 * with the batch script, the job's working directory when it is outside the jail, the
 * node's submounts, and read-only the node's name service files, the project's own library
 * directory and, on GPU nodes, this node's staged driver files), then pivot_root and a lazy
 * unmount of the old root. The task's PATH and LD_LIBRARY_PATH then lead to the driver files
 * first, so the jail's software uses the driver that matches this node's kernel module (the
 * GPU device nodes come with /dev). Any failure fails the task with a message in the job's
 * stderr and the slurmd log; a task never runs on the host by accident.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <slurm/spank.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000 /* linux/fcntl.h; older glibc headers lack it */
#endif

#include "jail_args.h"

SPANK_PLUGIN(chroot, 1);

static struct jail_config cfg;
static int opted_out;
static int gpu_driver_bound; /* this task's jail has the node's GPU driver files */

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

/* Report to the slurmd log and to the job's stderr, then fail. */
static int jail_fail(const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	slurm_error("chroot: %s", message);
	fprintf(stderr, "slurm-stack jail: %s; the task did not start\n", message);
	return -1;
}

static int jail_path(char *out, const char *inside)
{
	if (snprintf(out, PATH_MAX, "%s%s", cfg.jail, inside) >= PATH_MAX)
		return jail_fail("path %s%s is too long", cfg.jail, inside);
	return 0;
}

/*
 * Create `inside` (an absolute path) under the jail, component by component, refusing
 * symlinks: a link planted in the shared jail must not redirect a bind mount elsewhere.
 */
static int ensure_dir_in_jail(const char *inside)
{
	char path[PATH_MAX];
	size_t base = strlen(cfg.jail);
	struct stat st;

	if (jail_path(path, inside))
		return -1;
	for (char *p = path + base + 1;; p++) {
		char saved = *p;

		if (saved != '/' && saved != '\0')
			continue;
		*p = '\0';
		if (lstat(path, &st) != 0) {
			/* The jail is shared: a task on another node may create it at the same
			 * moment, so EEXIST is fine; what is there is checked below either way. */
			if (errno != ENOENT || (mkdir(path, 0755) != 0 && errno != EEXIST) ||
			    lstat(path, &st) != 0)
				return jail_fail("cannot create %s: %s", path, strerror(errno));
		}
		if (S_ISLNK(st.st_mode))
			return jail_fail("%s is a symlink; refusing to mount over it", path);
		if (!S_ISDIR(st.st_mode))
			return jail_fail("%s is not a directory", path);
		*p = saved;
		if (saved == '\0')
			return 0;
	}
}

/* A file to bind over: its directory created as above, the file itself created empty if
 * missing; a symlink is refused for the same reason. */
static int ensure_file_in_jail(const char *inside)
{
	char path[PATH_MAX], parent[PATH_MAX];
	char *slash;
	struct stat st;
	int fd;

	snprintf(parent, sizeof(parent), "%s", inside);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (ensure_dir_in_jail(parent))
			return -1;
	}
	if (jail_path(path, inside))
		return -1;
	if (lstat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return jail_fail("%s is not a regular file; refusing to mount over it", path);
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	/* Created by a task on another node meanwhile: take it if it is a regular file. */
	if (errno != EEXIST || lstat(path, &st) != 0)
		return jail_fail("cannot create %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return jail_fail("%s is not a regular file; refusing to mount over it", path);
	return 0;
}

static int bind_into_jail(const char *source, const char *inside, unsigned long flags)
{
	char target[PATH_MAX];
	struct stat st;
	int prepared;

	if (stat(source, &st) != 0)
		return jail_fail("bind source %s: %s", source, strerror(errno));
	prepared = S_ISDIR(st.st_mode) ? ensure_dir_in_jail(inside) : ensure_file_in_jail(inside);
	if (prepared || jail_path(target, inside))
		return -1;
	if (mount(source, target, NULL, MS_BIND | (flags & MS_REC), NULL) != 0)
		return jail_fail("bind %s -> %s: %s", source, target, strerror(errno));
	if (!(flags & MS_RDONLY))
		return 0;
	if (flags & MS_REC) {
		/* Every mount below it too: the staged GPU driver files are binds of their own. */
		struct mount_attr attr = {
			.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
		};

		if (mount_setattr(AT_FDCWD, target, AT_RECURSIVE, &attr, sizeof(attr)) == 0)
			return 0;
		if (errno != ENOSYS)
			return jail_fail("make %s read-only: %s", target, strerror(errno));
		/* Kernels before 5.12 lack it: remount the top mount as below; the mounts under it
		 * stay as the node made them (stage-gpu-driver makes its binds read-only). */
	}
	/* Read-only takes a remount of the bind; the first mount ignores MS_RDONLY. */
	if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) != 0)
		return jail_fail("make %s read-only: %s", target, strerror(errno));
	return 0;
}

/* A fresh procfs; where the container runtime masks /proc paths the kernel refuses a new
 * one, and a recursive bind keeps those masks instead. */
static int mount_proc(void)
{
	char target[PATH_MAX];

	if (ensure_dir_in_jail("/proc") || jail_path(target, "/proc"))
		return -1;
	if (mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
		return 0;
	if (errno != EPERM && errno != EACCES)
		return jail_fail("mount proc on %s: %s", target, strerror(errno));
	return bind_into_jail("/proc", "/proc", MS_REC);
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int enter_jail(void)
{
	char cwd[PATH_MAX], probe[PATH_MAX];

	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	if (jail_path(probe, "/etc/passwd"))
		return -1;
	if (access(probe, R_OK) != 0)
		return jail_fail("the jail at %s is not usable (%s: %s)", cfg.jail, probe,
				 strerror(errno));

	if (unshare(CLONE_NEWNS) != 0)
		return jail_fail("unshare(CLONE_NEWNS): %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return jail_fail("make / private: %s", strerror(errno));
	/* pivot_root needs the new root to be a mount point. */
	if (mount(cfg.jail, cfg.jail, NULL, MS_BIND | MS_REC, NULL) != 0)
		return jail_fail("bind %s onto itself: %s", cfg.jail, strerror(errno));

	if (mount_proc() || bind_into_jail("/sys", "/sys", MS_REC) ||
	    bind_into_jail("/dev", "/dev", MS_REC) || bind_into_jail("/tmp", "/tmp", 0))
		return -1;
	if (cfg.munge[0] && is_dir(cfg.munge) && bind_into_jail(cfg.munge, cfg.munge, 0))
		return -1;
	if (cfg.spool[0] && bind_into_jail(cfg.spool, cfg.spool, 0))
		return -1;
	for (size_t i = 0; i < cfg.n_binds; i++) {
		const struct jail_bind *b = &cfg.binds[i];

		/* Each node has only its own pool's submounts: bind those that exist here. */
		if (access(b->source, F_OK) == 0 &&
		    bind_into_jail(b->source, b->target, MS_REC | (b->read_only ? MS_RDONLY : 0)))
			return -1;
	}
	/* Only GPU nodes stage driver files (the slurmd entrypoint does), so its absence is normal. */
	if (cfg.gpu_driver[0] && is_dir(cfg.gpu_driver)) {
		if (bind_into_jail(cfg.gpu_driver, cfg.gpu_driver, MS_REC | MS_RDONLY))
			return -1;
		gpu_driver_bound = 1;
	}
	if (jail_path(probe, cwd))
		return -1;
	if (strcmp(cwd, "/") != 0 && !is_dir(probe) && bind_into_jail(cwd, cwd, 0))
		return -1;

	if (chdir(cfg.jail) != 0)
		return jail_fail("chdir %s: %s", cfg.jail, strerror(errno));
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		return jail_fail("pivot_root into %s: %s", cfg.jail, strerror(errno));
	/* The old root is stacked under the new one: detach it so no path leads back. */
	if (umount2(".", MNT_DETACH) != 0)
		return jail_fail("detach the old root: %s", strerror(errno));
	if (chdir(cwd) != 0 && chdir("/") != 0)
		return jail_fail("chdir %s inside the jail: %s", cwd, strerror(errno));
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[512];
	spank_context_t context = spank_context();

	if (jail_parse_args(ac, av, &cfg, err, sizeof(err)) != 0) {
		slurm_error("chroot: plugstack.conf: %s", err);
		return -1;
	}
	if (cfg.allow_opt_out && (context == S_CTX_LOCAL || context == S_CTX_REMOTE ||
				  context == S_CTX_ALLOCATOR)) {
		if (spank_option_register(sp, &no_jail_option) != ESPANK_SUCCESS) {
			slurm_error("chroot: cannot register --no-jail");
			return -1;
		}
	}
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!spank_remote(sp))
		return 0;
	if (opted_out && cfg.allow_opt_out) {
		slurm_info("chroot: the job asked for --no-jail; running on the node's filesystem");
		return 0;
	}
	return enter_jail();
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
		return jail_fail("cannot read %s: %s", name, spank_strerror(rc));
	}
	if (n < 0 || (size_t)n >= sizeof(value) || spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS)
		return jail_fail("cannot set %s for the GPU driver files", name);
	return 0;
}

/* Runs in the same forked task right before exec, where the task's environment is final. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !gpu_driver_bound)
		return 0;
	if (prepend_path(sp, "PATH", cfg.gpu_driver, "bin", 0) ||
	    prepend_path(sp, "LD_LIBRARY_PATH", cfg.gpu_driver, "lib", 1))
		return -1;
	return 0;
}
