"""`python -m serving.server`: see `serving.server.http`."""

import sys

from serving.server.http import main

sys.exit(main())
