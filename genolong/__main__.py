"""``python -m genolong ARGS``: the ``genolong`` command, for a child process that runs it with the
same interpreter (the library's checks that run commands end to end use this)."""

import sys

from genolong.cli.main import main

sys.exit(main())
