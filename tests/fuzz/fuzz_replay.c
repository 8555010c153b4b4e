/* Without libFuzzer (every build): a main that replays the seed files
 * given as arguments through a fuzz target, so each target keeps compiling
 * and its seeds keep passing, under the sanitizers too. A target reports a
 * finding by crashing or aborting. */
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    static uint8_t buf[1 << 20];
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
            return 1;
        }
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        fprintf(stderr, "%s\n", argv[i]); /* which seed, if it fails */
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%s: %d inputs ok\n", argv[0], argc - 1);
    return 0;
}
