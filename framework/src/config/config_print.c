/* --print-config: every variable with its description, value and source,
 * as flat dotted YAML keys, so the output is itself a valid config file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static int by_name(const void *a, const void *b)
{
    const sp_cvar_t *x = *(sp_cvar_t *const *)a, *y = *(sp_cvar_t *const *)b;
    return strcmp(x->name, y->name);
}

static int print_var(const sp_cvar_t *v, FILE *out, char **buf, size_t *len)
{
    sp_cvalue_t val;
    sp_cvar_get(v, &val);
    size_t need = sp__value_format(&val, *buf, *len);
    if (need >= *len) {
        char *b = realloc(*buf, need + 1);
        if (!b)
            return -ENOMEM;
        *buf = b;
        *len = need + 1;
        sp__value_format(&val, *buf, *len);
    }
    if (*v->desc && fprintf(out, "# %s (%s)\n", v->desc, sp__type_name(v->type)) < 0)
        return -EIO;
    return fprintf(out, "%s: %s  # %s\n", v->name, *buf, sp_cvar_source(v)) < 0 ? -EIO
                                                                               : 0;
}

int sp_config_print(sp_config_t *cfg, FILE *out)
{
    cfg = sp__config(cfg);
    if (!cfg || !out)
        return -EINVAL;
    /* Copy the variable list so printing (which may block on a pipe) does
     * not hold the registry lock; values are read lock-free. */
    pthread_mutex_lock(&cfg->lock);
    size_t n = cfg->nvars, len = 256;
    sp_cvar_t **vars = malloc((n + 1) * sizeof *vars);
    if (vars && n)
        memcpy(vars, cfg->vars, n * sizeof *vars);
    pthread_mutex_unlock(&cfg->lock);
    char *buf = malloc(len);
    int rc = vars && buf ? 0 : -ENOMEM;
    if (rc == 0 && n)
        qsort(vars, n, sizeof *vars, by_name);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = print_var(vars[i], out, &buf, &len);
    free(vars);
    free(buf);
    if (rc == 0 && fflush(out) != 0)
        rc = -EIO;
    return rc;
}
