from __future__ import annotations

import sys

from collector_local.run import main

sys.exit(main())
