"""``python -m tpuport_agent``: the agent without the embedded interpreter (same events)."""

import sys

from tpuport_agent import main

sys.exit(main())
