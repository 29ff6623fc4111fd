/*
 * The jail's mounts and a task's limits, run for real as root without Slurm: each case forks
 * a child that enters a scratch jail the way slurmstepd does, then checks from inside.
 * Prints "N passed, N failed". Usage: test_jail_mounts SCRATCH_DIR (empty, root-owned).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../jail_mounts.h"
#include "../task_limits.h"

#define CHECK_DETAIL jail_error
#include "check.h"

static char scratch[256];

static void path(char *out, const char *relative)
{
	snprintf(out, PATH_MAX, "%s/%s", scratch, relative);
}

/* The scratch path of `relative`, as a string that lives as long as the test. */
static const char *at(const char *relative)
{
	char p[PATH_MAX];

	path(p, relative);
	return strdup(p);
}

static void make_dir(const char *relative, mode_t mode)
{
	char p[PATH_MAX];

	path(p, relative);
	mkdir(p, mode);
	chmod(p, mode);
}

static void write_file(const char *relative, const char *content)
{
	char p[PATH_MAX];
	FILE *f;

	path(p, relative);
	f = fopen(p, "w");
	fputs(content, f);
	fclose(f);
}

static int contains(const char *file, const char *needle)
{
	char buf[4096] = "";
	FILE *f = fopen(file, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, needle) != NULL;
}

static int mount_flags(const char *p, unsigned long flag)
{
	struct statvfs st;

	return statvfs(p, &st) == 0 && (st.f_flag & flag) == flag;
}

static void config(struct jail_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->munge = cfg->gpu_driver = cfg->gpus = "";
	cfg->jail = at("jail");
	cfg->job_tmp = at("job-tmp");
	cfg->job_shm = at("job-shm");
	cfg->spool = at("spool");
	cfg->binds[0].source = at("scratch-source");
	cfg->binds[0].target = "/scratch";
	cfg->binds[1].source = at("site-source");
	cfg->binds[1].target = "/opt/site";
	cfg->binds[1].read_only = 1;
	/* client=: the node's srun over the jail's; the jail has no sbatch, so none appears. */
	cfg->binds[2].source = at("node-srun");
	cfg->binds[2].target = "/usr/bin/srun";
	cfg->binds[3].source = at("node-srun");
	cfg->binds[3].target = "/usr/bin/sbatch";
	/* client=: the jail's scontrol is the node's file as a package installed both. */
	cfg->binds[4].source = at("node-scontrol");
	cfg->binds[4].target = "/usr/bin/scontrol";
	for (int i = 2; i < 5; i++)
		cfg->binds[i].read_only = cfg->binds[i].if_present = 1;
	cfg->n_binds = 5;
}

/* Run `body` in a child process; its exit status counts its own failed checks. */
static void in_child(void (*body)(void))
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		passed = failed = 0;
		body();
		_exit(failed > 100 ? 100 : failed);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		failed++;
		fprintf(stderr, "a child case failed (status %d)\n", status);
	} else {
		passed++;
	}
}

