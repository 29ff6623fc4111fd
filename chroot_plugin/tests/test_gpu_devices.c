/* Unit tests of gpu_devices.c: the node's GPUs from its gres.conf lines, a step's selection
 * from Slurm's indexes, and a task's numbering. Prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../gpu_devices.h"

#include "check.h"

static void write_conf(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	fputs(content, f);
	fclose(f);
}

int main(void)
{
	char conf[] = "/tmp/test_gpu_devices.XXXXXX", err[512], out[256];
	struct gpu_devices node, step;
	int fd = mkstemp(conf);

	close(fd);
	/* A 4-GPU pod on an 8-GPU host: the host's minors, in Slurm's index order. */
	write_conf(conf, "# The GPUs of pod p\n"
			 "Name=gpu Type=h100 File=/dev/nvidia4\n"
			 "Name=gpu Type=h100 File=/dev/nvidia5\n"
			 "Name=gpu Type=h100 File=/dev/nvidia6\n"
			 "Name=gpu Type=h100 File=/dev/nvidia7\n");
	CHECK(gpu_read_node(conf, &node, err, sizeof(err)) == 0);
	CHECK(node.n == 4 && !strcmp(node.path[0], "/dev/nvidia4") &&
	      !strcmp(node.path[3], "/dev/nvidia7"));

	/* Slurm's indexes 1 and 3 are the pod's second and fourth GPU. */
	CHECK(gpu_select(&node, "1,3", &step, err, sizeof(err)) == 0);
	CHECK(step.n == 2 && !strcmp(step.path[0], "/dev/nvidia5") &&
	      !strcmp(step.path[1], "/dev/nvidia7"));
	CHECK(gpu_is_visible(&step, "nvidia5") && !gpu_is_visible(&step, "nvidia4"));
	/* Tasks number what they see from 0; a task bound to index 3 sees it as GPU 1. */
	CHECK(gpu_task_list(&step, NULL, out, sizeof(out)) == 0 && !strcmp(out, "0,1"));
	CHECK(gpu_task_list(&step, "3", out, sizeof(out)) == 0 && !strcmp(out, "1"));
	CHECK(gpu_task_list(&step, "0,3", out, sizeof(out)) == 0 && !strcmp(out, "1"));
	CHECK(gpu_task_list(&step, "x", out, sizeof(out)) == -1);

	/* No GPU for the step: an empty selection; nonsense or an index the node lacks fails. */
	CHECK(gpu_select(&node, "", &step, err, sizeof(err)) == 0 && step.n == 0);
	CHECK(gpu_select(&node, "4", &step, err, sizeof(err)) == -1 &&
	      strstr(err, "this node has 4 GPU(s)"));
	CHECK(gpu_select(&node, "GPU-1234", &step, err, sizeof(err)) == -1);
	CHECK(gpu_select(&node, "1,", &step, err, sizeof(err)) == 0 && step.n == 1);
	CHECK(gpu_select(&node, "1;2", &step, err, sizeof(err)) == -1);

	/* Device names: nvidiaN only, not nvidiactl, nvidia-uvm or nvidia-caps. */
	CHECK(gpu_is_device_name("nvidia12") && !gpu_is_device_name("nvidiactl") &&
	      !gpu_is_device_name("nvidia-uvm") && !gpu_is_device_name("nvidia"));

	/* An empty file (a CPU pod) and a missing one: no GPUs; a line without a device: refused. */
	write_conf(conf, "");
	CHECK(gpu_read_node(conf, &node, err, sizeof(err)) == 0 && node.n == 0);
	unlink(conf);
	CHECK(gpu_read_node(conf, &node, err, sizeof(err)) == 0 && node.n == 0);
	write_conf(conf, "Name=gpu File=nvidia0\n");
	CHECK(gpu_read_node(conf, &node, err, sizeof(err)) == -1 && strstr(err, "line 1"));
	unlink(conf);

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
