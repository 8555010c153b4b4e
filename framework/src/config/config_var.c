/* Variable values: publication, the lock-free getters, checks, listeners,
 * and the commit that ends every successful load.
 *
 * A variable's value is recomputed from its sources (cli > env > file >
 * default) under the registry lock and published through atomics: `bits`
 * for scalars, `ptr` for strings, lists and maps. The objects a published
 * pointer may point to are owned by a source slot or the default; when a
 * load replaces a slot's object it is retired, not freed, because a reader
 * on another thread may still hold it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

void sp__cvar_publish(sp_cvar_t *v, const sp_cvalue_t *val, const char *source)
{
    if (sp__type_is_scalar(v->type)) {
        uint64_t bits = 0;
        if (v->type == SP_CVAR_FLOAT)
            memcpy(&bits, &val->u.f, sizeof bits);
        else if (v->type == SP_CVAR_BOOL)
            bits = val->u.b;
        else
            bits = (uint64_t)val->u.i;
        atomic_store_explicit(&v->bits, bits, memory_order_release);
    } else {
        atomic_store_explicit(&v->ptr, sp__value_object(val), memory_order_release);
    }
    atomic_store_explicit(&v->source, source, memory_order_release);
}

/* ---- getters ------------------------------------------------------------ */

void sp_cvar_get(const sp_cvar_t *v, sp_cvalue_t *out)
{
    out->type = v->type;
    if (!sp__type_is_scalar(v->type)) {
        void *p = atomic_load_explicit(&((sp_cvar_t *)v)->ptr, memory_order_acquire);
        if (v->type == SP_CVAR_STRING)
            out->u.s = p;
        else if (v->type == SP_CVAR_LIST)
            out->u.list = p;
        else
            out->u.map = p;
        return;
    }
    uint64_t bits = atomic_load_explicit(&((sp_cvar_t *)v)->bits, memory_order_acquire);
    if (v->type == SP_CVAR_FLOAT)
        memcpy(&out->u.f, &bits, sizeof out->u.f);
    else if (v->type == SP_CVAR_BOOL)
        out->u.b = bits != 0;
    else
        out->u.i = (int64_t)bits;
}

static bool int_like(const sp_cvar_t *v)
{
    return v && (v->type == SP_CVAR_INT || v->type == SP_CVAR_DURATION ||
                 v->type == SP_CVAR_SIZE);
}

static sp_cvalue_t get_if(const sp_cvar_t *v, sp_cvar_type_t t)
{
    sp_cvalue_t out = {.type = t};
    if (v && (v->type == t || (t == SP_CVAR_INT && int_like(v))))
        sp_cvar_get(v, &out);
    return out;
}

int64_t sp_cvar_int(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_INT).u.i;
}

int64_t sp_cvar_duration(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_DURATION).u.i;
}

int64_t sp_cvar_size(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_SIZE).u.i;
}

double sp_cvar_float(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_FLOAT).u.f;
}

bool sp_cvar_bool(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_BOOL).u.b;
}

const char *sp_cvar_string(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_STRING).u.s;
}

const sp_strlist_t *sp_cvar_list(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_LIST).u.list;
}

const sp_strmap_t *sp_cvar_map(const sp_cvar_t *v)
{
    return get_if(v, SP_CVAR_MAP).u.map;
}

const char *sp_cvar_name(const sp_cvar_t *v)
{
    return v->name;
}

const char *sp_cvar_desc(const sp_cvar_t *v)
{
    return v->desc;
}

sp_cvar_type_t sp_cvar_type(const sp_cvar_t *v)
{
    return v->type;
}

const char *sp_cvar_env_name(const sp_cvar_t *v)
{
    return v->env;
}

const char *sp_cvar_source(const sp_cvar_t *v)
{
    return atomic_load_explicit(&((sp_cvar_t *)v)->source, memory_order_acquire);
}

/* ---- checks and listeners ----------------------------------------------- */

int sp_cvar_set_check(sp_cvar_t *v, sp_cvar_check_fn fn, void *arg)
{
    if (!v)
        return -EINVAL;
    pthread_mutex_lock(&v->cfg->lock);
    v->check = fn;
    v->check_arg = arg;
    pthread_mutex_unlock(&v->cfg->lock);
    return 0;
}

int sp_cvar_listen(sp_cvar_t *v, sp_cvar_listener_fn fn, void *arg)
{
    if (!v || !fn)
        return -EINVAL;
    pthread_mutex_lock(&v->cfg->lock);
    sp__clistener_t *l = realloc(v->listeners, (v->nlisteners + 1) * sizeof *l);
    if (l) {
        v->listeners = l;
        l[v->nlisteners++] = (sp__clistener_t){fn, arg};
    }
    pthread_mutex_unlock(&v->cfg->lock);
    return l ? 0 : -ENOMEM;
}

/* ---- commit ------------------------------------------------------------- */

/* The slot a variable's value comes from now (NULL: the default). */
static const sp__cslot_t *winner(const sp_cvar_t *v)
{
    for (int s = SRC_COUNT; s-- > 0;)
        if (v->src[s].set)
            return &v->src[s];
    return NULL;
}

void sp__config_commit(sp_config_t *cfg)
{
    /* Publish everything first, then notify, so a listener reading another
     * variable already sees the whole new configuration. `changes` has room
     * for every variable (grown at declaration), so this cannot fail. */
    size_t n = 0;
    for (size_t i = 0; i < cfg->nvars; i++) {
        sp_cvar_t *v = cfg->vars[i];
        const sp__cslot_t *w = winner(v);
        const sp_cvalue_t *val = w ? &w->val : &v->def;
        sp_cvalue_t old;
        sp_cvar_get(v, &old);
        bool changed = !sp__value_equal(&old, val);
        sp__cvar_publish(v, val, w ? w->where : "default");
        if (changed)
            cfg->changes[n++] = (sp__cchange_t){v, old};
    }
    for (size_t c = 0; c < n; c++) {
        sp_cvar_t *v = cfg->changes[c].v;
        sp_cvalue_t cur;
        sp_cvar_get(v, &cur);
        for (size_t l = 0; l < v->nlisteners; l++)
            v->listeners[l].fn(v, &cfg->changes[c].old, &cur, v->listeners[l].arg);
    }
}
