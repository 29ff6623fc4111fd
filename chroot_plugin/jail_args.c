/* Parser for the chroot plugin's plugstack.conf arguments. */
#include "jail_args.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t err_len, const char *fmt, const char *arg)
{
	snprintf(err, err_len, fmt, arg);
	return -1;
}

/* An absolute path with no "." or ".." component: nothing may point outside its mount. */
static int is_clean_absolute(const char *path)
{
	if (path[0] != '/')
		return 0;
	for (const char *p = path; *p; p++) {
		if (p[0] == '/' && p[1] == '.' &&
		    (p[2] == '/' || p[2] == '\0' || (p[2] == '.' && (p[3] == '/' || p[3] == '\0'))))
			return 0;
	}
	return 1;
}

/* Copy the first `len` bytes of `value`, a clean absolute path, into cfg's strings. */
static int copy_path(struct jail_config *cfg, const char **dst, const char *value, size_t len,
		     const char *arg, char *err, size_t err_len)
{
	char *copy;

	if (len >= PATH_MAX)
		return fail(err, err_len, "'%s': the path is too long", arg);
	if (len + 1 > sizeof(cfg->strings) - cfg->strings_used)
		return fail(err, err_len, "'%s': the arguments are too long altogether", arg);
	copy = cfg->strings + cfg->strings_used;
	memcpy(copy, value, len);
	copy[len] = '\0';
	if (!is_clean_absolute(copy))
		return fail(err, err_len, "'%s': the path must be absolute, without '.' or '..'", arg);
	cfg->strings_used += len + 1;
	*dst = copy;
	return 0;
}

static int set_path(struct jail_config *cfg, const char **dst, const char *value, const char *arg,
		    char *err, size_t err_len)
{
	return copy_path(cfg, dst, value, strlen(value), arg, err, err_len);
}

static int add_bind(struct jail_config *cfg, const char *value, int read_only, int user,
		    const char *arg, char *err, size_t err_len)
{
	const char *colon = strchr(value, ':');
	struct jail_bind *bind = &cfg->binds[cfg->n_binds];

	if (!colon)
		return fail(err, err_len, "'%s': expected SOURCE:TARGET", arg);
	if (cfg->n_binds == JAIL_MAX_BINDS)
		return fail(err, err_len, "'%s': too many binds", arg);
	if (copy_path(cfg, &bind->source, value, (size_t)(colon - value), arg, err, err_len) ||
	    set_path(cfg, &bind->target, colon + 1, arg, err, err_len))
		return -1;
	if (strcmp(colon + 1, "/") == 0)
		return fail(err, err_len, "'%s': cannot bind over the jail's root", arg);
	cfg->binds[cfg->n_binds].read_only = read_only;
	cfg->binds[cfg->n_binds].user = user;
	cfg->n_binds++;
	return 0;
}

/* container_insecure=HOST[:PORT],...: registry names, passed to the fetch program as given. */
static int set_registries(struct jail_config *cfg, const char *value, const char *arg, char *err,
			  size_t err_len)
{
	size_t len = strlen(value);
	char *copy;

	if (!len || strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:,[]") !=
			    len || value[0] == '-')
		return fail(err, err_len, "'%s': expected HOST[:PORT] names separated by commas", arg);
	if (len + 1 > sizeof(cfg->strings) - cfg->strings_used)
		return fail(err, err_len, "'%s': the arguments are too long altogether", arg);
	copy = cfg->strings + cfg->strings_used;
	memcpy(copy, value, len + 1);
	cfg->strings_used += len + 1;
	cfg->container_insecure = copy;
	return 0;
}

/* client=PATH: the node's own file or directory at PATH, read-only, over the jail's copy of
 * it. Tasks then run the Slurm client of the slurmd that started them, whatever Slurm the
 * jail's packages hold; a jail without the path keeps having none. */
static int add_client(struct jail_config *cfg, const char *value, const char *arg, char *err,
		      size_t err_len)
{
	struct jail_bind *bind = &cfg->binds[cfg->n_binds];

	if (cfg->n_binds == JAIL_MAX_BINDS)
		return fail(err, err_len, "'%s': too many binds", arg);
	if (set_path(cfg, &bind->source, value, arg, err, err_len))
		return -1;
	bind->target = bind->source;
	bind->read_only = 1;
	bind->if_present = 1;
	cfg->n_binds++;
	return 0;
}

/* Whether mounting at target hides path: target is path, lies under it, or contains it. */
static int covers(const char *target, const char *path)
{
	size_t t = strlen(target), p = strlen(path);

	if (!p)
		return 0;
	if (t >= p && !strncmp(target, path, p) && (target[p] == '\0' || target[p] == '/'))
		return 1;
	return t < p && !strncmp(path, target, t) && path[t] == '/';
}

