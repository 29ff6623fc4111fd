/*
 * The jail's mount work. Every target inside the (shared, user-writable in places) jail is
 * opened one component at a time beneath the jail's root with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS), and mounted over through that file descriptor: a symlink or `..`
 * planted in the jail can never redirect a mount, and nothing can swap a path between the
 * check and the mount. The jail becomes `/` by moving its mount over the old root and
 * chroot(2) into it; pivot_root(2) is not in the container runtimes' default seccomp
 * profiles, mount(2) and chroot(2) are (given CAP_SYS_ADMIN and CAP_SYS_CHROOT).
 */
#define _GNU_SOURCE
#include "jail_mounts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000 /* linux/fcntl.h; older glibc headers lack it */
#endif

char jail_error[1024];

static int root_fd = -1; /* the jail's root, while jail_enter runs */

static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(jail_error, sizeof(jail_error), fmt, ap);
	va_end(ap);
	return -1;
}

static int open_beneath(int dir_fd, const char *name, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
}

static const char *why(int err)
{
	return err == ELOOP ? "a symlink there is refused" : strerror(err);
}

/*
 * An O_PATH descriptor of `inside` (absolute, within the jail). With `create`, missing
 * directories are made (0755) and, when `is_dir` is false, the last component as an empty
 * file: a bind target must exist. With `regular`, a file there must be a regular one.
 */
static int jail_walk(const char *inside, int is_dir, int create, int regular)
{
	char path[PATH_MAX];
	char *name, *next;
	int fd, child;

	if (snprintf(path, sizeof(path), "%s", inside) >= (int)sizeof(path))
		return fail("path %s is too long", inside);
	for (name = path; *name == '/'; name++)
		;
	/* One openat2 resolves every component under the same rules; walk one component at a
	 * time only where something must be created or a failure must name its component. */
	fd = open_beneath(root_fd, *name ? name : ".", O_PATH | (is_dir ? O_DIRECTORY : 0), 0);
	if (fd >= 0)
		goto found;
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return fail("dup: %s", strerror(errno));
	for (name = path; *name == '/'; name++)
		;
	while (*name) {
		char *rest = NULL;
		int want_dir, err = 0;

		next = strchr(name, '/');
		if (next) {
			*next = '\0';
			for (rest = next + 1; *rest == '/'; rest++)
				;
		}
		want_dir = (rest && *rest) || is_dir;
		child = open_beneath(fd, name, O_PATH | (want_dir ? O_DIRECTORY : 0), 0);
		if (child < 0 && errno == ENOENT && create) {
			if (want_dir) {
				if (mkdirat(fd, name, 0755) != 0 && errno != EEXIST)
					err = errno;
			} else {
				int file = open_beneath(fd, name, O_WRONLY | O_CREAT, 0644);

				if (file >= 0)
					close(file);
			}
			if (!err)
				child = open_beneath(fd, name, O_PATH | (want_dir ? O_DIRECTORY : 0), 0);
		}
		if (child < 0) {
			err = err ? err : errno;
			close(fd);
			return fail("%s in the jail (at %s): %s", inside, name, why(err));
		}
		close(fd);
		fd = child;
		if (!rest || !*rest)
			break;
		name = rest;
	}
found:
	if (!is_dir && regular) {
		struct stat st;

		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return fail("%s in the jail is not a regular file; refusing to mount over it",
				    inside);
		}
	}
	return fd;
}

/* Where to mount: a directory, or a regular file (never a device or FIFO planted there). */
static int jail_target(const char *inside, int is_dir, int create)
{
	return jail_walk(inside, is_dir, create, 1);
}

static void fd_path(char *out, int fd)
{
	snprintf(out, 64, "/proc/self/fd/%d", fd);
}

