/* Container images for `--container-image`: which references a user may name, and the node's
 * fetch program that turns one into an unpacked root filesystem. No Slurm dependency, so
 * tests/test_container_image.c runs it on its own. */
#ifndef SLURM_STACK_CONTAINER_IMAGE_H
#define SLURM_STACK_CONTAINER_IMAGE_H

#include <stddef.h>

#include "jail_args.h"

#define CONTAINER_REF_MAX 255
/* srun gives a step 600 s to start (src/api/step_launch.c); the fetch program ends its own
 * work at 540 s, and is killed, with skopeo and umoci, at this limit. */
#define CONTAINER_FETCH_TIMEOUT 570

/*
 * Whether `ref` is an image reference the plugin passes on: 1-255 characters of letters,
 * digits and `._-/:@`, starting with a letter or digit, without `..` or `//`. The fetch
 * program parses it further; this only keeps option-like and path-like strings away from it.
 */
int container_ref_valid(const char *ref);

/*
 * Run cfg->container_fetch for `ref` (as the caller, root, with only PATH in its
 * environment) and put the unpacked root filesystem it names into `rootfs`: a directory
 * under cfg->container_cache. Returns 0, or -1 with the fetch program's last line of output
 * (or why it could not run) in `err`.
 */
int container_fetch(const struct jail_config *cfg, const char *ref, char *rootfs,
		    size_t rootfs_len, char *err, size_t err_len);

#endif
