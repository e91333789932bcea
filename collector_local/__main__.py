from __future__ import annotations

import sys

if sys.argv[1:2] == ["doctor"]:
    from collector_local.doctor import main as doctor

    sys.exit(doctor(sys.argv[2:]))

from collector_local.run import main

sys.exit(main())