/* Mount attributes on the mount now at `inside` (and, with `recursive`, those below it). */
static int restrict_mount(const char *inside, int is_dir, uint64_t attrs, int recursive)
{
	struct mount_attr attr = {.attr_set = attrs};
	/* What is there now is the mount just made: a bound device node is fine. */
	int fd = jail_walk(inside, is_dir, 0, 0);
	int rc;

	if (fd < 0)
		return -1;
	rc = mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
			   sizeof(attr));
	if (rc != 0 && errno == ENOSYS) {
		/* Kernels before 5.12: remount the top mount only. */
		char target[64];
		unsigned long flags = MS_REMOUNT | MS_BIND;

		flags |= (attrs & MOUNT_ATTR_RDONLY) ? MS_RDONLY : 0;
		flags |= (attrs & MOUNT_ATTR_NOSUID) ? MS_NOSUID : 0;
		flags |= (attrs & MOUNT_ATTR_NODEV) ? MS_NODEV : 0;
		flags |= (attrs & MOUNT_ATTR_NOEXEC) ? MS_NOEXEC : 0;
		fd_path(target, fd);
		rc = mount(NULL, target, NULL, flags, NULL);
	}
	if (rc != 0) {
		int err = errno;

		close(fd);
		return fail("restrict the mount at %s: %s", inside, strerror(err));
	}
	close(fd);
	return 0;
}

/* Whether the mount holding `path` already has `attrs` (a bind copies its source's). */
static int has_attributes(const char *path, uint64_t attrs)
{
	struct statvfs vfs;
	unsigned long want = 0;

	want |= (attrs & MOUNT_ATTR_RDONLY) ? ST_RDONLY : 0;
	want |= (attrs & MOUNT_ATTR_NOSUID) ? ST_NOSUID : 0;
	want |= (attrs & MOUNT_ATTR_NODEV) ? ST_NODEV : 0;
	want |= (attrs & MOUNT_ATTR_NOEXEC) ? ST_NOEXEC : 0;
	return statvfs(path, &vfs) == 0 && (vfs.f_flag & want) == want;
}

/* Bind `source` (a path in the pod) at `inside`, then give the new mount `attrs` unless its
 * source mount has them already (for a recursive bind: the top one; the runtime mounts
 * /proc, /sys and /dev, and everything it mounts below them, nosuid). */
static int bind_in(const char *source, const char *inside, int recursive, uint64_t attrs)
{
	char target[64];
	struct stat st;
	int fd, is_dir;

	if (stat(source, &st) != 0)
		return fail("bind source %s: %s", source, strerror(errno));
	is_dir = S_ISDIR(st.st_mode);
	fd = jail_target(inside, is_dir, 1);
	if (fd < 0)
		return -1;
	fd_path(target, fd);
	if (mount(source, target, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) != 0) {
		int err = errno;

		close(fd);
		return fail("bind %s -> %s in the jail: %s", source, inside, strerror(err));
	}
	close(fd);
	return attrs && !has_attributes(source, attrs) ? restrict_mount(inside, is_dir, attrs, recursive)
						       : 0;
}

/*
 * The pod's /proc, whose sensitive parts the container runtime already masks or makes
 * read-only; a fresh procfs would come without those masks. The kernel tunables are made
 * read-only here where they are not yet, for pods that run privileged (where the runtime
 * masks nothing).
 */
static const char *const proc_read_only[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
					     "/proc/bus", "/proc/fs"};

static int bind_proc(void)
{
	const uint64_t noexec = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;

	if (bind_in("/proc", "/proc", 1, noexec))
		return -1;
	for (size_t i = 0; i < sizeof(proc_read_only) / sizeof(*proc_read_only); i++) {
		const char *path = proc_read_only[i];
		struct statvfs vfs;

		/* Missing, or read-only already (the runtime's own mount came along with /proc). */
		if (statvfs(path, &vfs) != 0 || (vfs.f_flag & ST_RDONLY))
			continue;
		if (bind_in(path, path, 1, noexec | MOUNT_ATTR_RDONLY))
			return -1;
	}
	return 0;
}

/*
 * This job's directory under `parent` (a root-only directory the node made at start):
 * created on the job's first step, mode 1777 like any /tmp, removed by the epilog.
 */
