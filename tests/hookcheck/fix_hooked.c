/* hookcheck fixture: imports only hooked calls (read, poll) and harmless
 * ones. Never run: only its imports matter. */
#include <poll.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    (void)argv;
    struct pollfd p = {.fd = 0, .events = POLLIN};
    char c;
    if (argc > 5 && poll(&p, 1, 0) > 0)
        return (int)read(0, &c, 1);
    return 0;
}