static void enters_the_jail(void)
{
	struct jail_config cfg;
	char pod_marker[PATH_MAX];
	int gpu = -1, fd;

	config(&cfg);
	path(pod_marker, "pod-only");
	CHECK(jail_enter(&cfg, 42, NULL, &gpu) == 0);
	CHECK(gpu == 0);
	CHECK(contains("/etc/passwd", "jail-passwd"));
	/* Nothing of the pod: neither by its old path nor through the spool or /proc. */
	CHECK(access(pod_marker, F_OK) != 0);
	CHECK(access("/proc/1/root/etc/passwd", R_OK) != 0 ||
	      !contains("/proc/1/root/etc/passwd", "pod-only"));
	/* The job's own /tmp (1777, nosuid, nodev), its /dev/shm, the spool. */
	struct stat st;
	CHECK(stat("/tmp", &st) == 0 && (st.st_mode & 07777) == 01777);
	CHECK(mount_flags("/tmp", ST_NOSUID | ST_NODEV));
	fd = open("/tmp/job-file", O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	close(fd);
	fd = open("/dev/shm/job-shm-file", O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	close(fd);
	CHECK(access(cfg.spool, F_OK) == 0);
	/* Submounts: read-write ones nosuid,nodev; read-only ones read-only. */
	CHECK(mount_flags("/scratch", ST_NOSUID | ST_NODEV));
	CHECK(!mount_flags("/scratch", ST_RDONLY));
	CHECK(mount_flags("/opt/site", ST_RDONLY | ST_NOSUID | ST_NODEV));
	CHECK(contains("/opt/site/modules", "gcc"));
	/* The node's Slurm client over the jail's, read-only; nothing where the jail has none. */
	CHECK(contains("/usr/bin/srun", "node-srun"));
	CHECK(mount_flags("/usr/bin/srun", ST_RDONLY | ST_NOSUID | ST_NODEV));
	CHECK(access("/usr/bin/sbatch", F_OK) != 0 && errno == ENOENT);
	/* The jail's copy where it is the node's file: no mount (the jail's own, writable fs). */
	CHECK(contains("/usr/bin/scontrol", "same-scontrol"));
	CHECK(!mount_flags("/usr/bin/scontrol", ST_RDONLY));
	/* Kernel tunables stay read-only; writing back nothing, the open itself must fail. */
	fd = open("/proc/sys/kernel/core_pattern", O_WRONLY);
	CHECK(fd < 0 && errno == EROFS);
	if (fd >= 0)
		close(fd);
	CHECK(mount_flags("/proc", ST_NOSUID | ST_NODEV | ST_NOEXEC));
	/* No way up out of the new root. */
	CHECK(chdir("/..") == 0 && contains("etc/passwd", "jail-passwd"));
}

/* A GPU pod's /dev as the runtime makes it: four GPUs at the host's minors 4-7 and the rest. */
static void fake_pod_dev(void)
{
	char name[32], host[PATH_MAX];

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("dev", "/dev", "tmpfs", MS_NOSUID, "mode=0755")) {
		fprintf(stderr, "cannot fake a pod's /dev\n");
		_exit(100);
	}
	mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3));
	mknod("/dev/nvidiactl", S_IFCHR | 0666, makedev(195, 255));
	for (int minor = 4; minor < 8; minor++) {
		snprintf(name, sizeof(name), "/dev/nvidia%d", minor);
		mknod(name, S_IFCHR | 0666, makedev(195, minor));
	}
	symlink("/proc/self/fd", "/dev/fd");
	/* A device node bound from a mount without nosuid, as a host's /dev can be. */
	path(host, "host-dev");
	mkdir(host, 0755);
	mount("host-dev", host, "tmpfs", 0, "mode=0755");
	path(host, "host-dev/nvidia-uvm");
	mknod(host, S_IFCHR | 0666, makedev(235, 0));
	close(open("/dev/nvidia-uvm", O_WRONLY | O_CREAT, 0644));
	mount(host, "/dev/nvidia-uvm", NULL, MS_BIND, NULL);
	mkdir("/dev/pts", 0755);
	mkdir("/dev/shm", 01777);
	mknod("/dev/shm/pod-only", S_IFREG | 0644, 0);
}

