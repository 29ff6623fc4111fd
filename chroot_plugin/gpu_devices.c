/* Which GPU device nodes a job step may see (see gpu_devices.h). */
#include "gpu_devices.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
	return -1;
}

int gpu_read_node(const char *gres_conf, struct gpu_devices *node, char *err, size_t err_len)
{
	char line[1024];
	FILE *f;
	int line_no = 0;

	memset(node, 0, sizeof(*node));
	f = fopen(gres_conf, "r");
	if (!f)
		return errno == ENOENT ? 0 : fail(err, err_len, "%s: %s", gres_conf, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *file = strstr(line, "File=");
		size_t len;

		line_no++;
		if (line[0] == '#' || !file)
			continue;
		file += strlen("File=");
		len = strcspn(file, " \t\r\n");
		if (node->n == GPU_MAX || len == 0 || len >= GPU_PATH_MAX ||
		    strncmp(file, "/dev/", 5)) {
			fclose(f);
			return fail(err, err_len, "%s line %d: not one GPU of at most %d: %s",
				    gres_conf, line_no, GPU_MAX, line);
		}
		memcpy(node->path[node->n], file, len);
		node->path[node->n][len] = '\0';
		node->index[node->n] = (int)node->n;
		node->n++;
	}
	fclose(f);
	return 0;
}

/* The next index of a comma-separated list at *s; -1 at its end, -2 if malformed. */
static int next_index(const char **s)
{
	char *end;
	long value;

	if (!**s)
		return -1;
	if (!isdigit((unsigned char)**s))
		return -2;
	errno = 0;
	value = strtol(*s, &end, 10);
	if (errno || value >= GPU_MAX || (*end && *end != ','))
		return -2;
	*s = *end ? end + 1 : end;
	return (int)value;
}

int gpu_select(const struct gpu_devices *node, const char *list, struct gpu_devices *step,
	       char *err, size_t err_len)
{
	const char *s = list;
	int wanted[GPU_MAX] = {0};
	int i;

	memset(step, 0, sizeof(*step));
	while ((i = next_index(&s)) >= 0) {
		if ((size_t)i >= node->n)
			return fail(err, err_len, "GPU index %d in '%s': this node has %zu GPU(s)", i,
				    list, node->n);
		wanted[i] = 1;
	}
	if (i == -2)
		return fail(err, err_len, "'%s' is not a list of GPU indexes", list);
	for (size_t k = 0; k < node->n; k++) {
		if (!wanted[k])
			continue;
		memcpy(step->path[step->n], node->path[k], GPU_PATH_MAX);
		step->index[step->n++] = node->index[k];
	}
	return 0;
}

int gpu_task_list(const struct gpu_devices *step, const char *task_list, char *out,
		  size_t out_len)
{
	const char *s = task_list;
	int given[GPU_MAX] = {0};
	size_t used = 0;
	int i;

	if (task_list) {
		while ((i = next_index(&s)) >= 0)
			given[i] = 1;
		if (i == -2)
			return -1;
	}
	out[0] = '\0';
	for (size_t k = 0; k < step->n; k++) {
		int n;

		if (task_list && !given[step->index[k]])
			continue;
		n = snprintf(out + used, out_len - used, "%s%zu", used ? "," : "", k);
		if (n < 0 || (size_t)n >= out_len - used)
			return -1;
		used += (size_t)n;
	}
	return 0;
}

int gpu_is_device_name(const char *name)
{
	if (strncmp(name, "nvidia", 6) || !name[6])
		return 0;
	for (const char *c = name + 6; *c; c++)
		if (!isdigit((unsigned char)*c))
			return 0;
	return 1;
}

int gpu_is_visible(const struct gpu_devices *visible, const char *name)
{
	for (size_t k = 0; k < visible->n; k++) {
		const char *base = strrchr(visible->path[k], '/');

		if (base && !strcmp(base + 1, name))
			return 1;
	}
	return 0;
}
