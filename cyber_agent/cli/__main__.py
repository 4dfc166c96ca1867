"""`python -m cyber_agent.cli`: the same command line as `cyber-agent`."""

import sys

from cyber_agent.cli._main import main

sys.exit(main())