static void a_step_sees_only_its_gpus(void)
{
	struct jail_config cfg;
	struct gpu_devices step = {.n = 1, .path = {"/dev/nvidia5"}, .index = {1}};
	char link[64] = "";
	struct stat st;
	int gpu, fd;

	fake_pod_dev();
	config(&cfg);
	CHECK(jail_enter(&cfg, 46, &step, &gpu) == 0);
	CHECK(stat("/dev/nvidia5", &st) == 0 && S_ISCHR(st.st_mode) && minor(st.st_rdev) == 5);
	CHECK(access("/dev/nvidia4", F_OK) != 0 && errno == ENOENT);
	CHECK(access("/dev/nvidia6", F_OK) != 0 && access("/dev/nvidia7", F_OK) != 0);
	/* Everything else of the pod's /dev stays: control device, null, links, directories. */
	CHECK(stat("/dev/nvidiactl", &st) == 0 && S_ISCHR(st.st_mode));
	CHECK(stat("/dev/nvidia-uvm", &st) == 0 && S_ISCHR(st.st_mode));
	CHECK(mount_flags("/dev/nvidia-uvm", ST_NOSUID));
	fd = open("/dev/null", O_WRONLY);
	CHECK(fd >= 0 && write(fd, "x", 1) == 1);
	if (fd >= 0)
		close(fd);
	CHECK(readlink("/dev/fd", link, sizeof(link) - 1) > 0 && !strcmp(link, "/proc/self/fd"));
	CHECK(stat("/dev/pts", &st) == 0 && S_ISDIR(st.st_mode));
	/* /dev/shm is the job's own, not the pod's; /dev itself takes no setuid program. */
	CHECK(access("/dev/shm/pod-only", F_OK) != 0);
	fd = open("/dev/shm/job-file", O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(mount_flags("/dev", ST_NOSUID));
}

static void a_step_without_gpus_sees_none(void)
{
	struct jail_config cfg;
	struct gpu_devices none = {.n = 0};
	int gpu;

	fake_pod_dev();
	config(&cfg);
	CHECK(jail_enter(&cfg, 47, &none, &gpu) == 0);
	for (int minor = 4; minor < 8; minor++) {
		char name[32];

		snprintf(name, sizeof(name), "/dev/nvidia%d", minor);
		CHECK(access(name, F_OK) != 0);
	}
	CHECK(access("/dev/nvidiactl", F_OK) == 0 && access("/dev/null", W_OK) == 0);
}

static void task_limits_for(uid_t uid)
{
	char err[256];

	CHECK(task_limit_privileges(uid, err, sizeof(err)) == 0);
	/* Kept: CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, FSETID 4, KILL 5, SETGID 6, SETUID 7,
	 * NET_BIND_SERVICE 10; gone: SYS_ADMIN 21 among all others. */
	CHECK(contains("/proc/self/status", "CapBnd:\t00000000000004fb"));
	CHECK(contains("/proc/self/status", uid ? "NoNewPrivs:\t1" : "NoNewPrivs:\t0"));
}

static void limits_user_task(void)
{
	task_limits_for(1000);
}

static void limits_root_task(void)
{
	task_limits_for(0);
}

static void refuses_a_symlink_and_falls_back_to_an_empty_root(void)
{
	struct jail_config cfg;
	int gpu;

	config(&cfg);
	/* A user with write access somewhere in the jail plants a link at a bind target. */
	cfg.binds[0].target = "/home/user/link/scratch";
	CHECK(jail_enter(&cfg, 43, NULL, &gpu) == -1);
	CHECK(strstr(jail_error, "symlink") != NULL);
	CHECK(jail_enter_void(&cfg, 43) == 0);
	CHECK(strstr(jail_error, "symlink") != NULL); /* the first reason is kept */
	CHECK(access("/etc/passwd", F_OK) != 0);     /* none of the jail's files */
	CHECK(access(cfg.spool, F_OK) == 0);         /* what slurmstepd itself needs */
	CHECK(access("/proc/self/status", R_OK) == 0);
	CHECK(access("/tmp", W_OK) == 0);
}

static void refuses_an_unusable_jail(void)
{
	struct jail_config cfg;
	int gpu;

	config(&cfg);
	cfg.jail = at("empty");
	CHECK(jail_enter(&cfg, 44, NULL, &gpu) == -1);
	CHECK(strstr(jail_error, "is not usable") != NULL);
}

static void refuses_a_shared_job_directory_parent(void)
{
	struct jail_config cfg;
	int gpu;

	config(&cfg);
	cfg.job_tmp = at("open-parent");
	CHECK(jail_enter(&cfg, 45, NULL, &gpu) == -1);
	CHECK(strstr(jail_error, "not private to root") != NULL);
}

int main(int argc, char **argv)
{
	char p[PATH_MAX], q[PATH_MAX];

	if (argc != 2 || getuid() != 0) {
		fprintf(stderr, "usage (as root): test_jail_mounts SCRATCH_DIR\n");
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "%s", argv[1]);
	make_dir("jail", 0755);
	make_dir("jail/etc", 0755);
	write_file("jail/etc/passwd", "jail-passwd\n");
	make_dir("jail/home", 0755);
	make_dir("jail/home/user", 0777);
	path(p, "jail/home/user/link");
	symlink("/", p);
	make_dir("empty", 0755);
	make_dir("job-tmp", 0700);
	make_dir("job-shm", 0700);
	make_dir("open-parent", 0755);
	make_dir("spool", 0755);
	make_dir("scratch-source", 0755);
	make_dir("site-source", 0755);
	write_file("site-source/modules", "gcc/14\n");
	write_file("pod-only", "pod-only\n");
	make_dir("jail/usr", 0755);
	make_dir("jail/usr/bin", 0755);
	write_file("jail/usr/bin/srun", "jail-srun\n");
	write_file("node-srun", "node-srun, not the jail's\n");
	write_file("jail/usr/bin/scontrol", "same-scontrol\n");
	write_file("node-scontrol", "same-scontrol\n");
	{
		struct timespec stamp[2] = {{.tv_sec = 1700000000, .tv_nsec = 5},
					    {.tv_sec = 1700000000, .tv_nsec = 5}};

		path(p, "jail/usr/bin/scontrol");
		utimensat(AT_FDCWD, p, stamp, 0);
		path(p, "node-scontrol");
		utimensat(AT_FDCWD, p, stamp, 0);
	}

	in_child(enters_the_jail);
	path(p, "job-tmp/42/job-file");
	path(q, "job-shm/42/job-shm-file");
	CHECK(access(p, F_OK) == 0); /* the job's /tmp is its directory on the node */
	CHECK(access(q, F_OK) == 0);
	in_child(limits_user_task);
	in_child(limits_root_task);
	in_child(refuses_a_symlink_and_falls_back_to_an_empty_root);
	in_child(refuses_an_unusable_jail);
	in_child(refuses_a_shared_job_directory_parent);
	in_child(a_step_sees_only_its_gpus);
	in_child(a_step_without_gpus_sees_none);

	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
