/* Unit tests of --container-image's node side: which references pass, and how the fetch
 * program's output and exit status become a root filesystem or an error. Fake fetch programs
 * are shell scripts written to a temporary directory (prints "N passed, N failed"). */
#define _GNU_SOURCE
#include "../container_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];
#define CHECK_DETAIL err
#include "check.h"

static char dir[] = "/tmp/container-image-test.XXXXXX";

/* A jail_config whose fetch program is a script running `body`. */
static void config_with_program(struct jail_config *cfg, const char *body, const char *insecure)
{
	char path[256], cache[256], fetch[300], cache_arg[300], insecure_arg[300];
	char *argv[4] = {"jail=/mnt/jail", fetch, cache_arg, insecure_arg};
	FILE *f;

	snprintf(path, sizeof(path), "%s/fetch", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	f = fopen(path, "w");
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(path, 0755);
	snprintf(fetch, sizeof(fetch), "container_fetch=%s", path);
	snprintf(cache_arg, sizeof(cache_arg), "container_cache=%s", cache);
	snprintf(insecure_arg, sizeof(insecure_arg), "container_insecure=%s", insecure);
	if (jail_parse_args(insecure[0] ? 4 : 3, argv, cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "parse: %s\n", err);
		exit(2);
	}
}

int main(void)
{
	static struct jail_config cfg;
	char rootfs[4096], expected[300], *args_only[] = {"jail=/mnt/jail", "container_fetch=/x"};

	CHECK(container_ref_valid("registry.example:5000/team/app:1.0"));
	CHECK(container_ref_valid("ubuntu"));
	CHECK(container_ref_valid("app@sha256:0123abcd"));
	CHECK(!container_ref_valid(""));
	CHECK(!container_ref_valid("--authfile=/etc/shadow"));
	CHECK(!container_ref_valid("/etc/passwd"));
	CHECK(!container_ref_valid("oci:../../root"));
	CHECK(!container_ref_valid("app;rm -rf /"));
	CHECK(!container_ref_valid("reg//app"));
	memset(rootfs, 'a', 300);
	rootfs[300] = '\0';
	CHECK(!container_ref_valid(rootfs));

	CHECK(jail_parse_args(2, args_only, &cfg, err, sizeof(err)) == -1);
	CHECK(strstr(err, "go together") != NULL);

	if (!mkdtemp(dir))
		return 2;
	snprintf(expected, sizeof(expected), "%s/cache/sha256-1/rootfs", dir);

	/* Progress lines, then the root filesystem; the program gets its options and the reference. */
	config_with_program(&cfg,
			    "echo \"$@\" > \"$(dirname \"$0\")/args\"; echo pulling; "
			    "echo \"rootfs=$(dirname \"$0\")/cache/sha256-1/rootfs\"",
			    "reg.local:5000");
	CHECK(container_fetch(&cfg, "reg.local:5000/app:1", rootfs, sizeof(rootfs), err,
			      sizeof(err)) == 0);
	CHECK(strcmp(rootfs, expected) == 0);
	{
		char args_path[300], args[512] = "", want[512];
		FILE *f;

		snprintf(args_path, sizeof(args_path), "%s/args", dir);
		f = fopen(args_path, "r");
		if (f) {
			if (!fgets(args, sizeof(args), f))
				args[0] = '\0';
			fclose(f);
		}
		snprintf(want, sizeof(want), "--cache %s/cache --insecure reg.local:5000 -- reg.local:5000/app:1\n", dir);
		CHECK(strcmp(args, want) == 0);
	}

	/* A failure: the last line is the reason. */
	config_with_program(&cfg, "echo trying; echo \"cannot pull image 'x': manifest unknown\"; exit 1",
			    "");
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);
	CHECK(strcmp(err, "cannot pull image 'x': manifest unknown") == 0);

	/* Only an environment with PATH and LANG reaches the program. */
	setenv("SECRET_TOKEN", "s3cret", 1);
	config_with_program(&cfg, "env | grep -q SECRET && { echo leaked; exit 1; }; "
				  "echo \"rootfs=$(dirname \"$0\")/cache/sha256-1/rootfs\"", "");
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == 0);

	/* A root filesystem outside the cache, or none named, is refused. */
	config_with_program(&cfg, "echo rootfs=/", "");
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);
	CHECK(strstr(err, "named no root filesystem") != NULL);
	config_with_program(&cfg, "echo \"rootfs=$(dirname \"$0\")/cache/../../etc\"", "");
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);
	config_with_program(&cfg, "echo \"rootfs=$(dirname \"$0\")/cache-other/x\"", "");
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);

	/* An invalid reference never reaches the program; a missing program is a clear error. */
	CHECK(container_fetch(&cfg, "-x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);
	CHECK(strstr(err, "is not an image reference") != NULL);
	config_with_program(&cfg, "", "");
	snprintf(rootfs, sizeof(rootfs), "%s/fetch", dir);
	unlink(rootfs);
	CHECK(container_fetch(&cfg, "x", rootfs, sizeof(rootfs), err, sizeof(err)) == -1);
	CHECK(strstr(err, "cannot run") != NULL);

	snprintf(rootfs, sizeof(rootfs), "rm -rf %s", dir);
	if (system(rootfs) != 0)
		return 2;
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
