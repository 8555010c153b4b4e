/* hookcheck fixture: imports fdopen (stdio on a socket is not hooked).
 * Never run: only its imports matter. */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    FILE *f = argc > 5 ? fdopen(3, "r") : NULL;
    return f ? fclose(f) : 0;
}
