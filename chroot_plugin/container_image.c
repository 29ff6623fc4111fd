/* The node's side of `--container-image`: validating a reference, running the fetch program. */
#define _GNU_SOURCE
#include "container_image.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int container_ref_valid(const char *ref)
{
	size_t len = strlen(ref);

	if (len == 0 || len > CONTAINER_REF_MAX)
		return 0;
	if (!((ref[0] >= 'a' && ref[0] <= 'z') || (ref[0] >= 'A' && ref[0] <= 'Z') ||
	      (ref[0] >= '0' && ref[0] <= '9')))
		return 0;
	if (strstr(ref, "..") || strstr(ref, "//"))
		return 0;
	return strspn(ref, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") ==
	       len;
}

/* The last non-empty line of `text` (changed in place). */
static const char *last_line(char *text)
{
	char *end = text + strlen(text);

	while (end > text && (end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	while (end > text && end[-1] != '\n')
		end--;
	return end;
}

/* In the child (async-signal-safe calls only: slurmstepd has threads): the fetch program in
 * a session of its own, with stdout and stderr on `out`, default signal dispositions, and no
 * other descriptor of slurmstepd's. */
static void exec_fetch(const struct jail_config *cfg, const char *ref, int out)
{
	static const char failed[] = "cannot run the node's image fetch program\n";
	char *const env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			     "LANG=C.UTF-8", NULL};
	const char *argv[8];
	int n = 0, null;
	sigset_t none;

	setsid(); /* its own process group: a timeout kills skopeo and umoci with it */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (out <= STDERR_FILENO) /* dup2 onto itself would keep its close-on-exec flag */
		out = fcntl(out, F_DUPFD, STDERR_FILENO + 1);
	null = open("/dev/null", O_RDONLY); /* fd 0 may be one of the job's files */
	if (out < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0)
		_exit(127);
	if (close_range(STDERR_FILENO + 1, ~0U, 0) != 0) {
		for (int fd = STDERR_FILENO + 1; fd < 65536; fd++)
			close(fd);
	}
	argv[n++] = cfg->container_fetch;
	argv[n++] = "--cache";
	argv[n++] = cfg->container_cache;
	if (cfg->container_insecure[0]) {
		argv[n++] = "--insecure";
		argv[n++] = cfg->container_insecure;
	}
	argv[n++] = "--";
	argv[n++] = ref;
	argv[n] = NULL;
	execve(cfg->container_fetch, (char *const *)argv, env);
	if (write(STDOUT_FILENO, failed, sizeof(failed) - 1) < 0)
		_exit(127);
	_exit(127);
}

/* Read the child's output into `output` (its tail) until it closes or the deadline passes;
 * whether it closed in time. */
static int read_until(int fd, char *output, size_t size, size_t *used, time_t deadline)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		time_t left = deadline - time(NULL);
		ssize_t got;

		if (left <= 0)
			return 0;
		if (poll(&pfd, 1, (int)(left > 60 ? 60000 : left * 1000)) < 0 && errno != EINTR)
			return 0;
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		/* Keep the tail: the last line is what counts. */
		if (*used == size - 1) {
			memmove(output, output + size / 2, size / 2 - 1);
			*used = size / 2 - 1;
		}
		got = read(fd, output + *used, size - 1 - *used);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return 1;
		*used += (size_t)got;
	}
}

int container_fetch(const struct jail_config *cfg, const char *ref, char *rootfs,
		    size_t rootfs_len, char *err, size_t err_len)
{
	/* The program prints progress and one last line: `rootfs=DIR`, or why it failed. */
	char output[4096];
	size_t used = 0;
	int pipe_fds[2], status, finished;
	const char *line, *dir;
	size_t cache_len = strlen(cfg->container_cache);
	pid_t pid;

	if (!container_ref_valid(ref)) {
		snprintf(err, err_len, "'%s' is not an image reference", ref);
		return -1;
	}
	if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
		snprintf(err, err_len, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, err_len, "fork: %s", strerror(errno));
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		return -1;
	}
	if (pid == 0)
		exec_fetch(cfg, ref, pipe_fds[1]);
	close(pipe_fds[1]);
	finished = read_until(pipe_fds[0], output, sizeof(output), &used,
			      time(NULL) + CONTAINER_FETCH_TIMEOUT);
	output[used] = '\0';
	close(pipe_fds[0]);
	if (!finished)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(err, err_len, "waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (!finished) {
		snprintf(err, err_len, "the image fetch program did not finish in %d s",
			 CONTAINER_FETCH_TIMEOUT);
		return -1;
	}
	line = last_line(output);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, err_len, "%s", *line ? line : "the image fetch program failed");
		return -1;
	}
	dir = strncmp(line, "rootfs=", 7) == 0 ? line + 7 : "";
	/* Only a directory the node's cache holds: never a path the output could point elsewhere. */
	if (strncmp(dir, cfg->container_cache, cache_len) != 0 || dir[cache_len] != '/' ||
	    strstr(dir, "/..") || strstr(dir, "/./") || strlen(dir) >= rootfs_len) {
		snprintf(err, err_len, "the image fetch program named no root filesystem in %s",
			 cfg->container_cache);
		return -1;
	}
	snprintf(rootfs, rootfs_len, "%s", dir);
	return 0;
}