static int job_dir(const char *parent, unsigned int job_id, char *out, size_t out_len)
{
	char name[16];
	struct stat st;
	int parent_fd, fd;

	parent_fd = open(parent, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (parent_fd < 0)
		return fail("job directory parent %s: %s", parent, strerror(errno));
	if (fstat(parent_fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077)) {
		close(parent_fd);
		return fail("job directory parent %s is not private to root", parent);
	}
	snprintf(name, sizeof(name), "%u", job_id);
	if (mkdirat(parent_fd, name, 0700) != 0 && errno != EEXIST) {
		int err = errno;

		close(parent_fd);
		return fail("create %s/%s: %s", parent, name, strerror(err));
	}
	fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(parent_fd);
	if (fd < 0)
		return fail("open %s/%s: %s", parent, name, strerror(errno));
	if (fstat(fd, &st) != 0 || st.st_uid != 0 || fchmod(fd, 01777) != 0) {
		close(fd);
		return fail("%s/%s is not root's own directory", parent, name);
	}
	close(fd);
	snprintf(out, out_len, "%s/%s", parent, name);
	return 0;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Make the mount at `root` the calling process's `/`: move it over the old root, chroot. */
static int switch_root(const char *root)
{
	if (chdir(root) != 0)
		return fail("chdir %s: %s", root, strerror(errno));
	if (mount(".", "/", NULL, MS_MOVE, NULL) != 0)
		return fail("move %s over /: %s", root, strerror(errno));
	if (chroot(".") != 0)
		return fail("chroot into %s: %s", root, strerror(errno));
	if (chdir("/") != 0)
		return fail("chdir / in %s: %s", root, strerror(errno));
	return 0;
}

static int private_namespace(void)
{
	if (unshare(CLONE_NEWNS) != 0)
		return fail("unshare(CLONE_NEWNS): %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return fail("make / private: %s", strerror(errno));
	return 0;
}

static int in_private_namespace;

enum jail_copy { JAIL_COPY_ABSENT, JAIL_COPY_SAME, JAIL_COPY_DIFFERENT };

/*
 * What the jail holds at `inside` (reached without a symlink) against the node's `source`:
 * nothing, the node's regular file as a package installed both (same size, modification time,
 * which dpkg keeps from the package, mode and owner), or something else. Binding the node's
 * copy over the same file would change nothing a task can see, and each bind is a mount and a
 * remount on every step: the Slurm client commands alone were two thirds of a step's mounts.
 */
static enum jail_copy jail_copy_of(const char *source, const char *inside)
{
	struct stat node, jail;
	int fd, same;

	while (*inside == '/')
		inside++;
	fd = open_beneath(root_fd, inside, O_PATH, 0);
	if (fd < 0)
		return JAIL_COPY_ABSENT;
	same = fstat(fd, &jail) == 0 && S_ISREG(jail.st_mode) && stat(source, &node) == 0 &&
	       S_ISREG(node.st_mode) && jail.st_size == node.st_size &&
	       jail.st_mtim.tv_sec == node.st_mtim.tv_sec &&
	       jail.st_mtim.tv_nsec == node.st_mtim.tv_nsec && jail.st_mode == node.st_mode &&
	       jail.st_uid == node.st_uid && jail.st_gid == node.st_gid;
	close(fd);
	return same ? JAIL_COPY_SAME : JAIL_COPY_DIFFERENT;
}

/* The symlink at `source` made anew as `name` in directory `dir_fd` (`buf`: scratch). */
static int copy_link(const char *source, int dir_fd, const char *name, char *buf, size_t len)
{
	ssize_t n = readlink(source, buf, len - 1);

	if (n < 0)
		return fail("read link %s: %s", source, strerror(errno));
	buf[n] = '\0';
	if (symlinkat(buf, dir_fd, name) != 0)
		return fail("link /dev/%s in the jail: %s", name, strerror(errno));
	return 0;
}

/*
 * The jail's /dev on a GPU node: a tmpfs holding each entry of the pod's /dev (bound; links
 * made anew), but no GPU device node other than `gpus` and not the pod's /dev/shm (the job
 * gets its own). A node missing from /dev cannot be opened by an unprivileged task, which
 * may not create one either (no CAP_MKNOD, no_new_privs: task_limits.c).
 */
static int build_dev(const struct gpu_devices *gpus)
{
	char target[64], link[PATH_MAX], source[PATH_MAX], inside[PATH_MAX];
	struct dirent *entry;
	DIR *pod_dev;
	int fd, rc = 0;

	fd = jail_target("/dev", 1, 1);
	if (fd < 0)
		return -1;
	fd_path(target, fd);
	if (mount("dev", target, "tmpfs", MS_NOSUID, "mode=0755,size=64k") != 0) {
		int err = errno;

		close(fd);
		return fail("mount a tmpfs at /dev in the jail: %s", strerror(err));
	}
	close(fd);
	fd = jail_target("/dev", 1, 0); /* the new tmpfs */
	if (fd < 0)
		return -1;
	pod_dev = opendir("/dev");
	if (!pod_dev) {
		close(fd);
		return fail("open the pod's /dev: %s", strerror(errno));
	}
	while (!rc && (entry = readdir(pod_dev))) {
		const char *name = entry->d_name;
		struct stat st;

		if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "shm"))
			continue;
		if (gpu_is_device_name(name) && !gpu_is_visible(gpus, name))
			continue;
		snprintf(source, sizeof(source), "/dev/%s", name);
		if (lstat(source, &st) != 0)
			continue; /* gone meanwhile */
		if (S_ISLNK(st.st_mode)) {
			rc = copy_link(source, fd, name, link, sizeof(link));
			continue;
		}
		snprintf(inside, sizeof(inside), "/dev/%s", name);
		rc = bind_in(source, inside, S_ISDIR(st.st_mode), MOUNT_ATTR_NOSUID);
	}
	closedir(pod_dev);
	close(fd);
	return rc;
}

static int bind_node_local(const struct jail_config *cfg, unsigned int job_id,
			   const struct gpu_devices *gpus, int *gpu_bound)
{
	const uint64_t plain = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	char dir[PATH_MAX];

	/* Device nodes must stay usable (GPUs, /dev/null); no setuid program comes from there. */
	if (bind_proc() || bind_in("/sys", "/sys", 1, plain | MOUNT_ATTR_NOEXEC) ||
	    (gpus ? build_dev(gpus) : bind_in("/dev", "/dev", 1, MOUNT_ATTR_NOSUID)))
		return -1;
	if (job_dir(cfg->job_tmp, job_id, dir, sizeof(dir)) || bind_in(dir, "/tmp", 0, plain))
		return -1;
	if (job_dir(cfg->job_shm, job_id, dir, sizeof(dir)) || bind_in(dir, "/dev/shm", 0, plain))
		return -1;
	if (cfg->munge[0] && is_dir(cfg->munge) && bind_in(cfg->munge, cfg->munge, 0, plain))
		return -1;
	if (cfg->spool[0] && bind_in(cfg->spool, cfg->spool, 0, plain))
		return -1;
	for (size_t i = 0; i < cfg->n_binds; i++) {
		const struct jail_bind *b = &cfg->binds[i];

		/* Each node has only its own pool's submounts: bind those that exist here. */
		if (b->if_present && jail_copy_of(b->source, b->target) != JAIL_COPY_DIFFERENT)
			continue;
		if (access(b->source, F_OK) == 0 &&
		    bind_in(b->source, b->target, 1, plain | (b->read_only ? MOUNT_ATTR_RDONLY : 0)))
			return -1;
	}
	/* Only GPU nodes stage driver files (the slurmd entrypoint does), so its absence is normal. */
	if (cfg->gpu_driver[0] && is_dir(cfg->gpu_driver)) {
		if (bind_in(cfg->gpu_driver, cfg->gpu_driver, 1, plain | MOUNT_ATTR_RDONLY))
			return -1;
		*gpu_bound = 1;
	}
	return 0;
}

/*
 * What a container sees of the jail: the users' homes (where jobs keep their files and
 * usually run) and, read-only, its user and group files, so that names resolve as in the
 * jail. Each source is opened beneath the jail without following a symlink, as every target.
 */
static const struct {
	const char *path;
	int is_dir, read_only;
} jail_pieces[] = {{"/home", 1, 0}, {"/etc/passwd", 0, 1}, {"/etc/group", 0, 1}};

static int bind_jail_pieces(int jail_fd)
{
	const uint64_t plain = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

	for (size_t i = 0; i < sizeof(jail_pieces) / sizeof(*jail_pieces); i++) {
		const char *inside = jail_pieces[i].path;
		char source[64], target[64];
		int src, dst, err;

		src = open_beneath(jail_fd, inside + 1, O_PATH | (jail_pieces[i].is_dir ? O_DIRECTORY : 0), 0);
		if (src < 0) {
			if (errno == ENOENT)
				continue;
			return fail("%s in the jail: %s", inside, why(errno));
		}
		dst = jail_target(inside, jail_pieces[i].is_dir, 1);
		if (dst < 0) {
			close(src);
			return -1;
		}
		fd_path(source, src);
		fd_path(target, dst);
		err = mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0 ? errno : 0;
		close(src);
		close(dst);
		if (err)
			return fail("bind the jail's %s into the container: %s", inside, strerror(err));
		if (restrict_mount(inside, jail_pieces[i].is_dir,
				   plain | (jail_pieces[i].read_only ? MOUNT_ATTR_RDONLY : 0), 1))
			return -1;
	}
	return 0;
}

/* An image's own files are shared by every job on the node that runs it: read-only, and no
 * setuid program or device node of the image's works. */
static int seal_image_root(void)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	};

	if (mount_setattr(root_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0)
		return 0;
	if (errno == ENOSYS) {
		char target[64];

		fd_path(target, root_fd);
		if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
			  NULL) == 0)
			return 0;
	}
	return fail("make the image's root read-only: %s", strerror(errno));
}

