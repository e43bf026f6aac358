"""python -m jobfleet_worker MODULE:WORKER (see jobfleet_worker.main)."""

import sys

from jobfleet_worker import main

sys.exit(main())
