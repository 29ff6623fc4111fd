/* The node's side of `--container-image`: validating a reference, running the fetch program. */
#define _GNU_SOURCE
#include "container_image.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
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

/* In the child: the fetch program with stdout and stderr on `out`, nothing else inherited. */
static void exec_fetch(const struct jail_config *cfg, const char *ref, int out)
{
	char *const env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			     "LANG=C.UTF-8", NULL};
	const char *argv[8];
	int n = 0, null;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	null = open("/dev/null", O_RDONLY); /* fd 0 may be one of the job's files */
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
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
	dprintf(STDOUT_FILENO, "cannot run %s: %s\n", cfg->container_fetch, strerror(errno));
	_exit(127);
}

int container_fetch(const struct jail_config *cfg, const char *ref, char *rootfs,
		    size_t rootfs_len, char *err, size_t err_len)
{
	/* The program prints progress and one last line: `rootfs=DIR`, or why it failed. */
	char output[4096];
	size_t used = 0;
	int pipe_fds[2], status;
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
	for (;;) {
		ssize_t got;

		/* Keep the tail: the last line is what counts. */
		if (used == sizeof(output) - 1) {
			memmove(output, output + sizeof(output) / 2, sizeof(output) / 2 - 1);
			used = sizeof(output) / 2 - 1;
		}
		got = read(pipe_fds[0], output + used, sizeof(output) - 1 - used);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		used += (size_t)got;
	}
	output[used] = '\0';
	close(pipe_fds[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(err, err_len, "waitpid: %s", strerror(errno));
			return -1;
		}
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