/* An image's root, opened in the step's namespace on its way into the jail. */
static int image_fd = -1;

/*
 * The image's tree at CONTAINER_ROOT in the jail (this namespace's mount only): the image
 * root, with the node-local pieces and the jail's pieces bound in, sealed. `jail_fd` is the
 * jail's root.
 */
static int prepare_container(const struct jail_config *cfg, int image, int jail_fd,
			     unsigned int job_id, const struct gpu_devices *gpus, int *gpu_bound)
{
	char source[64], target[64];
	int at, rc;

	root_fd = jail_fd;
	at = jail_target(CONTAINER_ROOT, 1, 1);
	root_fd = -1;
	if (at < 0)
		return -1;
	fd_path(source, image);
	fd_path(target, at);
	rc = mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0 ? errno : 0;
	close(at);
	if (rc)
		return fail("bind the image's root at %s: %s", CONTAINER_ROOT, strerror(rc));
	root_fd = open_beneath(jail_fd, CONTAINER_ROOT + 1, O_PATH | O_DIRECTORY, 0);
	if (root_fd < 0)
		return fail("open %s: %s", CONTAINER_ROOT, strerror(errno));
	rc = bind_node_local(cfg, job_id, gpus, gpu_bound);
	if (!rc)
		rc = bind_jail_pieces(jail_fd);
	if (!rc)
		rc = seal_image_root();
	close(root_fd);
	root_fd = -1;
	return rc;
}


