"""`python -m testtime.cli`: the `testtime` command."""

from testtime.cli import main

main()
