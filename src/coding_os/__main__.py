"""`python -m coding_os` runs the `cos` command."""

import sys

from coding_os.interfaces.entry import main

sys.exit(main())
