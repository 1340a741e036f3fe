"""bundlectl's exit codes, one set for every command: scripts rely on them."""

EXIT_OK = 0
# The command ran but could not do what was asked: something blocks (analyze, install), was
# refused (an archive, a record, an approval) or failed (a platform call, drift found).
EXIT_BLOCKED = EXIT_REFUSED = EXIT_FAILED = 1
EXIT_USAGE = 2
