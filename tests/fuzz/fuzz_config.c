/* Fuzz target for the configuration parser (libFuzzer interface).
 *
 * With clang: cmake -DCMAKE_C_COMPILER=clang -DSPINDLE_FUZZ=ON, then run
 * bin/fuzz_config [corpus dir].
 * Every build also has fuzz_config_replay: the same entry point driven by
 * a main() that feeds it the files named on the command line; ctest runs
 * it on the seed corpus (tests/fuzz/config/ and the shipped YAML in conf/,
 * which scripts/fuzz.sh starts libFuzzer from) so the target keeps
 * compiling and working.
 *
 * One input is loaded as a YAML file into a registry with a variable of
 * every type and a section, then used as a "-s key=value" setting and as a
 * duration and a size. Nothing may crash, leak or hang, and a failed load
 * must leave every value as it was. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/config.h>

static int walk(const sp_cnode_t *n, int depth)
{
    int count = 1;
    for (size_t i = 0; n && i < sp_cnode_len(n) && depth < 100; i++) {
        (void)sp_cnode_key(n, i);
        count += walk(sp_cnode_item(n, i), depth + 1);
    }
    return count;
}

static int sect_check(const sp_cnode_t *node, sp_config_report_t *r, void **staged,
                      void *arg)
{
    (void)arg;
    *staged = NULL;
    if (node && sp_cnode_kind(node) == SP_CNODE_SCALAR && strcmp(sp_cnode_text(node), "bad") == 0) {
        sp_config_error(r, node, "bad section");
        return -1;
    }
    walk(node, 0);
    return 0;
}

static sp_config_t *make_registry(void)
{
    static const sp_config_section_ops_t ops = {sect_check, NULL, NULL};
    static const sp_cvar_decl_t decls[] = {
        {"a.int", SP_CVAR_INT, "1", "-100", "100", NULL, NULL},
        {"a.float", SP_CVAR_FLOAT, "0.5", "0", "1", NULL, NULL},
        {"a.bool", SP_CVAR_BOOL, "true", NULL, NULL, NULL, NULL},
        {"a.str", SP_CVAR_STRING, "x", NULL, NULL, NULL, NULL},
        {"b.dur", SP_CVAR_DURATION, "1s", "0", "1d", NULL, NULL},
        {"b.size", SP_CVAR_SIZE, "1KiB", "0", "1TiB", NULL, NULL},
        {"c.list", SP_CVAR_LIST, "[a, b]", NULL, NULL, NULL, NULL},
        {"c.map", SP_CVAR_MAP, "{k: v}", NULL, NULL, NULL, NULL},
    };
    sp_config_t *cfg = sp_config_create();
    if (!cfg || sp_config_declare(cfg, decls, sizeof decls / sizeof decls[0], NULL) < 0 ||
        sp_config_section(cfg, "s", &ops, NULL) < 0)
        abort();
    return cfg;
}

/* The printed configuration: equal before and after a failed load. */
static char *snapshot(sp_config_t *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f || sp_config_print(cfg, f) < 0)
        abort();
    fclose(f);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_config_t *cfg = make_registry();
    char *before = snapshot(cfg);
    char *err = NULL;
    int rc = sp_config_load_string(cfg, "fuzz", (const char *)data, size, &err);
    char *after = snapshot(cfg);
    if (rc < 0 && (strcmp(before, after) != 0 || !err))
        abort(); /* a failed load changed something, or did not say why */
    free(err);

    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    sp_config_set(cfg, text, &err);
    free(err);
    int64_t v;
    sp_parse_duration(text, &v);
    sp_parse_size(text, &v);
    free(text);
    free(before);
    free(after);
    sp_config_destroy(cfg);
    return 0;
}

#ifdef SP_FUZZ_REPLAY
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_config_replay FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (replay_file(argv[i]) < 0) {
            fprintf(stderr, "fuzz_config_replay: cannot read %s\n", argv[i]);
            return 1;
        }
    printf("fuzz_config_replay: %d inputs ok\n", argc - 1);
    return 0;
}
#endif