/* A user's submount may not cover what every job needs (the spec refuses these too; this is
 * the plugin's own check, for a plugstack.conf written by other means). */
static int check_user_binds(const struct jail_config *cfg, char *err, size_t err_len)
{
	const char *reserved[] = {"/proc", "/sys", "/dev", "/etc", "/run", "/tmp",
				  cfg->spool, cfg->munge, cfg->gpu_driver};

	for (size_t i = 0; i < cfg->n_binds; i++) {
		if (!cfg->binds[i].user)
			continue;
		for (size_t j = 0; j < sizeof(reserved) / sizeof(reserved[0]); j++) {
			if (covers(cfg->binds[i].target, reserved[j])) {
				snprintf(err, err_len, "submount target '%s' would cover %s",
					 cfg->binds[i].target, reserved[j]);
				return -1;
			}
		}
	}
	return 0;
}

int jail_parse_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t err_len)
{
	/* Not the strings: zeroing them would touch every page of them. */
	memset(cfg, 0, offsetof(struct jail_config, strings_used));
	cfg->strings_used = 0;
	cfg->jail = cfg->spool = cfg->munge = cfg->gpu_driver = cfg->gpus = "";
	cfg->job_tmp = cfg->job_shm = "";
	cfg->container_fetch = cfg->container_cache = cfg->container_insecure = "";
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		const char *eq = strchr(arg, '=');
		const char *value = eq ? eq + 1 : "";
		size_t key_len = eq ? (size_t)(eq - arg) : strlen(arg);
		int rc;

		if (key_len == 4 && !strncmp(arg, "jail", 4))
			rc = set_path(cfg, &cfg->jail, value, arg, err, err_len);
		else if (key_len == 5 && !strncmp(arg, "spool", 5))
			rc = set_path(cfg, &cfg->spool, value, arg, err, err_len);
		else if (key_len == 5 && !strncmp(arg, "munge", 5))
			rc = set_path(cfg, &cfg->munge, value, arg, err, err_len);
		else if (key_len == 10 && !strncmp(arg, "gpu_driver", 10))
			rc = set_path(cfg, &cfg->gpu_driver, value, arg, err, err_len);
		else if (key_len == 4 && !strncmp(arg, "gpus", 4))
			rc = set_path(cfg, &cfg->gpus, value, arg, err, err_len);
		else if (key_len == 7 && !strncmp(arg, "job_tmp", 7))
			rc = set_path(cfg, &cfg->job_tmp, value, arg, err, err_len);
		else if (key_len == 7 && !strncmp(arg, "job_shm", 7))
			rc = set_path(cfg, &cfg->job_shm, value, arg, err, err_len);
		else if ((key_len == 8 && !strncmp(arg, "submount", 8)) ||
			 (key_len == 4 && !strncmp(arg, "bind", 4)))
			rc = add_bind(cfg, value, 0, key_len == 8, arg, err, err_len);
		else if (key_len == 7 && !strncmp(arg, "ro_bind", 7))
			rc = add_bind(cfg, value, 1, 0, arg, err, err_len);
		else if (key_len == 6 && !strncmp(arg, "client", 6))
			rc = add_client(cfg, value, arg, err, err_len);
		else if (key_len == 15 && !strncmp(arg, "container_fetch", 15))
			rc = set_path(cfg, &cfg->container_fetch, value, arg, err, err_len);
		else if (key_len == 15 && !strncmp(arg, "container_cache", 15))
			rc = set_path(cfg, &cfg->container_cache, value, arg, err, err_len);
		else if (key_len == 18 && !strncmp(arg, "container_insecure", 18))
			rc = set_registries(cfg, value, arg, err, err_len);
		else if (key_len == 13 && !strncmp(arg, "allow_opt_out", 13)) {
			if (strcmp(value, "0") && strcmp(value, "1"))
				return fail(err, err_len, "'%s': allow_opt_out takes 0 or 1", arg);
			cfg->allow_opt_out = value[0] == '1';
			rc = 0;
		} else
			return fail(err, err_len,
				    "unknown argument '%s' (known: jail=, spool=, munge=, gpu_driver=, gpus=, "
				    "job_tmp=, job_shm=, submount=, bind=, ro_bind=, client=, allow_opt_out=, "
				    "container_fetch=, container_cache=, container_insecure=)", arg);
		if (rc)
			return rc;
	}
	if (!cfg->jail[0])
		return fail(err, err_len, "%s", "jail=PATH is required");
	if (strcmp(cfg->jail, "/") == 0)
		return fail(err, err_len, "%s", "jail=/ would not isolate anything");
	if (!cfg->container_fetch[0] != !cfg->container_cache[0])
		return fail(err, err_len, "%s", "container_fetch= and container_cache= go together");
	return check_user_binds(cfg, err, err_len);
}
