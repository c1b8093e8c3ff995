"""`python -m irscope ...`: the same as the `irscope` command."""
import sys

from irscope.cli import main

sys.exit(main())
