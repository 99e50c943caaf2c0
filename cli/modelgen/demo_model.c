/* The demonstration model: built once into the data directory. */
#include "cli/modelgen/demo_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/modelgen/model_writer.h"
#include "core/paths.h"
#include "core/registry.h"

#define DEMO_SHAPE "qwen35-demo"
#define DEMO_MIX "Q4_K_M"
#define DEMO_SEED 20240101u

enum splash_status splash_demo_model_path(char *out, size_t size, struct splash_err *err)
{
    char dir[4096];
    enum splash_status st = splash_dir_path(SPLASH_DIR_DATA, "demo", 0, dir, sizeof dir, err);
    if (st)
        return st;
    int len = snprintf(out, size, "%s/%s-%s.gguf", dir, DEMO_SHAPE, DEMO_MIX);
    if (len < 0 || (size_t)len >= size)
        return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: path too long");
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
        return SPLASH_OK;
    if ((st = splash_make_dirs(dir, 0755, err)))
        return st;
    const struct splash_model_shape *shape = splash_model_shape_find(DEMO_SHAPE);
    struct splash_model_write_opts opts = {.mix = DEMO_MIX, .seed = DEMO_SEED,
                                           .general_name = "splash-demo"};
    if ((st = splash_model_write(splash_registry_global(), shape, &opts, out, NULL, err)))
        return st;
    return SPLASH_OK;
}
