/* hookcheck fixture: a program that needs libfix_system.so (through
 * DT_RUNPATH $ORIGIN/../lib) and imports nothing that blocks itself. */
int fix_run(const char *command);

int main(int argc, char **argv)
{
    return argc > 5 ? fix_run(argv[1]) : 0;
}
