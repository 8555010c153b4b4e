/* hookcheck fixture: imports waitpid and flock (not hooked, they block)
 * and read (hooked). Never run: only its imports matter. */
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 5) {
        flock(0, LOCK_EX);
        waitpid(-1, NULL, 0);
    }
    char c;
    return (int)read(0, &c, 0);
}