/* A private mount namespace in which the jail, with the node-local pieces, is `/`; with
 * `image`, that directory of the pod opened on the way (without following a symlink). */
static int enter_jail(const struct jail_config *cfg, unsigned int job_id,
		      const struct gpu_devices *gpus, int *gpu_bound, const char *image)
{
	char probe[PATH_MAX];
	int rc;

	*gpu_bound = 0;
	if (snprintf(probe, sizeof(probe), "%s/etc/passwd", cfg->jail) >= (int)sizeof(probe))
		return fail("the jail path %s is too long", cfg->jail);
	if (access(probe, R_OK) != 0)
		return fail("the jail at %s is not usable (%s: %s)", cfg->jail, probe,
			    strerror(errno));
	if (!cfg->job_tmp[0] || !cfg->job_shm[0])
		return fail("plugstack.conf lacks job_tmp= or job_shm=");
	if (private_namespace())
		return -1;
	in_private_namespace = 1;
	/* The jail must be a mount point of its own to be moved over `/`. */
	if (mount(cfg->jail, cfg->jail, NULL, MS_BIND | MS_REC, NULL) != 0)
		return fail("bind %s onto itself: %s", cfg->jail, strerror(errno));
	if (image) {
		struct open_how how = {
			.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		image_fd = (int)syscall(SYS_openat2, AT_FDCWD, image, &how, sizeof(how));
		if (image_fd < 0)
			return fail("the image's root %s: %s", image, why(errno));
	}
	root_fd = open(cfg->jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0)
		return fail("open %s: %s", cfg->jail, strerror(errno));
	rc = bind_node_local(cfg, job_id, gpus, gpu_bound);
	if (!rc && image_fd >= 0) {
		int jail_fd = root_fd, image_gpu_bound;

		/* Before the switch: the node-local pieces are the pod's paths. */
		rc = prepare_container(cfg, image_fd, jail_fd, job_id, gpus, &image_gpu_bound);
		root_fd = jail_fd;
		close(image_fd);
		image_fd = -1;
	}
	close(root_fd);
	root_fd = -1;
	return rc ? rc : switch_root(cfg->jail);
}

int jail_enter(const struct jail_config *cfg, unsigned int job_id, const struct gpu_devices *gpus,
	       int *gpu_bound)
{
	return enter_jail(cfg, job_id, gpus, gpu_bound, NULL);
}

int jail_enter_image(const struct jail_config *cfg, const char *rootfs, unsigned int job_id,
		     const struct gpu_devices *gpus, int *gpu_bound)
{
	return enter_jail(cfg, job_id, gpus, gpu_bound, rootfs);
}

int container_enter_task(void)
{
	char cwd[PATH_MAX];
	int have_cwd = getcwd(cwd, sizeof(cwd)) != NULL;

	if (chroot(CONTAINER_ROOT) != 0)
		return fail("chroot into the image: %s", strerror(errno));
	/* The task's directory by the same path in the image (the jail's /home is there);
	 * where the image has none, / (Slurm 26.05 then moves to the job's directory itself,
	 * or reports that it cannot and starts in /tmp). */
	if (!have_cwd || chdir(cwd) != 0) {
		if (chdir("/") != 0)
			return fail("chdir / in the image: %s", strerror(errno));
	}
	return 0;
}

int jail_enter_void(const struct jail_config *cfg, unsigned int job_id)
{
	char saved[sizeof(jail_error)];
	int gpu_bound, rc;

	memcpy(saved, jail_error, sizeof(saved));
	if (!in_private_namespace && private_namespace())
		return -1;
	in_private_namespace = 1;
	if (mount("void", cfg->jail, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=1m,mode=0755") != 0)
		return fail("mount an empty root at %s: %s", cfg->jail, strerror(errno));
	root_fd = open(cfg->jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0)
		return fail("open %s: %s", cfg->jail, strerror(errno));
	/* slurmstepd still talks to slurmctld and srun (munge, host names) and tracks its tasks
	 * (/proc): the node-local pieces come along, the jail's files do not. */
	rc = bind_node_local(cfg, job_id, NULL, &gpu_bound);
	close(root_fd);
	root_fd = -1;
	if (rc || switch_root(cfg->jail))
		return -1;
	memcpy(jail_error, saved, sizeof(saved));
	return 0;
}
